package stripe_test

import (
	"context"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// A fact about Go clients that crash tests must know: net/http replays a
// request that carries an Idempotency-Key header when a reused keep-alive
// connection dies before the first response byte. An applied-then-dropped
// POST with a key is then retried transparently and the caller sees the
// replayed success, never the loss. Use Status/Truncated with Apply (or a
// fresh connection) to make the loss visible.
func TestGoTransportRetriesDroppedIdempotentPOST(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	// Warm a keep-alive connection.
	if r := e.do(req{method: "GET", path: "/v1/payment_intents"}); r.status != 200 {
		t.Fatal(r.status)
	}
	mustAdd(t, e.srv, fault.Rule{Kind: fault.Drop, Apply: true, Path: "/v1/payment_intents", Method: "POST"})
	r, err := e.try(context.Background(), req{path: "/v1/payment_intents", form: createPI("exec-t"), key: "transport-key"})
	if err != nil {
		t.Fatalf("net/http surfaced the drop (%v): its retry behaviour changed, update RATIONALE.md, 'Why must the crash tests make a dropped Stripe POST visible?'", err)
	}
	if r.status != 200 || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("%d replayed=%q", r.status, r.header.Get("Idempotent-Replayed"))
	}
	if st := e.srv.Stats(); st.PaymentIntentsCreated != 1 || st.Replays != 1 {
		t.Fatalf("stats %+v", st)
	}
}
