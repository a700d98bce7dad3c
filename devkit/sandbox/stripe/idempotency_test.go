package stripe_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// Each case is one rule of https://docs.stripe.com/api/idempotent_requests.
// A case sends a first request, then a second one, and checks the second
// answer and how many payment intents (real effects) exist afterwards.
func TestIdempotency(t *testing.T) {
	const key = "connhost-exec-1"
	first := req{path: "/v1/payment_intents", form: createPI("exec-1"), key: key}
	cases := []struct {
		name        string
		setup       func(e *env) // before the first request
		first       req
		between     func(e *env) // between the two
		second      req
		wantFirst   int
		wantSecond  int
		wantReplay  bool // second answer is the saved first one, byte for byte
		wantErrType string
		wantEffects int // payment intents afterwards
	}{
		{
			name:  "same key, same parameters: the first response is replayed",
			first: first, second: first,
			wantFirst: 200, wantSecond: 200, wantReplay: true, wantEffects: 1,
		},
		{
			name:  "parameters are compared after normalisation (order does not matter)",
			first: first,
			second: req{path: "/v1/payment_intents", key: key,
				form: "metadata[connhost_execution_id]=exec-1&payment_method=pm_card_visa&confirm=true&currency=usd&amount=2000"},
			wantFirst: 200, wantSecond: 200, wantReplay: true, wantEffects: 1,
		},
		{
			name:      "same key, different parameters: idempotency_error, nothing executed",
			first:     first,
			second:    req{path: "/v1/payment_intents", form: strings.Replace(createPI("exec-1"), "amount=2000", "amount=2001", 1), key: key},
			wantFirst: 200, wantSecond: 400, wantErrType: "idempotency_error", wantEffects: 1,
		},
		{
			name:      "same key on another endpoint: idempotency_error",
			first:     first,
			second:    req{path: "/v1/refunds", form: "amount=100", key: key},
			wantFirst: 200, wantSecond: 400, wantErrType: "idempotency_error", wantEffects: 1,
		},
		{
			name:      "keys are scoped to the API key",
			first:     first,
			second:    req{path: "/v1/payment_intents", form: createPI("exec-1"), key: key, apiKey: "sk_test_other_account"},
			wantFirst: 200, wantSecond: 200, wantEffects: 2,
		},
		{
			name:      "no key: every request executes",
			first:     req{path: "/v1/payment_intents", form: createPI("exec-1")},
			second:    req{path: "/v1/payment_intents", form: createPI("exec-1")},
			wantFirst: 200, wantSecond: 200, wantEffects: 2,
		},
		{
			name:      "a decline began executing: the 402 is saved and replayed",
			first:     req{path: "/v1/payment_intents", form: "amount=2000&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined", key: key},
			second:    req{path: "/v1/payment_intents", form: "amount=2000&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined", key: key},
			wantFirst: 402, wantSecond: 402, wantReplay: true, wantEffects: 1,
		},
		{
			name:      "a validation failure is not saved: the corrected request executes",
			first:     req{path: "/v1/payment_intents", form: "currency=usd&confirm=true&payment_method=pm_card_visa", key: key},
			second:    first,
			wantFirst: 400, wantSecond: 200, wantEffects: 1,
		},
		{
			name:      "an authentication failure is not saved",
			first:     req{path: "/v1/payment_intents", form: createPI("exec-1"), key: key, apiKey: "-"},
			second:    first,
			wantFirst: 401, wantSecond: 200, wantEffects: 1,
		},
		{
			name:      "a key longer than 255 characters is refused and not saved",
			first:     req{path: "/v1/payment_intents", form: createPI("exec-1"), key: strings.Repeat("k", 256)},
			second:    req{path: "/v1/payment_intents", form: createPI("exec-1"), key: strings.Repeat("k", 255)},
			wantFirst: 400, wantSecond: 200, wantEffects: 1,
		},
		{
			name:      "a 500 raised while executing is saved and replayed (exec_error fault)",
			setup:     func(e *env) { mustAdd(e.t, e.srv, fault.Rule{Kind: fault.ExecError, Path: "/v1/payment_intents"}) },
			first:     first,
			second:    first,
			wantFirst: 500, wantSecond: 500, wantReplay: true, wantEffects: 0,
		},
		{
			name:      "a 500 before execution (pre-execution fault) is not saved: the retry executes",
			setup:     func(e *env) { mustAdd(e.t, e.srv, fault.Rule{Kind: fault.Status, Status: 500}) },
			first:     first,
			second:    first,
			wantFirst: 500, wantSecond: 200, wantEffects: 1,
		},
		{
			name:      "a 429 rate limit is not saved",
			setup:     func(e *env) { mustAdd(e.t, e.srv, fault.Rule{Kind: fault.Status, Status: 429}) },
			first:     first,
			second:    first,
			wantFirst: 429, wantSecond: 200, wantEffects: 1,
		},
		{
			name:      "applied, then the answer was lost (500): the retry replays the real result",
			setup:     func(e *env) { mustAdd(e.t, e.srv, fault.Rule{Kind: fault.Status, Status: 500, Apply: true}) },
			first:     first,
			second:    first,
			wantFirst: 500, wantSecond: 200, wantReplay: true, wantEffects: 1,
		},
		{
			name:      "keys are kept for the retention period",
			first:     first,
			between:   func(e *env) { e.srv.Advance(24*time.Hour - time.Second) },
			second:    first,
			wantFirst: 200, wantSecond: 200, wantReplay: true, wantEffects: 1,
		},
		{
			name:      "after the retention period the key is pruned and the request runs anew",
			first:     first,
			between:   func(e *env) { e.srv.Advance(24 * time.Hour) },
			second:    first,
			wantFirst: 200, wantSecond: 200, wantEffects: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, stripe.Options{})
			if c.setup != nil {
				c.setup(e)
			}
			r1 := e.do(c.first)
			if r1.status != c.wantFirst {
				t.Fatalf("first: %d, want %d: %s", r1.status, c.wantFirst, r1.body)
			}
			if c.between != nil {
				c.between(e)
			}
			r2 := e.do(c.second)
			if r2.status != c.wantSecond {
				t.Fatalf("second: %d, want %d: %s", r2.status, c.wantSecond, r2.body)
			}
			replayed := r2.header.Get("Idempotent-Replayed") == "true"
			if replayed != c.wantReplay {
				t.Fatalf("Idempotent-Replayed=%v, want %v", replayed, c.wantReplay)
			}
			if c.wantReplay {
				// The body is the saved one; only a first answer damaged
				// on the wire (fault) differs from it.
				if r1.status == r2.status && !bytes.Equal(r1.body, r2.body) {
					t.Fatalf("replayed body differs:\n%s\n%s", r1.body, r2.body)
				}
				if r1.status == r2.status && r2.header.Get("Original-Request") != r1.header.Get("Request-Id") {
					t.Fatalf("Original-Request %q, first Request-Id %q", r2.header.Get("Original-Request"), r1.header.Get("Request-Id"))
				}
				if r2.header.Get("Idempotency-Key") != c.second.key {
					t.Fatalf("Idempotency-Key not echoed")
				}
			}
			if c.wantErrType != "" {
				if got := r2.errObj(t); got.Type != c.wantErrType {
					t.Fatalf("error %+v, want type %s", got, c.wantErrType)
				}
			}
			if n := len(e.listPIs()); n != c.wantEffects {
				t.Fatalf("%d payment intents, want %d", n, c.wantEffects)
			}
		})
	}
}

func mustAdd(t *testing.T, s *stripe.Server, r fault.Rule) {
	t.Helper()
	if err := s.Faults().Add(r); err != nil {
		t.Fatal(err)
	}
}

// While the first request with a key is executing, a second one gets 409
// idempotency_key_in_use (nothing saved); once the first finishes, a retry
// replays it.
func TestIdempotencyKeyInUse(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Hold, Path: "/v1/payment_intents"})
	r := req{path: "/v1/payment_intents", form: createPI("exec-held"), key: "held-key"}
	done := make(chan resp)
	go func() { done <- e.do(r) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Faults().WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	dup := e.do(r)
	if dup.status != 409 {
		t.Fatalf("duplicate in flight: %d %s", dup.status, dup.body)
	}
	if got := dup.errObj(t); got.Type != "idempotency_error" || got.Code != "idempotency_key_in_use" {
		t.Fatalf("error %+v", got)
	}
	// A different-parameter reuse is still a mismatch while in flight.
	other := r
	other.form = createPI("exec-other")
	if mm := e.do(other); mm.status != 400 || mm.errObj(t).Type != "idempotency_error" {
		t.Fatalf("mismatch in flight: %d %s", mm.status, mm.body)
	}
	e.srv.Faults().Release()
	orig := <-done
	if orig.status != 200 {
		t.Fatalf("held request: %d %s", orig.status, orig.body)
	}
	again := e.do(r)
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.body, orig.body) {
		t.Fatalf("retry after completion: %d replayed=%q", again.status, again.header.Get("Idempotent-Replayed"))
	}
	if n := len(e.listPIs()); n != 1 {
		t.Fatalf("%d payment intents, want 1", n)
	}
	if st := e.srv.Stats(); st.IdempotencyInUse != 1 || st.IdempotencyMismatch != 1 || st.Replays != 1 || st.PaymentIntentsCreated != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Many concurrent requests with one key make exactly one effect; every
// answer is the original, a replay of it, or 409.
func TestIdempotencyConcurrent(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	r := req{path: "/v1/payment_intents", form: createPI("exec-race"), key: "race-key"}
	var wg sync.WaitGroup
	results := make([]resp, 32)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.do(r)
		}()
	}
	wg.Wait()
	var id string
	for _, res := range results {
		switch res.status {
		case 200:
			pi := res.pi(t)
			if id == "" {
				id = pi.ID
			}
			if pi.ID != id {
				t.Fatalf("two payment intents for one key: %s and %s", id, pi.ID)
			}
		case 409:
		default:
			t.Fatalf("unexpected %d %s", res.status, res.body)
		}
	}
	if n := len(e.listPIs()); n != 1 {
		t.Fatalf("%d payment intents, want 1", n)
	}
}

// A refund replayed under its key refunds once.
func TestRefundIdempotency(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	pi := e.do(req{path: "/v1/payment_intents", form: createPI("exec-ri")}).pi(t)
	r := req{path: "/v1/refunds", form: "payment_intent=" + pi.ID + "&amount=700", key: "refund-1"}
	a, b := e.do(r), e.do(r)
	if a.status != 200 || b.status != 200 || b.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(a.body, b.body) {
		t.Fatalf("%d / %d replayed=%q", a.status, b.status, b.header.Get("Idempotent-Replayed"))
	}
	// An over-refund is raised while executing, so it is saved and replayed.
	over := req{path: "/v1/refunds", form: "payment_intent=" + pi.ID + "&amount=5000", key: "refund-2"}
	o1, o2 := e.do(over), e.do(over)
	if o1.status != 400 || o2.status != 400 || o2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("over-refund: %d / %d replayed=%q", o1.status, o2.status, o2.header.Get("Idempotent-Replayed"))
	}
	if n := len(e.srv.Refunds()); n != 1 {
		t.Fatalf("%d refunds, want 1", n)
	}
}
