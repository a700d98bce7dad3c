package audit

import (
	"fmt"
	"strings"
	"testing"

	"github.com/connhost/connhost/manifests"
)

// TestClosedEmptySchemaIsNotPermissive: an object schema that declares no
// properties and refuses undeclared ones accepts exactly {} (an operation
// without arguments), so the audit does not tell a reviewer it "accepts
// any object"; one that declares none and stays open still does, at the
// top level and nested.
func TestClosedEmptySchemaIsNotPermissive(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   string // "" = no permissive-schema finding
	}{
		{`{"type":"object","properties":{},"additionalProperties":false}`, ""},
		{`{"type":"object","additionalProperties":false}`, ""},
		{`{"type":"object","unevaluatedProperties":false}`, ""},
		{`{"type":"object","properties":{"o":{"type":"object","properties":{},"additionalProperties":false}},"additionalProperties":false}`, ""},
		{`{"type":"object"}`, "declares no properties: it accepts any object"},
		{`{"type":"object","properties":{}}`, "declares no properties: it accepts any object"},
		{`{"type":"object","properties":{"o":{"type":"object"}},"additionalProperties":false}`, "declares no properties: it accepts any object"},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			src := fmt.Sprintf(`[connector]
name = "noargs"
version = "1.0.0"
abi = 1
module = "noargs.wasm"
sha256 = "%s"

[capabilities]
http = ["https://api.example.com:443"]

[[operation]]
name = "ping"
description = "Ask the provider whether it is up."
effect = "read"
input_schema = '''%s'''
`, strings.Repeat("1", 64), tc.schema)
			m, err := manifests.Parse("noargs.toml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			r := Audit([]*manifests.Manifest{m}, Options{})
			var got []string
			for _, f := range r.Findings {
				if f.Code == CodePermissiveSchema {
					got = append(got, f.Message)
				}
			}
			switch {
			case tc.want == "" && len(got) > 0:
				t.Errorf("findings %q for a schema that accepts only {}", got)
			case tc.want != "" && (len(got) != 1 || !strings.Contains(got[0], tc.want)):
				t.Errorf("findings %q, want one saying %q", got, tc.want)
			}
		})
	}
}
