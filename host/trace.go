package host

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/ledger"
)

// The executor's spans (see internal/telemetry and docs/telemetry.md):
// execute_tool for each Execute, its argument checks, each ledger write
// (intent, dispatch, outcome, other transitions; the write spans the
// synced commit it waits for), each connector call, and the decisions of
// the table as events of the span they were taken in. Work done on an
// execution when nobody waits for it (a recovery pass, an approval, an
// operator's resolution) joins the trace recorded with the execution
// (ledger.Record.Traceparent), linked to the request or pass that did it.
// With tracing off each of these costs an atomic load.

// errorTypes name, as error.type, the refusals a caller can meet.
var errorTypes = []error{ErrBadCall, ErrUnknownTool, ErrInvalidArguments, ErrIntentMismatch, ErrSessionFenced,
	ErrApprovalRequired, ErrRecoveryRequired, ErrNotFound, ErrApprovalDigest, ErrApprovalExpired, ErrNotAwaitingApproval,
	ErrStateUsed, ErrNotRecoveryRequired, ErrPruned, ErrClosed, ErrConnectorBusy, ErrApproverNotConfigured}

// errorType is the error.type of err: the text of its sentinel without
// the package prefix, or "_OTHER" (the semantic conventions' fallback).
func errorType(err error) string {
	for _, s := range errorTypes {
		if errors.Is(err, s) {
			return strings.ReplaceAll(strings.TrimPrefix(s.Error(), "host: "), " ", "_")
		}
	}
	return "_OTHER"
}

// endExecute sets the attributes of an execute_tool span from the call and
// its answer, and ends it.
func endExecute(span trace.Span, call ToolCall, res Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		telemetry.GenAIOperationName.String("execute_tool"),
		telemetry.GenAIToolName.String(call.Tool),
		telemetry.GenAIToolType.String("extension"),
		telemetry.GenAIToolCallID.String(call.ToolCallID),
		telemetry.GenAIConversation.String(call.SessionID),
	)
	if res.ExecutionID != "" {
		span.SetAttributes(telemetry.ExecutionID.String(res.ExecutionID), telemetry.Namespace.String(res.Namespace), telemetry.State.String(string(res.State)),
			telemetry.Attempt.Int(res.Attempt), telemetry.Recorded.Bool(res.Recorded))
	}
	if err != nil {
		telemetry.Fail(span, errorType(err), err)
	}
}

// recordAttrs are the attributes naming rec on a span.
func recordAttrs(rec ledger.Record) []attribute.KeyValue {
	return []attribute.KeyValue{
		telemetry.ExecutionID.String(rec.ID), telemetry.Namespace.String(rec.Namespace),
		telemetry.Connector.String(rec.Connector), telemetry.Operation.String(rec.Operation),
		telemetry.GenAIToolCallID.String(rec.ToolCallID), telemetry.Policy.String(rec.Policy),
	}
}

// joinRecorded opens a span named name for work on rec that nobody's call
// waits for: a child of the span that created rec (its recorded trace
// context), linked to the span ctx holds (the reviewer's request, the
// recovery pass). Without a recorded context it is a child of ctx's span.
func joinRecorded(ctx context.Context, name string, rec ledger.Record) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	jctx, links := telemetry.Join(ctx, rec.Traceparent, rec.Tracestate)
	ctx, span := telemetry.Start(jctx, name, trace.SpanKindInternal, links...)
	if span.IsRecording() {
		span.SetAttributes(recordAttrs(rec)...)
		span.SetAttributes(telemetry.FromState.String(string(rec.State)), telemetry.Attempt.Int(rec.Attempt))
	}
	return ctx, span
}

// linkRecorded links the span in ctx (a call sent again, in a trace of
// its own) to the trace rec was created in.
func linkRecorded(ctx context.Context, rec ledger.Record) {
	if !telemetry.Enabled() || rec.Traceparent == "" {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if sc := telemetry.Remote(rec.Traceparent, rec.Tracestate); sc.IsValid() && sc.TraceID() != span.SpanContext().TraceID() {
		span.AddLink(trace.Link{SpanContext: sc})
	}
}

// noteDecision adds the decision the table took on rec to the span in ctx.
func noteDecision(ctx context.Context, rec ledger.Record, act action) {
	if !telemetry.Enabled() {
		return
	}
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent("connhost.decision", trace.WithAttributes(telemetry.Decision.String(string(act.Decision)),
		telemetry.State.String(string(rec.State)), telemetry.Attempt.Int(rec.Attempt), attribute.String("connhost.step", act.Step.String())))
}

// writeSpan opens the span of one ledger write from rec by t; the write
// made with the context it returns fills wt (see endWrite).
func writeSpan(ctx context.Context, rec ledger.Record, t ledger.Transition) (_ context.Context, _ trace.Span, wt *ledger.WriteTimes) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background()), nil
	}
	name := telemetry.SpanTransition
	switch {
	case t.To == ledger.StateDispatched:
		name = telemetry.SpanDispatch
	case t.Outcome != nil || t.To.Terminal() || t.To == ledger.StateRetryWait:
		name = telemetry.SpanOutcome
	}
	ctx, span := telemetry.Start(ctx, name, trace.SpanKindInternal)
	if span.IsRecording() {
		durability := "synced"
		if t.Lazy {
			durability = "lazy"
		}
		span.SetAttributes(telemetry.ExecutionID.String(rec.ID), telemetry.FromState.String(string(rec.State)),
			telemetry.State.String(string(t.To)), telemetry.Decision.String(t.Event.Decision),
			telemetry.Attempt.Int(max(t.Attempt, rec.Attempt)), telemetry.Actor.String(t.Event.Actor), telemetry.Durability.String(durability))
		if t.Outcome != nil {
			span.SetAttributes(telemetry.Outcome.String(t.Outcome.Kind))
		}
		wt = &ledger.WriteTimes{}
		ctx = ledger.WithWriteTimes(ctx, wt)
	}
	return ctx, span, wt
}

// intentSpan opens the span of the Create of rec, as writeSpan.
func intentSpan(ctx context.Context, rec ledger.Record, ev ledger.Event) (_ context.Context, _ trace.Span, wt *ledger.WriteTimes) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background()), nil
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanIntent, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.ExecutionID.String(rec.ID), telemetry.State.String(string(rec.State)),
			telemetry.Decision.String(ev.Decision), telemetry.Attempt.Int(rec.Attempt), telemetry.Policy.String(rec.Policy),
			telemetry.Durability.String("synced"))
		wt = &ledger.WriteTimes{}
		ctx = ledger.WithWriteTimes(ctx, wt)
	}
	return ctx, span, wt
}

// endWrite ends a write span, marking it failed with err. A create that
// found the execution recorded (a call sent again) wrote nothing and
// failed at nothing: it says so. A synced write of the Pebble ledger gets
// a child span for the fsync it waited for (wt, filled by the ledger:
// the last SyncWait of the write).
func endWrite(ctx context.Context, span trace.Span, wt *ledger.WriteTimes, err error) {
	switch {
	case errors.Is(err, ledger.ErrExists):
		span.SetAttributes(telemetry.Recorded.Bool(true))
	case err != nil:
		telemetry.Fail(span, "ledger", err)
	}
	if wt != nil && wt.Synced && wt.SyncWait > 0 && err == nil {
		end := time.Now()
		_, sync := telemetry.StartAt(ctx, telemetry.SpanSync, trace.SpanKindInternal, trace.WithTimestamp(end.Add(-wt.SyncWait)))
		sync.End(trace.WithTimestamp(end))
	}
	span.End()
}

// callSpan opens the span of one call into rec's connector (an attempt's
// export, or reconcile).
func callSpan(ctx context.Context, op *operation, rec ledger.Record, export string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := telemetry.Start(ctx, telemetry.SpanWasmCall, trace.SpanKindInternal)
	if span.IsRecording() {
		span.SetAttributes(telemetry.ExecutionID.String(rec.ID), telemetry.Connector.String(op.m.Connector.Name),
			telemetry.Operation.String(op.op.Name), telemetry.Export.String(export), telemetry.Attempt.Int(rec.Attempt))
	}
	return ctx, span
}

// endCall ends a connector call's span with what the call answered.
func endCall(span trace.Span, out abi.Outcome, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		kind := "_OTHER"
		var ce *wasmrt.CallError
		if errors.As(err, &ce) {
			kind = ce.Kind.String()
		}
		telemetry.Fail(span, kind, err)
		return
	}
	span.SetAttributes(telemetry.Outcome.String(out.Kind.String()))
}

// endRecover ends a recovery span with where the execution stands.
func endRecover(span trace.Span, res Result, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		telemetry.Fail(span, errorType(err), err)
		return
	}
	span.SetAttributes(telemetry.State.String(string(res.State)), telemetry.Attempt.Int(res.Attempt))
}
