package stripe_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// Each fault either leaves the provider untouched (Apply false) or
// performs the effect and damages only the answer (Apply true). The
// effect count is what a crash test compares against.
func TestFaults(t *testing.T) {
	cases := []struct {
		name        string
		rule        fault.Rule
		wantErr     bool // the client gets a transport error
		wantStatus  int
		wantCT      string
		wantEffects int
		wantBodyLen int
	}{
		{"500 before execution", fault.Rule{Kind: fault.Status}, false, 500, "application/json", 0, 0},
		{"503 before execution", fault.Rule{Kind: fault.Status, Status: 503}, false, 503, "application/json", 0, 0},
		{"429 before execution", fault.Rule{Kind: fault.Status, Status: 429}, false, 429, "application/json", 0, 0},
		{"HTML error page from a proxy", fault.Rule{Kind: fault.HTML}, false, 502, "text/html; charset=utf-8", 0, 0},
		{"HTML error page after applying", fault.Rule{Kind: fault.HTML, Status: 504, Apply: true}, false, 504, "text/html; charset=utf-8", 1, 0},
		{"truncated JSON", fault.Rule{Kind: fault.Truncated}, true, 0, "", 0, 0},
		{"truncated JSON after applying", fault.Rule{Kind: fault.Truncated, Apply: true}, true, 0, "", 1, 0},
		{"huge body", fault.Rule{Kind: fault.Huge, Size: 1 << 20}, false, 200, "application/json", 0, 1 << 20},
		{"dropped connection", fault.Rule{Kind: fault.Drop}, true, 0, "", 0, 0},
		{"applied, then the connection dropped", fault.Rule{Kind: fault.Drop, Apply: true}, true, 0, "", 1, 0},
		{"applied, then 500", fault.Rule{Kind: fault.Status, Apply: true}, false, 500, "application/json", 1, 0},
		{"slow answer without effect", fault.Rule{Kind: fault.Hang, Delay: fault.Duration(time.Millisecond)}, false, 504, "text/plain", 0, 0},
		{"slow answer after applying", fault.Rule{Kind: fault.Hang, Delay: fault.Duration(time.Millisecond), Apply: true}, false, 200, "application/json", 1, 0},
		{"exec error", fault.Rule{Kind: fault.ExecError}, false, 500, "application/json", 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, stripe.Options{})
			mustAdd(t, e.srv, c.rule)
			r, err := e.try(context.Background(), req{path: "/v1/payment_intents", form: createPI("exec-f")})
			if c.wantErr {
				if err == nil {
					t.Fatalf("no transport error: %d %s", r.status, r.body)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if r.status != c.wantStatus || r.header.Get("Content-Type") != c.wantCT {
					t.Fatalf("%d %q: %.200s", r.status, r.header.Get("Content-Type"), r.body)
				}
				if c.wantBodyLen > 0 {
					if len(r.body) != c.wantBodyLen || !json.Valid(r.body) {
						t.Fatalf("body %d bytes (valid JSON %v), want %d", len(r.body), json.Valid(r.body), c.wantBodyLen)
					}
				}
			}
			if n := len(e.listPIs()); n != c.wantEffects {
				t.Fatalf("%d payment intents, want %d", n, c.wantEffects)
			}
			if st := e.srv.Stats(); st.FaultsInjected != 1 {
				t.Fatalf("faults injected %d", st.FaultsInjected)
			}
			// The rule is used up: the next request is served normally.
			if r := e.do(req{path: "/v1/payment_intents", form: createPI("exec-g")}); r.status != 200 {
				t.Fatalf("after the fault: %d %s", r.status, r.body)
			}
		})
	}
}

// Applied-then-dropped is the crash window of after_plugin_return: the
// client heard nothing, the provider applied; a retry with the same key
// gets the saved result, and a search finds the object.
func TestAppliedThenDroppedRetry(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Drop, Apply: true, Method: "POST", Path: "/v1/payment_intents"})
	r := req{path: "/v1/payment_intents", form: createPI("exec-lost"), key: "lost-key"}
	if _, err := e.try(context.Background(), r); err == nil {
		t.Fatal("the answer was not lost")
	}
	again := e.do(r)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d replayed=%q", again.status, again.header.Get("Idempotent-Replayed"))
	}
	s := e.search("metadata['connhost_execution_id']:'exec-lost'")
	if len(s.Data) != 1 || s.Data[0].ID != again.pi(t).ID {
		t.Fatalf("search: %+v", s.Data)
	}
}

// A hang without delay lasts until the client gives up; nothing is applied.
func TestHangUntilClientGivesUp(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Hang})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.try(ctx, req{path: "/v1/payment_intents", form: createPI("exec-h")}); err == nil {
		t.Fatal("hang answered")
	}
	if n := len(e.listPIs()); n != 0 {
		t.Fatalf("%d payment intents", n)
	}
}

func TestFaultMatching(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Status, Status: 503, Path: "/v1/refunds", Count: 2})
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Status, Status: 500, Method: "GET", Path: "/v1/payment_intents", Count: -1})
	pi := e.do(req{path: "/v1/payment_intents", form: createPI("exec-m")})
	if pi.status != 200 {
		t.Fatalf("POST hit a GET rule: %d", pi.status)
	}
	for i, want := range []int{503, 503, 200} {
		if r := e.do(req{path: "/v1/refunds", form: "payment_intent=" + pi.pi(t).ID + "&amount=100"}); r.status != want {
			t.Fatalf("refund %d: %d, want %d", i, r.status, want)
		}
	}
	for range 3 {
		if r := e.do(req{method: "GET", path: "/v1/payment_intents"}); r.status != 500 {
			t.Fatalf("unlimited rule: %d", r.status)
		}
	}
	if got := e.srv.Faults().Rules(); len(got) != 1 || got[0].Count != -1 {
		t.Fatalf("rules %+v", got)
	}
	e.srv.Faults().Clear()
	if r := e.do(req{method: "GET", path: "/v1/payment_intents"}); r.status != 200 {
		t.Fatalf("after clear: %d", r.status)
	}
	for _, bad := range []fault.Rule{{}, {Kind: "boom"}, {Kind: fault.Status, Status: 99}, {Kind: fault.Hang, Delay: -1}, {Kind: fault.Drop, Path: "/_sandbox/stats"}} {
		if err := e.srv.Faults().Add(bad); err == nil {
			t.Fatalf("rule %+v accepted", bad)
		}
	}
}

// The control API is plain HTTP so that a test driving a connhost
// subprocess can use it; faults never apply to it.
func TestControlAPI(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	call := func(method, path, body string) (int, string) {
		t.Helper()
		r, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if st, b := call("POST", "/_sandbox/faults", `[{"kind":"status","status":503,"count":-1},{"kind":"hang","delay":"1s"}]`); st != 200 || !strings.Contains(b, `"delay": "1s"`) {
		t.Fatalf("add faults: %d %s", st, b)
	}
	if st, _ := call("GET", "/_sandbox/stats", ""); st != 200 {
		t.Fatal("faults applied to the control API")
	}
	if r := e.do(req{method: "GET", path: "/v1/payment_intents"}); r.status != 503 {
		t.Fatalf("fault not applied: %d", r.status)
	}
	if st, b := call("DELETE", "/_sandbox/faults", ""); st != 200 || strings.TrimSpace(b) != "[]" {
		t.Fatalf("clear: %d %s", st, b)
	}
	if st, _ := call("POST", "/_sandbox/faults", `{"kind":"nope"}`); st != 400 {
		t.Fatalf("invalid rule: %d", st)
	}
	if st, _ := call("POST", "/_sandbox/faults", `{"kind":"status","bogus":1}`); st != 400 {
		t.Fatalf("unknown field: %d", st)
	}
	if st, _ := call("POST", "/_sandbox/search_lag", `{"lag":"1m"}`); st != 200 {
		t.Fatal("search_lag")
	}
	e.do(req{path: "/v1/payment_intents", form: createPI("exec-c")})
	if s := e.search("metadata['connhost_execution_id']:'exec-c'"); len(s.Data) != 0 {
		t.Fatal("search lag not applied")
	}
	if st, b := call("POST", "/_sandbox/clock", `{"advance":"1m"}`); st != 200 || !strings.Contains(b, `"now"`) {
		t.Fatalf("clock: %d %s", st, b)
	}
	if s := e.search("metadata['connhost_execution_id']:'exec-c'"); len(s.Data) != 1 {
		t.Fatal("not visible after advancing the clock")
	}
	st, b := call("GET", "/_sandbox/stats", "")
	var stats stripe.Stats
	if err := json.Unmarshal([]byte(b), &stats); err != nil || st != 200 || stats.PaymentIntentsCreated != 1 || stats.ChargesSucceeded != 1 || stats.FaultsInjected != 1 {
		t.Fatalf("stats: %d %s", st, b)
	}
	if st, _ := call("POST", "/_sandbox/reset", ""); st != 200 || len(e.listPIs()) != 0 {
		t.Fatal("reset")
	}
	if st, b := call("GET", "/_sandbox/held", ""); st != 200 || !strings.Contains(b, `"held": 0`) {
		t.Fatalf("held: %d %s", st, b)
	}
}
