package wasmrt

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/testing/wasmgen"
	"github.com/connhost/connhost/manifests"
)

// problems returns the failed steps as "check subject: detail" lines.
func problems(r CheckReport) string {
	var b strings.Builder
	for _, s := range r.Problems() {
		b.WriteString(s.Check + " " + s.Subject + ": " + s.Detail + "\n")
	}
	return b.String()
}

// TestCheckHandWrittenModuleConforms: the minimal module written byte by
// byte from docs/abi.md passes every step, round trips included: an
// unknown operation (permanent_error), a 256 KiB input (a second
// connhost_alloc) and echo itself.
func TestCheckHandWrittenModuleConforms(t *testing.T) {
	m, _ := genManifest(t, wasmgen.MinimalConnector())
	r := Check(context.Background(), wasmgen.MinimalConnector().Encode(), m)
	if !r.Conforms {
		t.Fatalf("the minimal module does not conform:\n%s", problems(r))
	}
	var trips []string
	for _, s := range r.Steps {
		if s.Check == "round trip" {
			trips = append(trips, s.Subject+" -> "+s.Detail)
		}
	}
	want := []string{
		"an unknown operation, connhost_execute -> permanent_error: unknown",
		"an input of 256 KiB, connhost_execute -> permanent_error: unknown",
		"echo connhost_execute -> ok",
	}
	if strings.Join(trips, "\n") != strings.Join(want, "\n") {
		t.Fatalf("round trips\n%s\nwant\n%s", strings.Join(trips, "\n"), strings.Join(want, "\n"))
	}
	if r.Description == nil || len(r.Description.Operations) != 1 {
		t.Fatalf("description %+v", r.Description)
	}
}

// TestCheckSaysWhatIsWrong breaks the minimal module one rule at a time;
// the check names the rule in an author's terms, and only that rule.
func TestCheckSaysWhatIsWrong(t *testing.T) {
	base := wasmgen.MinimalConnector()
	pack := func(ptr uint32, n int) int64 { return int64(uint64(ptr)<<32 | uint64(n)) }
	tests := []struct {
		name     string
		mod      wasmgen.Module
		manifest func(*manifests.Manifest)
		want     []string // "check subject" prefixes and detail substrings
	}{
		{"an import the host does not offer", base.Importing(wasmgen.Import{Module: "env", Name: "foo"}), nil,
			[]string{"imports env.foo", "your module imports env.foo; the host offers connhost.{"}},
		{"no _initialize", base.Without("_initialize"), nil,
			[]string{"exports _initialize", "an empty exported function is enough"}},
		{"an export of the wrong shape", base.With(wasmgen.Func{Name: "connhost_alloc", Params: []byte{wasmgen.I64}, Results: []byte{wasmgen.I32}, Body: wasmgen.I32Const(0)}), nil,
			[]string{"exports connhost_alloc", "signature [i64] -> [i32], want [i32] -> [i32]"}},
		{"another version", base.With(wasmgen.Func{Name: "connhost_abi_version", Results: []byte{wasmgen.I32}, Body: wasmgen.I32Const(2)}), nil,
			[]string{"abi version connhost_abi_version", "it returns 2; this host speaks abi 1"}},
		{"a description that is not JSON", base.With(wasmgen.Func{Name: "connhost_describe", Results: []byte{wasmgen.I64}, Body: wasmgen.I64Const(pack(512, 8))}), nil,
			[]string{"describe connhost_describe", "invalid character"}},
		{"_initialize traps", base.With(wasmgen.Func{Name: "_initialize", Body: wasmgen.Unreachable}), nil,
			[]string{"initialize _initialize", "unreachable"}},
		{"execute traps", base.With(wasmgen.Func{Name: "connhost_execute", Params: []byte{wasmgen.I32, wasmgen.I32, wasmgen.I32, wasmgen.I32}, Results: []byte{wasmgen.I64}, Body: wasmgen.Unreachable}), nil,
			[]string{"round trip an unknown operation, connhost_execute", "trap", "answer permanent_error"}},
		{"an outcome outside memory", base.With(wasmgen.Func{Name: "connhost_execute", Params: []byte{wasmgen.I32, wasmgen.I32, wasmgen.I32, wasmgen.I32}, Results: []byte{wasmgen.I64}, Body: wasmgen.I64Const(pack(1<<30, 16))}), nil,
			[]string{"round trip an unknown operation, connhost_execute", "bad_envelope", "outside guest memory", "see docs/abi.md, Outcome envelope"}},
		{"a manifest operation the module lacks", base, func(m *manifests.Manifest) {
			m.Operations = append(m.Operations, &manifests.Operation{Name: "send", Effect: manifests.EffectExternal, Recovery: manifests.PolicyIdempotentRetry, MaxAttempts: 3})
		}, []string{"manifest ", "op[send]", "module implements echo"}},
		{"a stale pin", base, func(m *manifests.Manifest) { m.Connector.SHA256 = strings.Repeat("0", 64) },
			[]string{"manifest sha256", "connhost build --pin"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := genManifest(t, tc.mod)
			if tc.manifest != nil {
				tc.manifest(m)
			}
			r := Check(context.Background(), tc.mod.Encode(), m)
			got := problems(r)
			if r.Conforms || got == "" {
				t.Fatalf("conforms; want a problem")
			}
			first := r.Problems()[0]
			if line := first.Check + " " + first.Subject; !strings.HasPrefix(line, tc.want[0]) {
				t.Errorf("first problem %q, want %q\n%s", line, tc.want[0], got)
			}
			for _, w := range tc.want[1:] {
				if !strings.Contains(got, w) {
					t.Errorf("problems do not say %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestCheckShippedConnectors: the Go connectors this repository ships
// conform to the document they were written before, with their manifests.
func TestCheckShippedConnectors(t *testing.T) {
	for _, name := range []string{"noop", "httpprobe"} {
		path, _ := fixture(t, name)
		code, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		r := Check(context.Background(), code, nil)
		if !r.Conforms {
			t.Errorf("%s:\n%s", name, problems(r))
		}
		if r.Description == nil || r.Description.ABI != abi.Version {
			t.Errorf("%s: description %+v", name, r.Description)
		}
	}
}
