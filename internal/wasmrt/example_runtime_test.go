package wasmrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// ExampleRuntime_Load loads a connector from its manifest and module, calls
// an operation, and shows the typed error of an operation the manifest does
// not declare.
func ExampleRuntime_Load() {
	ctx := context.Background()
	// Tests build connectors on demand; a deployment has a built .wasm.
	path, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		panic(err)
	}
	// One compilation cache on disk, shared by every connector and process.
	rt, err := wasmrt.New(ctx, wasmrt.Options{CacheDir: filepath.Join(os.TempDir(), "connhost-example-cache")})
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	m := &manifests.Manifest{
		Connector: manifests.Connector{Name: "noop", ABI: abi.Version, SHA256: digest},
		Limits:    manifests.Limits{Timeout: 5 * time.Second, Instances: 2},
		Operations: []*manifests.Operation{
			{Name: "echo", Effect: manifests.EffectRead, Recovery: manifests.PolicyManual},
		},
	}
	c, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: path})
	if err != nil {
		panic(err)
	}
	out, err := c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecute, Operation: "echo", ExecutionID: "ex_1", Args: []byte(`{"hello":"world"}`)})
	fmt.Println(out.Kind, string(out.Result), err)

	_, err = c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecute, Operation: "refund"})
	var ce *wasmrt.CallError
	fmt.Println(errors.As(err, &ce), errors.Is(err, wasmrt.ErrUnknownOperation), ce.MayHaveActed())
	fmt.Println(err)
	// Output:
	// ok {"hello":"world"} <nil>
	// true true false
	// connector[noop] op[refund] export[connhost_execute]: unknown_operation: operation "refund" is not declared by the manifest
}
