package stripe_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/statefile"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// persistentEnv is newEnv over a server that persists to path: a second
// one on the same path is the emulator after a restart.
func persistentEnv(t *testing.T, path string) *env {
	t.Helper()
	c := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv := stripe.New(stripe.Options{Now: c.Now})
	if err := srv.Persist(path); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return &env{t: t, srv: srv, url: hs.URL}
}

// TestPersistSurvivesRestart: payment intents, refunds and finished
// idempotency keys saved by one server are there for the next one on the
// same file: retrieve works, a retry with the same key replays the same
// answer, and the provider holds one intent. What the first server
// applied but answered badly (a fault with apply) was saved before the
// answer. A key whose request was still in flight is not saved.
func TestPersistSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stripe.json")
	a := persistentEnv(t, path)
	create := req{path: "/v1/payment_intents", form: createPI("ex_1"), key: "key-1"}
	first := a.do(create)
	pi := first.pi(t)
	if r := a.do(req{path: "/v1/refunds", form: "payment_intent=" + pi.ID + "&amount=500", key: "key-r"}); r.status != 200 {
		t.Fatalf("refund: %d %s", r.status, r.body)
	}
	mustAdd(t, a.srv, fault.Rule{Kind: fault.Status, Status: 500, Apply: true, Path: "/v1/payment_intents", Count: 1})
	if r := a.do(req{path: "/v1/payment_intents", form: createPI("ex_2"), key: "key-2"}); r.status != 500 {
		t.Fatalf("applied-then-failed request: %d", r.status)
	}
	mustAdd(t, a.srv, fault.Rule{Kind: fault.Hold, Path: "/v1/payment_intents", Count: 1})
	held := make(chan resp, 1)
	go func() { held <- a.do(req{path: "/v1/payment_intents", form: createPI("ex_3"), key: "key-3"}) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.srv.Faults().WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// A change while key-3 is in flight saves the state without it.
	if r := a.do(req{path: "/v1/payment_intents", form: createPI("ex_4"), key: "key-4"}); r.status != 200 {
		t.Fatalf("create during hold: %d %s", r.status, r.body)
	}
	statsBefore := a.srv.Stats()

	b := persistentEnv(t, path) // the restarted emulator
	if got := b.do(req{method: "GET", path: "/v1/payment_intents/" + pi.ID}); got.status != 200 || got.pi(t).ID != pi.ID {
		t.Fatalf("retrieve after restart: %d %s", got.status, got.body)
	}
	again := b.do(create)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, first.body) {
		t.Fatalf("retry after restart: %d replayed=%q\n%s", again.status, again.header.Get("Idempotent-Replayed"), again.body)
	}
	if r := b.do(req{method: "GET", path: "/v1/refunds", form: "payment_intent=" + pi.ID}); !strings.Contains(string(r.body), `"amount": 500`) {
		t.Fatalf("refunds after restart: %s", r.body)
	}
	// The partial refund is remembered: only the rest can be refunded.
	if r := b.do(req{path: "/v1/refunds", form: "payment_intent=" + pi.ID + "&amount=1600", key: "key-r2"}); r.status != 400 {
		t.Fatalf("over-refund after restart: %d %s", r.status, r.body)
	}
	if r := b.do(req{path: "/v1/payment_intents", form: createPI("ex_2"), key: "key-2"}); r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the applied-then-failed request was not saved: %d %s", r.status, r.body)
	}
	if r := b.do(req{path: "/v1/payment_intents", form: createPI("ex_3"), key: "key-3"}); r.status != 200 || r.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a key in flight at the save was kept: %d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	ids := map[string]bool{}
	for _, p := range b.listPIs() {
		ids[p.Metadata["connhost_execution_id"]] = true
	}
	if len(ids) != 4 || !ids["ex_1"] || !ids["ex_2"] || !ids["ex_3"] || !ids["ex_4"] {
		t.Fatalf("payment intents after restart: %v", ids)
	}
	if st := b.srv.Stats(); st.PaymentIntentsCreated != statsBefore.PaymentIntentsCreated+1 || st.Refunds != 1 {
		t.Fatalf("stats after restart %+v, before %+v", st, statsBefore)
	}
	a.srv.Faults().Release()
	<-held
	raw, err := os.ReadFile(path)
	if err != nil || bytes.Contains(raw, []byte(testKey)) {
		t.Fatalf("the state file holds the API key (or cannot be read: %v)", err)
	}
}

// TestPersistRefusesCorruptState: a state file that does not decode or
// does not hold together is an error naming the file; it is left as it
// was.
func TestPersistRefusesCorruptState(t *testing.T) {
	for name, text := range map[string]string{
		"truncated":       `{"version": 1, "payment_intents": [`,
		"unknown field":   `{"version": 1, "payment_intents": [], "refunds": [], "idempotency_keys": [], "stats": {}, "extra": 1}`,
		"future version":  `{"version": 2}`,
		"trailing data":   `{"version": 1} {}`,
		"dangling refund": `{"version": 1, "refunds": [{"id": "re_1", "payment_intent": "pi_missing"}]}`,
		"bad key":         `{"version": 1, "idempotency_keys": [{"scope": "s", "fingerprint": "f", "request_id": "req_1", "status": 7}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stripe.json")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			err := stripe.New(stripe.Options{}).Persist(path)
			if !errors.Is(err, statefile.ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "move it away") {
				t.Fatalf("Persist = %v", err)
			}
			if b, _ := os.ReadFile(path); string(b) != text {
				t.Fatalf("the corrupt file was changed: %s", b)
			}
		})
	}
}
