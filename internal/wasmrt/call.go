package wasmrt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/connhost/connhost/abi"
)

// CallRequest is one call of a connector operation.
type CallRequest struct {
	// Export is abi.ExportExecute, abi.ExportExecuteWithKey or
	// abi.ExportReconcile.
	Export string
	// Operation is the operation's name.
	Operation string
	// Key is the idempotency key (empty for plain execute).
	Key string
	// ExecutionID is served by the execution_id host function and tags the
	// guest's log records.
	ExecutionID string
	// Namespace is the namespace of the call's execution: config_get
	// serves it Options.NamespaceConfig's values first.
	Namespace string
	// Args are the operation's JSON arguments.
	Args []byte
	// Slot, if set, is the instance slot Reserve returned for this call:
	// the call runs on it without waiting, and gives it back. Without
	// one, the call waits for a slot (fairly between namespaces, see
	// Reserve) until ctx is done.
	Slot *Slot
}

// phase says what an instance is doing; host functions with effects (http)
// are only available while the call export runs.
type phase uint8

const (
	phaseInit  phase = iota // _initialize, version, describe
	phaseAlloc              // connhost_alloc before a call
	phaseCall               // the call export
)

// callCtx is the context of one guest invocation. Host functions find the
// instance and the call's identity through it.
type callCtx struct {
	context.Context
	inst   *instance
	phase  phase
	op     string
	execID string
	// namespace is the call's (CallRequest.Namespace).
	namespace string
	// logs is what the guest logged in this invocation (hostLog).
	logs logBudget
}

type callCtxKey struct{}

// Value returns the callCtx itself for callCtxKey.
func (c *callCtx) Value(key any) any {
	if key == (callCtxKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// callOf returns the callCtx of a host function's ctx (nil outside a call).
func callOf(ctx context.Context) *callCtx {
	c, _ := ctx.Value(callCtxKey{}).(*callCtx)
	return c
}

// instance is one instantiated module. It serves one call at a time; the
// pool guarantees that.
type instance struct {
	c *Connector
	// ns is the namespace of the call whose slot the instance serves.
	ns  string
	mod api.Module
	mem api.Memory

	fnAlloc, fnExec, fnExecKey, fnReconcile api.Function
	stack                                   [6]uint64
	// inPtr and inCap describe the input buffer connhost_alloc returned
	// last; the ABI keeps it valid until the next connhost_alloc, so calls
	// whose input fits reuse it without entering the guest.
	inPtr, inCap uint32

	// cur is the current invocation; the WASI clock's sleep ends when its
	// context is done.
	cur atomic.Pointer[callCtx]
	// pending is the value the next take copies out.
	pending    []byte
	hasPending bool
	stderr     cappedBuffer

	closeOnce sync.Once
}

// newInstance instantiates the connector's module with no filesystem,
// environment or arguments, running _initialize under ctx and
// Options.InstantiateTimeout (or Limits.Timeout if larger).
func (c *Connector) newInstance(ctx context.Context) (*instance, error) {
	ctx, cancel := context.WithTimeout(ctx, max(c.rt.opts.InstantiateTimeout, c.limits.Timeout))
	defer cancel()
	inst := &instance{c: c}
	cc := &callCtx{Context: ctx, inst: inst, phase: phaseInit}
	inst.cur.Store(cc)
	defer inst.cur.Store(nil)
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithSysWalltime().
		WithSysNanotime().
		WithNanosleep(inst.nanosleep).
		WithRandSource(rand.Reader).
		// Stdout is discarded; stderr keeps its first 8 KiB per call
		// for failure messages. Neither reaches the host's own streams,
		// so a guest printing in a loop cannot flood them.
		WithStdout(io.Discard).
		WithStderr(&inst.stderr)
	mod, err := c.wrt.InstantiateModule(cc, c.compiled, cfg)
	c.reportLogDrops(ctx, cc)
	if err != nil {
		if tail := inst.stderr.summary(); tail != "" {
			err = fmt.Errorf("%w (stderr: %s)", err, tail)
		}
		return nil, err
	}
	inst.mod = mod
	inst.mem = mod.Memory()
	if inst.mem == nil {
		_ = mod.Close(context.Background())
		return nil, fmt.Errorf("%w: module has no memory", ErrBadModule)
	}
	if c.ops != nil {
		inst.bindExports()
	}
	return inst, nil
}

// bindExports looks up the call exports once.
func (inst *instance) bindExports() {
	inst.fnAlloc = inst.mod.ExportedFunction(abi.ExportAlloc)
	inst.fnExec = inst.mod.ExportedFunction(abi.ExportExecute)
	inst.fnExecKey = inst.mod.ExportedFunction(abi.ExportExecuteWithKey)
	inst.fnReconcile = inst.mod.ExportedFunction(abi.ExportReconcile)
}

// nanosleep is the instance's WASI sleep (poll_oneoff): it ends early when
// the current call's context is done, so a guest time.Sleep cannot outlive
// the call's deadline.
func (inst *instance) nanosleep(ns int64) {
	if ns <= 0 {
		return
	}
	var done <-chan struct{}
	if cc := inst.cur.Load(); cc != nil {
		done = cc.Done()
	}
	t := time.NewTimer(time.Duration(ns))
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
}

// callNoArgs calls an export without parameters and one result.
func (inst *instance) callNoArgs(ctx context.Context, name string) (uint64, error) {
	fn := inst.mod.ExportedFunction(name)
	if fn == nil {
		return 0, fmt.Errorf("%w: %s", ErrMissingExport, name)
	}
	cc := &callCtx{Context: ctx, inst: inst, phase: phaseInit}
	inst.cur.Store(cc)
	defer inst.cur.Store(nil)
	stack := inst.stack[:]
	err := fn.CallWithStack(cc, stack)
	inst.c.reportLogDrops(ctx, cc)
	if err != nil {
		return 0, err
	}
	return stack[0], nil
}

func (inst *instance) close() {
	inst.closeOnce.Do(func() {
		if inst.mod != nil {
			_ = inst.mod.Close(context.Background())
		}
	})
}

// Call runs one operation on a pooled instance and returns the connector's
// outcome. It waits for a free instance until ctx is done, and runs the
// guest under a deadline of min(ctx's deadline, now+Limits.Timeout).
//
// Any failure returns a *CallError naming connector, operation and export.
// After a trap, panic, exit, timeout, memory exhaustion, oversized or
// malformed outcome the instance is discarded, never reused; the connector
// keeps serving other calls. The returned outcome does not alias guest
// memory. Call is safe for concurrent use.
func (c *Connector) Call(ctx context.Context, req CallRequest) (abi.Outcome, error) {
	fail := func(kind CallErrorKind, entered bool, err error) (abi.Outcome, error) {
		return abi.Outcome{}, &CallError{Connector: c.name, Operation: req.Operation, Export: req.Export, Kind: kind, Err: err, entered: entered}
	}
	op, ok := c.ops[req.Operation]
	if !ok {
		return fail(KindUnknownOperation, false, fmt.Errorf("operation %q is not declared by the manifest", req.Operation))
	}
	var supported bool
	switch req.Export {
	case abi.ExportExecute:
		supported = op.info.Execute
	case abi.ExportExecuteWithKey:
		supported = op.info.ExecuteWithKey
	case abi.ExportReconcile:
		supported = op.info.Reconcile
	}
	if !supported {
		return fail(KindUnsupportedExport, false, fmt.Errorf("the module does not implement %s for this operation", req.Export))
	}
	total := uint64(len(req.Operation)) + uint64(len(req.Key)) + uint64(len(req.Args))
	if total > 1<<30 {
		return fail(KindBadEnvelope, false, fmt.Errorf("input of %d bytes is too large", total))
	}

	// Waiting for an instance (and creating one) is bounded by the caller's
	// context; Limits.Timeout bounds the guest's work from here on.
	var inst *instance
	slot := req.Slot
	if slot != nil && !slot.take(c) {
		return fail(KindBadEnvelope, false, errors.New("the call's slot is another connector's, or was used already"))
	}
	for {
		var err error
		if slot != nil {
			inst, err = c.pool.fill(ctx, slot.ns)
			slot = nil
		} else {
			inst, err = c.pool.getFor(ctx, req.Namespace)
		}
		if err != nil {
			kind, _ := c.classify(ctx, ctx, nil, err)
			return fail(kind, false, fmt.Errorf("no instance available: %w", err))
		}
		if !inst.mod.IsClosed() {
			break
		}
		c.pool.drop(inst) // closed behind our back (see below); never reuse
	}
	dctx, cancel := context.WithTimeout(ctx, c.limits.Timeout)
	defer cancel()
	cc := &callCtx{Context: dctx, inst: inst, phase: phaseAlloc, op: req.Operation, execID: req.ExecutionID, namespace: req.Namespace}
	out, kind, err := inst.call(cc, req, uint32(total))
	inst.cur.Store(nil)
	c.reportLogDrops(ctx, cc)
	inst.pending, inst.hasPending = nil, false
	if err != nil {
		k, cerr := c.classify(dctx, ctx, inst, err)
		if kind == 0 {
			kind = k
		}
		if kind != KindBadEnvelope && kind != KindOutputTooLarge {
			err = cerr
		}
		c.pool.drop(inst)
		c.log.LogAttrs(ctx, slog.LevelWarn, "connector instance discarded",
			slog.String("operation", req.Operation), slog.String("export", req.Export),
			slog.String("execution_id", req.ExecutionID), slog.String("kind", kind.String()), slog.String("error", err.Error()))
		return fail(kind, cc.phase == phaseCall, err)
	}
	if dctx.Err() != nil {
		// The guest answered, but the deadline passed meanwhile: wazero's
		// watcher may close the module at any moment, so do not reuse it.
		c.pool.drop(inst)
		if out.Kind != abi.OutcomeOK && out.Kind != abi.OutcomeApplied {
			// Any other answer may be the connector's reaction to the host
			// cutting its request at the deadline ("timed out, so not
			// applied: retry") while the provider goes on to apply it. Only
			// a success is taken; otherwise the call timed out, and the
			// executor decides as for any uncertain attempt.
			return fail(KindTimeout, true, fmt.Errorf("deadline %s (limits.timeout %v) exceeded; the connector's answer after it is not taken (%s: %s)",
				deadlineOf(dctx), c.limits.Timeout, out.Kind, out.Error))
		}
		return out, nil
	}
	c.pool.put(inst)
	return out, nil
}

// call runs alloc, writes the input, runs the export and copies the outcome
// out. A non-zero kind overrides classification of err.
func (inst *instance) call(cc *callCtx, req CallRequest, total uint32) (abi.Outcome, CallErrorKind, error) {
	inst.cur.Store(cc)
	inst.stderr.reset()
	inst.pending, inst.hasPending = nil, false
	stack := inst.stack[:]

	if total > inst.inCap || inst.inCap == 0 {
		stack[0] = uint64(max(total, 1))
		if err := inst.fnAlloc.CallWithStack(cc, stack[:1]); err != nil {
			inst.inCap = 0
			return abi.Outcome{}, 0, fmt.Errorf("%s: %w", abi.ExportAlloc, err)
		}
		inst.inPtr, inst.inCap = uint32(stack[0]), max(total, 1)
	}
	ptr := inst.inPtr
	buf, ok := inst.mem.Read(ptr, total)
	if !ok {
		return abi.Outcome{}, KindBadEnvelope, fmt.Errorf("%s returned [%d, +%d) outside guest memory of %d bytes", abi.ExportAlloc, ptr, total, inst.mem.Size())
	}
	opPtr := ptr
	n := copy(buf, req.Operation)
	keyPtr := ptr + uint32(n)
	n += copy(buf[n:], req.Key)
	argsPtr := ptr + uint32(n)
	copy(buf[n:], req.Args)

	var fn api.Function
	switch req.Export {
	case abi.ExportExecute:
		fn = inst.fnExec
		stack[0], stack[1], stack[2], stack[3] = uint64(opPtr), uint64(len(req.Operation)), uint64(argsPtr), uint64(len(req.Args))
	case abi.ExportExecuteWithKey:
		fn = inst.fnExecKey
	case abi.ExportReconcile:
		fn = inst.fnReconcile
	}
	if req.Export != abi.ExportExecute {
		stack[0], stack[1] = uint64(opPtr), uint64(len(req.Operation))
		stack[2], stack[3] = uint64(keyPtr), uint64(len(req.Key))
		stack[4], stack[5] = uint64(argsPtr), uint64(len(req.Args))
	}
	// A context already done never enters the guest (and is reported as
	// such); one that ends from here on may have let the guest act.
	if err := cc.Err(); err != nil {
		return abi.Outcome{}, 0, err
	}
	cc.phase = phaseCall
	if err := fn.CallWithStack(cc, stack); err != nil {
		return abi.Outcome{}, 0, err
	}
	// The guest answered; a deadline that passed meanwhile does not undo it.
	outPtr, outLen := abi.UnpackPtrLen(stack[0])
	if outLen > inst.c.maxOut {
		return abi.Outcome{}, KindOutputTooLarge, fmt.Errorf("outcome of %d bytes exceeds limits.max_output_kib %d", outLen, inst.c.limits.MaxOutputKiB)
	}
	raw, ok := inst.mem.Read(outPtr, outLen)
	if !ok {
		return abi.Outcome{}, KindBadEnvelope, fmt.Errorf("outcome at [%d, +%d) outside guest memory of %d bytes", outPtr, outLen, inst.mem.Size())
	}
	o, err := abi.DecodeOutcome(raw)
	if err != nil {
		return abi.Outcome{}, KindBadEnvelope, err
	}
	if o.Kind.ForReconcile() != (req.Export == abi.ExportReconcile) {
		return abi.Outcome{}, KindBadEnvelope, fmt.Errorf("outcome kind %s does not fit %s", o.Kind, req.Export)
	}
	if o.Result != nil {
		o.Result = bytes.Clone(o.Result)
	}
	return o, 0, nil
}

// classify maps a failure to its kind: deadline and cancellation first (a
// guest cut by them reports only an exit code), then guest exits (a Go
// panic or os.Exit, or the Go runtime's fatal out-of-memory), then traps.
func (c *Connector) classify(dctx, parent context.Context, inst *instance, err error) (CallErrorKind, error) {
	var exit *sys.ExitError
	isExit := errors.As(err, &exit)
	switch {
	case errors.Is(err, ErrConnectorClosed):
		return KindClosed, err
	case errors.Is(err, ErrBusy):
		return KindBusy, err
	case isExit && exit.ExitCode() == sys.ExitCodeDeadlineExceeded,
		errors.Is(err, context.DeadlineExceeded),
		errors.Is(dctx.Err(), context.DeadlineExceeded):
		return KindTimeout, fmt.Errorf("deadline %s (limits.timeout %v) exceeded: %w", deadlineOf(dctx), c.limits.Timeout, err)
	case isExit && exit.ExitCode() == sys.ExitCodeContextCanceled,
		errors.Is(err, context.Canceled),
		errors.Is(parent.Err(), context.Canceled):
		return KindCanceled, err
	}
	var stderr string
	var oom bool
	if inst != nil {
		stderr = inst.stderr.summary()
		oom = inst.stderr.contains("out of memory")
	}
	if oom {
		return KindMemoryLimit, fmt.Errorf("guest ran out of memory under limits.memory_mib %d: %w (stderr: %s)", c.limits.MemoryMiB, err, stderr)
	}
	if isExit {
		if stderr != "" {
			return KindTrap, fmt.Errorf("guest exited with code %d: %s", exit.ExitCode(), stderr)
		}
		return KindTrap, fmt.Errorf("guest exited with code %d: %w", exit.ExitCode(), err)
	}
	if stderr != "" {
		return KindTrap, fmt.Errorf("%s: %w", stderr, err)
	}
	return KindTrap, err
}

func deadlineOf(ctx context.Context) string {
	if d, ok := ctx.Deadline(); ok {
		return d.UTC().Format(time.RFC3339Nano)
	}
	return "none"
}

// cappedBuffer keeps the first 8 KiB written to it (the guest's stderr: a
// Go panic message or a fatal runtime error).
type cappedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const stderrCap = 8 << 10

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := stderrCap - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (b *cappedBuffer) reset() {
	b.mu.Lock()
	b.buf = b.buf[:0]
	b.mu.Unlock()
}

func (b *cappedBuffer) contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf, []byte(s))
}

// summary returns the most telling line of the captured stderr ("panic:",
// "fatal error:" or the first line), at most 256 bytes.
func (b *cappedBuffer) summary() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(b.buf)), "\n")
	pick := lines[0]
	for _, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			pick = l
			break
		}
	}
	if len(pick) > 256 {
		pick = pick[:256] + "…"
	}
	return pick
}
