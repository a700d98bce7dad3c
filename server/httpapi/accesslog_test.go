package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "http request" {
			out = append(out, m)
		}
	}
	return out
}

// TestAccessLog: each request's log line names the principal, the
// execution or approval it acted on and the problem code it was answered
// with; refused credentials and roles (401, 403) are logged at WARN.
func TestAccessLog(t *testing.T) {
	env := newTestExecutor(t)
	var logs syncBuffer
	srv := env.serve(t, Options{Principals: testPrincipals(), Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	runtime := client{t: t, base: srv.URL, token: "tok-runtime"}
	gated := runtime.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{}`)).result(t)
	runtime.post("/v1/approvals/"+gated.Approval.ID+"/approve", DecisionRequest{Digest: gated.Approval.ArgsDigest}).problem(t, CodeForbiddenRole)
	client{t: t, base: srv.URL, token: "wrong"}.get("/v1/executions/"+gated.ExecutionID).problem(t, CodeUnauthorized)
	runtime.get("/v1/executions/" + gated.ExecutionID)

	want := []map[string]any{
		{"level": "INFO", "method": "POST", "path": "/v1/executions", "status": 200.0, "principal": "runtime", "execution_id": gated.ExecutionID},
		{"level": "WARN", "status": 403.0, "principal": "runtime", "approval_id": gated.Approval.ID, "code": "forbidden_role"},
		{"level": "WARN", "status": 401.0, "code": "unauthorized"},
		{"level": "INFO", "method": "GET", "status": 200.0, "principal": "runtime", "execution_id": gated.ExecutionID},
	}
	got := logs.lines(t)
	if len(got) != len(want) {
		t.Fatalf("%d access log lines, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		for k, v := range w {
			if got[i][k] != v {
				t.Errorf("line %d: %s = %v, want %v (%v)", i, k, got[i][k], v, got[i])
			}
		}
	}
	if _, ok := got[2]["principal"]; ok {
		t.Errorf("a refused token is logged with a principal: %v", got[2])
	}
}
