package wasmrt

import (
	"context"
	"testing"

	"github.com/connhost/connhost/abi"
)

// TestHostFunctionBounds calls the host functions directly with pointers
// outside guest memory and malformed input: each answers with a status,
// none panics, and nothing is written out of place.
func TestHostFunctionBounds(t *testing.T) {
	rt, logs := newTestRuntime(t, Options{Config: func(string, string) (string, bool) { return "v", true }})
	m, lo := testManifest(t, "noop", "noop", ops("echo"))
	m.Capabilities.Config = []string{"k"}
	c := mustLoad(t, rt, m, lo)
	ctx := context.Background()
	inst, err := c.pool.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.pool.put(inst)
	cc := &callCtx{Context: ctx, inst: inst, phase: phaseCall, op: "echo", execID: "ex"}
	mod := inst.mod
	const oob = 0xFFFFFFF0
	i32 := func(v uint64) int32 { return int32(uint32(v)) }

	stack := []uint64{abi.LevelInfo, oob, 100}
	logFn(cc, mod, stack)
	contains(t, logs.String(), "guest log message outside guest memory")

	stack = []uint64{oob, 4}
	configGetFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusBadRequest {
		t.Fatalf("config_get out of bounds = %d", i32(stack[0]))
	}

	stack = []uint64{0, 0}
	takeFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusNothingPending {
		t.Fatalf("take with nothing pending = %d", i32(stack[0]))
	}
	setPending(cc, []byte("abc"))
	stack = []uint64{oob, 64}
	takeFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusBadRequest || !inst.hasPending {
		t.Fatalf("take out of bounds = %d, pending %v", i32(stack[0]), inst.hasPending)
	}
	stack = []uint64{1024, 2}
	takeFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusTooSmall || !inst.hasPending {
		t.Fatalf("take too small = %d, pending %v", i32(stack[0]), inst.hasPending)
	}
	stack = []uint64{1024, 3}
	takeFn(cc, mod, stack)
	if got, _ := mod.Memory().Read(1024, 3); i32(stack[0]) != 3 || string(got) != "abc" || inst.hasPending {
		t.Fatalf("take = %d, memory %q, pending %v", i32(stack[0]), got, inst.hasPending)
	}

	stack = []uint64{oob, 64}
	httpRequestFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusBadRequest {
		t.Fatalf("http_request out of bounds = %d", i32(stack[0]))
	}
	mod.Memory().Write(2048, []byte("garbage envelope"))
	stack = []uint64{2048, 16}
	httpRequestFn(cc, mod, stack)
	if i32(stack[0]) != abi.StatusBadRequest {
		t.Fatalf("http_request with garbage = %d", i32(stack[0]))
	}

	// Outside the call export, http is denied whatever the URL.
	env := abi.HTTPRequest{Method: "GET", URL: "http://127.0.0.1:1/"}.AppendBinary(nil)
	mod.Memory().Write(2048, env)
	pre := &callCtx{Context: ctx, inst: inst, phase: phaseAlloc}
	stack = []uint64{2048, uint64(len(env))}
	httpRequestFn(pre, mod, stack)
	resp, err := abi.DecodeHTTPResponse(inst.pending)
	if err != nil || resp.Err != abi.HTTPDenied {
		t.Fatalf("http before the call export: %+v %v", resp, err)
	}
	inst.pending, inst.hasPending = nil, false
}
