package host

import (
	"context"
	"log/slog"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// maxLogBytes bounds one guest log message; longer messages are cut.
const maxLogBytes = 16 << 10

// hostLog is abi.ImportLog:
//
//	log(level wasmI32, msg_ptr wasmI32, msg_len wasmI32)
//
// Parameters: level is one of abi.LevelDebug, LevelInfo, LevelWarn,
// LevelError (any other value is used as a slog.Level as is); msg_ptr and
// msg_len locate a UTF-8 message in guest memory.
//
// Results: none.
//
// Memory: reads msg_len bytes at msg_ptr; a message longer than 16 KiB is
// cut to its first 16 KiB. A range outside guest memory is not read: the
// host logs a warning instead. Nothing is written.
//
// The record goes to RuntimeOptions.Logger tagged with connector,
// operation, execution_id and source=guest.
var hostLog = &hostFunction{
	name:       abi.ImportLog,
	fn:         logFn,
	params:     []api.ValueType{wasmI32, wasmI32, wasmI32},
	paramNames: []string{"level", "msg_ptr", "msg_len"},
}

func logFn(ctx context.Context, mod api.Module, stack []uint64) {
	cc := callOf(ctx)
	if cc == nil {
		return
	}
	c := cc.inst.c
	level := slog.Level(int32(uint32(stack[0])))
	if !c.log.Enabled(ctx, level) {
		return
	}
	ptr, n := uint32(stack[1]), uint32(stack[2])
	msg, ok := readGuest(mod, ptr, min(n, maxLogBytes), maxLogBytes)
	if !ok {
		c.log.LogAttrs(ctx, slog.LevelWarn, "guest log message outside guest memory",
			slog.String("operation", cc.op), slog.String("execution_id", cc.execID))
		return
	}
	c.log.LogAttrs(ctx, level, string(msg),
		slog.String("operation", cc.op), slog.String("execution_id", cc.execID), slog.String("source", "guest"))
}
