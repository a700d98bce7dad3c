package telemetry

import (
	"context"
	"log/slog"
)

// LogHandler wraps h so that every record logged with a context holding a
// sampled span (the access log line of a request, the executor's warnings
// about a call) names its trace_id and span_id: a line found in the logs
// leads to its trace. Records without one pass as they are.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if traceID, spanID := IDs(ctx); traceID != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", traceID), slog.String("span_id", spanID))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}
func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
