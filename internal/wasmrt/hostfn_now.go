package wasmrt

import (
	"context"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// hostNow is abi.ImportNow:
//
//	now() -> wasmI64
//
// Parameters: none.
//
// Results: the host's wall-clock time in Unix nanoseconds.
//
// Memory: none. It cannot fail.
var hostNow = &hostFunction{
	name:        abi.ImportNow,
	fn:          nowFn,
	results:     []api.ValueType{wasmI64},
	resultNames: []string{"unix_nanos"},
}

func nowFn(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = uint64(time.Now().UnixNano())
}
