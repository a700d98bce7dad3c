package wasmrt

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// hostExecutionID is abi.ImportExecutionID:
//
//	execution_id() -> wasmI32
//
// Parameters: none.
//
// Results: the length of the current call's execution id
// (CallRequest.ExecutionID), now pending for take; 0 outside a call or
// when the call has none.
//
// Memory: none; the id is copied out by take.
var hostExecutionID = &hostFunction{
	name:        abi.ImportExecutionID,
	fn:          executionIDFn,
	results:     []api.ValueType{wasmI32},
	resultNames: []string{"len"},
}

func executionIDFn(ctx context.Context, _ api.Module, stack []uint64) {
	cc := callOf(ctx)
	if cc == nil {
		stack[0] = 0
		return
	}
	stack[0] = uint64(uint32(setPending(cc, []byte(cc.execID))))
}
