package main

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// These tests run the connector against the Stripe emulator the host's dev
// mode and end-to-end tests use (devkit/sandbox/stripe), so the two agree
// on the wire format and on Stripe's idempotency semantics.

func startSandbox(t testing.TB, opts stripe.Options) (*stripe.Server, *testHost) {
	t.Helper()
	s := stripe.New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.Close(); srv.Close() })
	return s, newTestHost(srv.URL, map[string]string{"base_url": srv.URL, "api_key": testAPIKey})
}

func addRule(t *testing.T, s *stripe.Server, r fault.Rule) {
	t.Helper()
	if err := s.Faults().Add(r); err != nil {
		t.Fatal(err)
	}
}

func TestSandboxCreateAndReplay(t *testing.T) {
	s, h := startSandbox(t, stripe.Options{})
	first := create(h, key1, createJSON)
	wantKind(t, first, abi.OutcomeOK, "")
	second := create(h, key1, createJSON)
	wantKind(t, second, abi.OutcomeOK, "")
	if !replayed(h) || second.Receipt != first.Receipt {
		t.Fatalf("replay %+v (logged %t)", second, replayed(h))
	}
	declined := create(h, "ck_declined", `{"amount":2000,"currency":"usd","payment_method":"pm_card_chargeDeclined"}`)
	wantKind(t, declined, abi.OutcomePermanent, "card_error/card_declined")
	wantKind(t, invoke(h, abi.ExportReconcile, "create_payment", "ck_declined", createJSON), abi.OutcomeNotApplied, "holds no charge")
	if st := s.Stats(); st.PaymentIntentsCreated != 2 || st.ChargesSucceeded != 1 {
		t.Fatalf("stats %+v", st)
	}
	get := invoke(h, abi.ExportExecute, "get_payment", "", `{"payment_intent":"`+first.Receipt+`"}`)
	wantKind(t, get, abi.OutcomeOK, "")
}

// TestSandboxAppliedButAnswerLost: the emulator performs the charge and
// drops the connection. The connector says uncertain; the retry with the
// same key gets the saved answer and no second charge happens.
func TestSandboxAppliedButAnswerLost(t *testing.T) {
	for _, kind := range []fault.Kind{fault.Drop, fault.Truncated} {
		t.Run(string(kind), func(t *testing.T) {
			s, h := startSandbox(t, stripe.Options{})
			addRule(t, s, fault.Rule{Kind: kind, Method: "POST", Path: "/v1/payment_intents", Apply: true})
			wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "")
			retry := create(h, key1, createJSON)
			wantKind(t, retry, abi.OutcomeOK, "")
			if !replayed(h) {
				t.Fatalf("retry not replayed: %+v", retry)
			}
			if st := s.Stats(); st.ChargesSucceeded != 1 {
				t.Fatalf("%d charges, want 1", st.ChargesSucceeded)
			}
		})
	}
}

// TestSandboxInFlightDuplicate: a second attempt while the first still
// holds the key gets 409 idempotency_key_in_use: in progress.
func TestSandboxInFlightDuplicate(t *testing.T) {
	s, h := startSandbox(t, stripe.Options{})
	addRule(t, s, fault.Rule{Kind: fault.Hold, Method: "POST", Path: "/v1/payment_intents"})
	done := make(chan abi.Outcome, 1)
	go func() { done <- create(h, key1, createJSON) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Faults().WaitHeld(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantKind(t, create(h, key1, createJSON), abi.OutcomeInProgress, "idempotency_key_in_use")
	s.Faults().Release()
	wantKind(t, <-done, abi.OutcomeOK, "")
	if st := s.Stats(); st.ChargesSucceeded != 1 {
		t.Fatalf("%d charges, want 1", st.ChargesSucceeded)
	}
}

func TestSandboxErrors(t *testing.T) {
	s, h := startSandbox(t, stripe.Options{})
	// Stripe saves a 500 raised during execution and replays it.
	addRule(t, s, fault.Rule{Kind: fault.ExecError, Method: "POST", Path: "/v1/payment_intents"})
	wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "500")
	wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "500")

	addRule(t, s, fault.Rule{Kind: fault.HTML, Method: "POST", Path: "/v1/payment_intents"})
	wantKind(t, create(h, "ck_2", createJSON), abi.OutcomeUncertain, "non-Stripe body")
	addRule(t, s, fault.Rule{Kind: fault.Status, Status: 429, Method: "POST", Path: "/v1/payment_intents"})
	wantKind(t, create(h, "ck_2", createJSON), abi.OutcomeRetryable, "429")
	addRule(t, s, fault.Rule{Kind: fault.Huge, Size: 2 << 20, Method: "POST", Path: "/v1/payment_intents"})
	wantKind(t, create(h, "ck_2", createJSON), abi.OutcomeUncertain, "size cap")

	wantKind(t, create(h, "ck_2", createJSON), abi.OutcomeOK, "")
	wantKind(t, create(h, "ck_2", `{"amount":2001,"currency":"usd","payment_method":"pm_card_visa"}`),
		abi.OutcomePermanent, "idempotency_error")
	wantKind(t, create(h, "ck_3", `{"amount":10,"currency":"usd","payment_method":"pm_card_visa"}`),
		abi.OutcomePermanent, "invalid_request_error")
	h.Values["api_key"] = "sk_live_wrong"
	wantKind(t, create(h, "ck_4", createJSON), abi.OutcomePermanent, "401")
}

// TestSandboxReconcile: search lag makes reconcile unknown until the index
// catches up; refunds reconcile through the consistent list API.
func TestSandboxReconcile(t *testing.T) {
	s, h := startSandbox(t, stripe.Options{SearchLag: time.Minute})
	created := create(h, key1, createJSON)
	wantKind(t, created, abi.OutcomeOK, "")
	wantKind(t, invoke(h, abi.ExportReconcile, "create_payment", key1, createJSON), abi.OutcomeUnknown, "search")
	s.Advance(2 * time.Minute)
	rec := invoke(h, abi.ExportReconcile, "create_payment", key1, createJSON)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != created.Receipt {
		t.Fatalf("receipt %q, want %q", rec.Receipt, created.Receipt)
	}

	args := `{"payment_intent":"` + created.Receipt + `","amount":700}`
	wantKind(t, invoke(h, abi.ExportReconcile, "refund_payment", "ck_refund", args), abi.OutcomeNotApplied, "")
	ref := invoke(h, abi.ExportExecuteWithKey, "refund_payment", "ck_refund", args)
	wantKind(t, ref, abi.OutcomeOK, "")
	rec = invoke(h, abi.ExportReconcile, "refund_payment", "ck_refund", args)
	wantKind(t, rec, abi.OutcomeApplied, "")
	if rec.Receipt != ref.Receipt {
		t.Fatalf("refund receipt %q, want %q", rec.Receipt, ref.Receipt)
	}
	if st := s.Stats(); st.Refunds != 1 {
		t.Fatalf("%d refunds, want 1", st.Refunds)
	}
}
