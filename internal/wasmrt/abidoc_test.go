package wasmrt

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// docSignatures returns the signature column of the docs/abi.md table
// under heading: name -> (param types, result types).
func docSignatures(t *testing.T, heading string) map[string]signature {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "abi.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([^`]+)` \\| `\\(([^)]*)\\) -> \\(([^)]*)\\)` \\|")
	out := map[string]signature{}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			in = strings.TrimSpace(strings.TrimLeft(line, "#")) == heading
			continue
		}
		if m := row.FindStringSubmatch(line); in && m != nil {
			out[m[1]] = signature{docTypes(t, m[2]), docTypes(t, m[3])}
		}
	}
	if len(out) == 0 {
		t.Fatalf("docs/abi.md: no signatures under %q", heading)
	}
	return out
}

// docTypes parses "a i32, b i64" (or "i32") into value types.
func docTypes(t *testing.T, s string) []api.ValueType {
	var out []api.ValueType
	for _, p := range strings.Split(s, ",") {
		f := strings.Fields(p)
		if len(f) == 0 {
			continue
		}
		switch f[len(f)-1] {
		case "i32":
			out = append(out, wasmI32)
		case "i64":
			out = append(out, wasmI64)
		default:
			t.Fatalf("docs/abi.md: unknown type in %q", s)
		}
	}
	return out
}

// TestABIDocumentSignaturesAreTheHosts: the signatures docs/abi.md gives
// for exports are the ones Load checks, and those it gives for imports
// are the host functions the host instantiates, parameter for parameter.
func TestABIDocumentSignaturesAreTheHosts(t *testing.T) {
	check := func(kind string, doc, host map[string]signature) {
		for name, want := range host {
			got, ok := doc[name]
			switch {
			case !ok:
				t.Errorf("docs/abi.md: %s %s is missing", kind, name)
			case !sameTypes(got.params, want.params) || !sameTypes(got.results, want.results):
				t.Errorf("docs/abi.md: %s %s is %v -> %v, the host's is %v -> %v", kind, name,
					typeNames(got.params), typeNames(got.results), typeNames(want.params), typeNames(want.results))
			}
		}
		for name := range doc {
			if _, ok := host[name]; !ok {
				t.Errorf("docs/abi.md: %s %s is not the host's", kind, name)
			}
		}
	}
	check("export", docSignatures(t, "Exports"), exportSignatures)
	imports := map[string]signature{}
	for _, f := range hostFunctions {
		imports[f.name] = signature{f.params, f.results}
	}
	check("import", docSignatures(t, "Imports"), imports)
}
