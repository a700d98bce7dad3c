package wasmrt

import (
	"context"
	"log/slog"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
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
// Memory: reads at most msg_len bytes at msg_ptr; a message longer than
// 16 KiB is cut to its first 16 KiB. A range outside guest memory is not
// read: the host logs a warning instead. Nothing is written.
//
// Budget: one guest invocation may log at most limits.log_records records
// and limits.log_kib KiB of messages. The record that crosses the byte
// budget is cut to fit; later records are dropped. A cut record carries
// truncated_from (its length in bytes). When the invocation ends, one
// warning reports the records and bytes that did not reach the log, and
// Options.Observer.GuestLogDropped counts them. The http requests the
// allowlist denies are guest log too (their origin is the guest's
// choice): the first is a record of the budget, the rest are counted in
// one warning at the end (see deniedRequest). Records at a level
// the logger does not enable cost nothing and are not counted.
//
// The record goes to Options.Logger tagged with connector,
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
	take, ok := cc.logs.admit(n, c.limits)
	if !ok {
		return
	}
	msg, ok := readGuest(mod, ptr, take, maxLogBytes)
	if !ok {
		c.log.LogAttrs(ctx, slog.LevelWarn, "guest log message outside guest memory",
			slog.String("operation", cc.op), slog.String("execution_id", cc.execID))
		return
	}
	attrs := []slog.Attr{slog.String("operation", cc.op), slog.String("execution_id", cc.execID), slog.String("source", "guest")}
	if take < n {
		// Cut at a rune boundary: drop the start of a rune split by the
		// cut (at most UTFMax-1 bytes).
		for range utf8.UTFMax - 1 {
			if r, size := utf8.DecodeLastRune(msg); r != utf8.RuneError || size != 1 {
				break
			}
			msg = msg[:len(msg)-1]
		}
		attrs = append(attrs, slog.Int64("truncated_from", int64(n)))
	}
	c.log.LogAttrs(ctx, level, string(msg), attrs...)
}

// logBudget is what one guest invocation has logged, against the
// connector's limits.log_records and limits.log_kib, and what it lost.
// Host functions of one invocation run on its goroutine, one at a time,
// so it needs no lock.
type logBudget struct {
	records, bytes               int
	droppedRecords, droppedBytes int64
	// denied counts the http requests the allowlist refused (see
	// deniedRequest); firstDenied is the origin and reason of the first.
	denied      int64
	firstDenied [2]string
	// deniedLogged: the first denial reached the log.
	deniedLogged bool
}

// admit accounts for a record of n bytes and returns how many of them may
// be logged: all of them, fewer (cut to the per-record cap or to what is
// left of the byte budget), or none (false: the record is dropped).
func (b *logBudget) admit(n uint32, l manifests.Limits) (uint32, bool) {
	room := l.LogKiB*1024 - b.bytes
	if b.records >= l.LogRecords || room <= 0 {
		b.droppedRecords++
		b.droppedBytes += int64(n)
		return 0, false
	}
	take := min(n, maxLogBytes, uint32(room))
	b.records++
	b.bytes += int(take)
	b.droppedBytes += int64(n - take)
	return take, true
}

// maxDeniedText bounds the guest-chosen origin and the reason of a denied
// request in a log record.
const maxDeniedText = 512

// deniedRequest accounts for an http request the allowlist refused. The
// origin is the guest's choice, so denials are guest log, within its
// budget: the first is logged at once (as a record of the budget, cut to
// maxDeniedText), the others only counted, and reportLogDrops writes one
// warning with the count when the invocation ends. A guest that retries
// a denied request in a loop costs two records, not one per request.
func (c *Connector) deniedRequest(ctx context.Context, cc *callCtx, origin, reason string) {
	b := &cc.logs
	b.denied++
	origin, reason = clipText(origin, maxDeniedText), clipText(reason, maxDeniedText)
	if b.denied > 1 {
		return
	}
	b.firstDenied = [2]string{origin, reason}
	const msg = "guest http request denied"
	if !c.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	if _, ok := b.admit(uint32(len(msg)+len(origin)+len(reason)), c.limits); !ok {
		return // counted as dropped; the summary names it
	}
	b.deniedLogged = true
	c.log.LogAttrs(ctx, slog.LevelWarn, msg,
		slog.String("operation", cc.op), slog.String("execution_id", cc.execID),
		slog.String("origin", origin), slog.String("reason", reason))
}

// clipText cuts s to at most n bytes at a rune boundary, marking the cut.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	// Drop the start of a rune split by the cut (at most UTFMax-1 bytes).
	for range utf8.UTFMax - 1 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s + "…"
}

// reportLogDrops writes the warnings of an invocation whose guest logged
// beyond its budget, or had more http requests denied than the one
// logged, and counts the loss.
func (c *Connector) reportLogDrops(ctx context.Context, cc *callCtx) {
	b := &cc.logs
	if b.denied > 1 || (b.denied == 1 && !b.deniedLogged && c.log.Enabled(ctx, slog.LevelWarn)) {
		c.log.LogAttrs(ctx, slog.LevelWarn, "guest http requests denied",
			slog.String("operation", cc.op), slog.String("execution_id", cc.execID),
			slog.Int64("denied_requests", b.denied), slog.Bool("first_logged", b.deniedLogged),
			slog.String("first_origin", b.firstDenied[0]), slog.String("first_reason", b.firstDenied[1]))
	}
	if b.droppedRecords == 0 && b.droppedBytes == 0 {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "guest log over budget: records dropped or cut",
		slog.String("operation", cc.op), slog.String("execution_id", cc.execID),
		slog.Int64("dropped_records", b.droppedRecords), slog.Int64("dropped_bytes", b.droppedBytes),
		slog.Int("logged_records", b.records), slog.Int("logged_bytes", b.bytes),
		slog.Int("limits.log_records", c.limits.LogRecords), slog.Int("limits.log_kib", c.limits.LogKiB))
	c.rt.opts.Observer.GuestLogDropped(c.name, b.droppedRecords, b.droppedBytes)
}
