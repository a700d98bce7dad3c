package wasmrt

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// hostSleep is abi.ImportSleep:
//
//	sleep(nanos wasmI64) -> wasmI32
//
// Parameters: nanos is the duration to sleep; zero or negative returns at
// once.
//
// Results: 0 when the full duration elapsed; abi.StatusDeadline when the
// call's deadline or a cancellation ended the sleep early (the call itself
// is then cut when the guest resumes).
//
// Memory: none.
var hostSleep = &hostFunction{
	name:        abi.ImportSleep,
	fn:          sleepFn,
	params:      []api.ValueType{wasmI64},
	paramNames:  []string{"nanos"},
	results:     []api.ValueType{wasmI32},
	resultNames: []string{"status"},
}

func sleepFn(ctx context.Context, _ api.Module, stack []uint64) {
	d := time.Duration(int64(stack[0]))
	if d <= 0 {
		stack[0] = 0
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		stack[0] = 0
	case <-ctx.Done():
		stack[0] = status(abi.StatusDeadline)
	}
}
