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

func TestModelName(t *testing.T) {
	for tool, want := range map[string]string{
		"payments.create_payment":       "payments_create_payment",
		"email.send":                    "email_send",
		"my-conn.op__with__underscores": "my-conn_op__with__underscores",
		"a__b.c":                        "a__b_c",
	} {
		got, err := ModelName(tool)
		if err != nil || got != want {
			t.Errorf("ModelName(%q) = %q, %v; want %q", tool, got, err, want)
		}
		if !ModelNameRE.MatchString(got) {
			t.Errorf("ModelName(%q) = %q does not match %s", tool, got, ModelNameRE)
		}
	}
}

func TestModelNameRefuses(t *testing.T) {
	for _, tool := range []string{
		"nodot", ".op", "conn.", "a.b.c",
		"c." + strings.Repeat("o", 63), // 65 characters once mapped
	} {
		if _, err := ModelName(tool); !errors.Is(err, ErrName) {
			t.Errorf("ModelName(%q) = %v, want ErrName", tool, err)
		}
	}
}

func parse(t *testing.T, path, src string) *manifests.Manifest {
	t.Helper()
	m, err := manifests.Parse(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func oneOp(connector, op string) string {
	return "[connector]\nname = \"" + connector + "\"\nversion = \"1.0.0\"\nabi = 1\nmodule = \"x.wasm\"\n\n" +
		"[[operation]]\nname = \"" + op + "\"\ndescription = \"d\"\neffect = \"read\"\ninput_schema = '{\"type\":\"object\"}'\n"
}

// TestNamesResolve: every name a caller may use resolves to the dotted
// tool: the model name, the dotted name, the old "__" form.
func TestNamesResolve(t *testing.T) {
	n, err := NamesOf([]*manifests.Manifest{parse(t, "payments.toml", manifest)})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"payments_create_payment":  "payments.create_payment",
		"payments.create_payment":  "payments.create_payment",
		"payments__create_payment": "payments.create_payment",
		"payments_get_payment":     "payments.get_payment",
	} {
		if got, ok := n.Canonical(name); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"payments_refund", "payments", "create_payment", "payments-create_payment"} {
		if got, ok := n.Canonical(name); ok {
			t.Errorf("Canonical(%q) = %q, want no tool", name, got)
		}
	}
}

// TestNamesCollide: two tools that map to one model name do not load,
// and the error names both with their files.
func TestNamesCollide(t *testing.T) {
	ms := []*manifests.Manifest{parse(t, "manifests/a_b.toml", oneOp("a_b", "c")), parse(t, "manifests/a.toml", oneOp("a", "b_c"))}
	_, err := NamesOf(ms)
	if !errors.Is(err, ErrName) {
		t.Fatalf("NamesOf = %v, want ErrName", err)
	}
	for _, want := range []string{`"a_b_c"`, "a_b.c (manifests/a_b.toml)", "a.b_c (manifests/a.toml)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := Tools(ms); !errors.Is(err, ErrName) {
		t.Errorf("Tools = %v, want ErrName", err)
	}
	if _, err := Build(ms, FormatMCP); !errors.Is(err, ErrName) {
		t.Errorf("Build = %v, want ErrName", err)
	}
}

// TestNamesOldFormAmbiguous: the old "__" form resolves only where it
// names one tool and no model name is spelled so.
func TestNamesOldFormAmbiguous(t *testing.T) {
	// x__y.z and x.y__z: both were "x__y__z" before; neither keeps it.
	ms := []*manifests.Manifest{parse(t, "p.toml", oneOp("x__y", "z")), parse(t, "q.toml", oneOp("x", "y__z"))}
	n, err := NamesOf(ms)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := n.Canonical("x__y__z"); ok {
		t.Errorf("Canonical(x__y__z) = %q, want no tool (ambiguous)", got)
	}
	for name, want := range map[string]string{"x__y_z": "x__y.z", "x_y__z": "x.y__z"} {
		if got, ok := n.Canonical(name); !ok || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", name, got, ok, want)
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
