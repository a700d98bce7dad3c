package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
)

// accessNote collects, while a request is served, what its access log
// line names besides method, path and status: the principal that
// authenticated, the execution (or approval) it acted on, and the code of
// the problem it was answered with.
type accessNote struct {
	principal   string
	executionID string
	approvalID  string
	code        Code
	// throttled: refused by Options.Throttle (logged at DEBUG).
	throttled bool
}

type accessNoteKey struct{}

func noteOf(ctx context.Context) *accessNote {
	n, _ := ctx.Value(accessNoteKey{}).(*accessNote)
	return n
}

// noteWriter returns the note of the request w answers, nil if none.
func noteWriter(w http.ResponseWriter) *accessNote {
	if sw, ok := w.(*statusWriter); ok {
		return sw.note
	}
	return nil
}

// notePathID records the {id} of a route's path (an approval id under
// /v1/approvals/, else an execution id) before next runs, so that a
// refused request is logged with it too.
func notePathID(path string, next http.Handler) http.Handler {
	if !strings.Contains(path, "{id}") {
		return next
	}
	approvals := strings.HasPrefix(path, "/v1/approvals/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, id := noteOf(r.Context()), r.PathValue("id"); n != nil && id != "" {
			if approvals {
				n.approvalID = id
			} else {
				n.executionID = id
			}
		}
		next.ServeHTTP(w, r)
	})
}

// noteResult records the execution an answer is about.
func noteResult(w http.ResponseWriter, v any) {
	n := noteWriter(w)
	if n == nil || n.executionID != "" {
		return
	}
	switch v := v.(type) {
	case host.Result:
		n.executionID = v.ExecutionID
	case Execution:
		n.executionID = v.ExecutionID
	}
}

// logRequests writes one access log line per request: method, path,
// status, duration, and the principal, execution or approval id and
// problem code when there are. A refused credential or role (401, 403) is
// logged at WARN, a server error at ERROR, a request the throttle refused
// at DEBUG (its summary line is at WARN), the rest at INFO. Bodies and
// headers are never logged.
func (a *api) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		n := &accessNote{}
		sw := &statusWriter{ResponseWriter: w, note: n}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessNoteKey{}, n)))
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("duration", time.Since(start))}
		if n.principal != "" {
			attrs = append(attrs, slog.String("principal", n.principal))
		}
		if n.executionID != "" {
			attrs = append(attrs, slog.String("execution_id", n.executionID))
		}
		if n.approvalID != "" {
			attrs = append(attrs, slog.String("approval_id", n.approvalID))
		}
		if n.code != "" {
			attrs = append(attrs, slog.String("code", string(n.code)))
		}
		level := slog.LevelInfo
		switch {
		case n.throttled:
			level = slog.LevelDebug
		case sw.status == http.StatusUnauthorized || sw.status == http.StatusForbidden:
			level = slog.LevelWarn
		case sw.status >= 500:
			level = slog.LevelError
		}
		a.opts.Logger.LogAttrs(r.Context(), level, "http request", attrs...)
	})
}

// NoteAccess names, in the access log line of the request ctx belongs
// to, the principal it acts for and the execution or approval it acts on
// (an empty argument leaves that field as it is). The console, which
// authenticates its own requests, calls it; elsewhere the API notes them
// itself.
func NoteAccess(ctx context.Context, principal, executionID, approvalID string) {
	n := noteOf(ctx)
	if n == nil {
		return
	}
	if principal != "" {
		n.principal = principal
	}
	if executionID != "" {
		n.executionID = executionID
	}
	if approvalID != "" {
		n.approvalID = approvalID
	}
}

// NoteThrottled marks the request ctx belongs to as refused by the
// Throttle, which logs it in its summary line: its access line is then
// at DEBUG. The console calls it for the sign-ins it refuses.
func NoteThrottled(ctx context.Context) {
	if n := noteOf(ctx); n != nil {
		n.throttled = true
	}
}
