package tooldefs

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/manifests"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestModelNameRoundTrip(t *testing.T) {
	tests := []struct{ tool, model string }{
		{"payments.create_payment", "payments__create_payment"},
		{"email.send", "email__send"},
		{"my-conn.op__with__underscores", "my-conn__op__with__underscores"},
		{"a_b.c", "a_b__c"},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			got, err := ModelName(tt.tool)
			if err != nil || got != tt.model {
				t.Fatalf("ModelName(%q) = %q, %v; want %q", tt.tool, got, err, tt.model)
			}
			back, err := ToolName(got)
			if err != nil || back != tt.tool {
				t.Fatalf("ToolName(%q) = %q, %v; want %q", got, back, err, tt.tool)
			}
		})
	}
	if got, _ := ToolName("email.send"); got != "email.send" {
		t.Errorf("ToolName keeps dotted names, got %q", got)
	}
}

func TestModelNameRefuses(t *testing.T) {
	for _, tool := range []string{
		"nodot", ".op", "conn.", "a.b.c",
		"a__b.c",                       // connector containing the separator: ambiguous
		"c." + strings.Repeat("o", 62), // 65 characters once mapped
	} {
		if _, err := ModelName(tool); !errors.Is(err, ErrName) {
			t.Errorf("ModelName(%q) = %v, want ErrName", tool, err)
		}
	}
	for _, name := range []string{"nosep", "__op", "conn__"} {
		if _, err := ToolName(name); !errors.Is(err, ErrName) {
			t.Errorf("ToolName(%q) = %v, want ErrName", name, err)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatOpenAI, "openai": FormatOpenAI, "Anthropic": FormatAnthropic, "mcp": FormatMCP} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("gemini"); !errors.Is(err, ErrFormat) {
		t.Errorf("ParseFormat(gemini) = %v", err)
	}
}

const manifest = `
[connector]
name = "payments"
version = "1.0.0"
abi = 1
module = "payments.wasm"

[[operation]]
name = "create_payment"
description = "Create a PaymentIntent."
effect = "external"
recovery = "idempotent-retry"
requires_approval = true
input_schema = '''
{
  "type": "object",
  "properties": {"amount": {"type": "integer", "minimum": 1}},
  "required": ["amount"]
}
'''

[[operation]]
name = "get_payment"
description = "Look up a PaymentIntent."
effect = "read"
input_schema = '{"type": "object", "properties": {"id": {"type": "string"}}}'
`

// TestBuildGolden pins the three formats byte for byte.
func TestBuildGolden(t *testing.T) {
	m, err := manifests.Parse("payments.toml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		t.Run(string(f), func(t *testing.T) {
			got, err := JSON([]*manifests.Manifest{m}, f)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", string(f)+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs (run go test -update and review the diff):\n%s", path, got)
			}
		})
	}
}
