package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/testing/wasmgen"
	"github.com/connhost/connhost/manifests"
)

// genManifest writes mod to a file and returns a manifest pinning it with
// one read operation, echo.
func genManifest(tb testing.TB, mod wasmgen.Module) (*manifests.Manifest, LoadOptions) {
	tb.Helper()
	code := mod.Encode()
	path := filepath.Join(tb.TempDir(), "gen.wasm")
	if err := os.WriteFile(path, code, 0o644); err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(code)
	m := &manifests.Manifest{
		Connector: manifests.Connector{Name: "gen", Version: "1.0.0", ABI: abi.Version, Module: "gen.wasm", SHA256: hex.EncodeToString(sum[:])},
		Limits:    manifests.Limits{Timeout: 5 * time.Second},
		Operations: []*manifests.Operation{
			{Name: "echo", Effect: manifests.EffectRead, MaxAttempts: 1},
		},
	}
	return m, LoadOptions{ModulePath: path}
}

// TestLoadMinimalHandWrittenModule: a module of a few hundred bytes,
// written without any compiler or SDK from docs/abi.md, loads and answers
// a call. The tests below break it one rule at a time.
func TestLoadMinimalHandWrittenModule(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := genManifest(t, wasmgen.MinimalConnector())
	c := mustLoad(t, rt, m, lo)
	o, err := c.Call(context.Background(), execute("echo", `{"x":1}`))
	if err != nil || o.Kind != abi.OutcomeOK || string(o.Result) != "{}" {
		t.Fatalf("call: %+v, %v", o, err)
	}
}

// TestLoadErrorsInTheAuthorsWords: what the host says when it refuses a
// module names the import or export at fault, what the host offers
// instead, and how the usual toolchains fix it. On the host before these
// messages, an unknown import module read "module[env] not instantiated"
// and a missing _initialize "module does not export _initialize".
func TestLoadErrorsInTheAuthorsWords(t *testing.T) {
	base := wasmgen.MinimalConnector()
	tests := []struct {
		name string
		mod  wasmgen.Module
		is   error
		want []string
	}{
		{"an import module the host does not offer", base.Importing(wasmgen.Import{Module: "env", Name: "foo"}), ErrBadModule,
			[]string{"your module imports env.foo", "the host offers connhost.{log, config_get, http_request, take, now, sleep, execution_id} and wasi_snapshot_preview1.*"}},
		{"AssemblyScript's abort", base.Importing(wasmgen.Import{Module: "env", Name: "abort", Params: []byte{wasmgen.I32, wasmgen.I32, wasmgen.I32, wasmgen.I32}}), ErrBadModule,
			[]string{"your module imports env.abort", "--use abort="}},
		{"a host function that does not exist", base.Importing(wasmgen.Import{Module: "connhost", Name: "http_get"}), ErrBadModule,
			[]string{"your module imports connhost.http_get, which the host does not offer", "docs/abi.md"}},
		{"a host function with another signature", base.Importing(wasmgen.Import{Module: "connhost", Name: "log", Params: []byte{wasmgen.I32, wasmgen.I32}}), ErrBadModule,
			[]string{"your module imports connhost.log as [i32 i32] -> []; the host offers it as [i32 i32 i32] -> []"}},
		{"a WASI function wazero does not implement", base.Importing(wasmgen.Import{Module: "wasi_snapshot_preview1", Name: "sock_open"}), ErrBadModule,
			[]string{"wasi_snapshot_preview1.sock_open, a WASI function the host does not implement"}},
		{"no _initialize", base.Without("_initialize"), ErrMissingExport,
			[]string{"module does not export _initialize", "an empty exported function is enough", "--exportStart _initialize"}},
		{"no describe", base.Without("connhost_describe"), ErrMissingExport,
			[]string{"module does not export connhost_describe"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newTestRuntime(t, Options{})
			m, lo := genManifest(t, tc.mod)
			_, err := rt.Load(context.Background(), m, lo)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			for _, w := range append(tc.want, "connector[gen]") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "not instantiated") {
				t.Errorf("error %q still speaks of wazero's instantiation", err)
			}
		})
	}
}
