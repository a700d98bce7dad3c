package wasmrt

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// hostTake is abi.ImportTake:
//
//	take(out_ptr wasmI32, out_cap wasmI32) -> wasmI32
//
// Parameters: out_ptr and out_cap locate a guest buffer.
//
// Results: the number of bytes copied (the whole pending value, which is
// then cleared); abi.StatusNothingPending when no value is pending;
// abi.StatusTooSmall when out_cap is smaller than the value (it stays
// pending); abi.StatusBadRequest when the value's bytes would land outside
// guest memory (it stays pending).
//
// Memory: writes len(value) bytes at out_ptr, never more than out_cap. The
// pending value is the last one produced by config_get, http_request or
// execution_id in the current call; a new call starts with none.
var hostTake = &hostFunction{
	name:        abi.ImportTake,
	fn:          takeFn,
	params:      []api.ValueType{wasmI32, wasmI32},
	paramNames:  []string{"out_ptr", "out_cap"},
	results:     []api.ValueType{wasmI32},
	resultNames: []string{"len_or_status"},
}

func takeFn(ctx context.Context, mod api.Module, stack []uint64) {
	cc := callOf(ctx)
	if cc == nil || !cc.inst.hasPending {
		stack[0] = status(abi.StatusNothingPending)
		return
	}
	ptr, capacity := uint32(stack[0]), uint32(stack[1])
	v := cc.inst.pending
	if uint64(capacity) < uint64(len(v)) {
		stack[0] = status(abi.StatusTooSmall)
		return
	}
	mem := mod.Memory()
	if mem == nil || !mem.Write(ptr, v) {
		stack[0] = status(abi.StatusBadRequest)
		return
	}
	cc.inst.pending, cc.inst.hasPending = nil, false
	stack[0] = uint64(uint32(len(v)))
}
