package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/internal/wasmrt"
)

// The payments tests run the shipped payments module through the host
// against the Stripe emulator. Effects are counted with the emulator's list
// endpoints (read-after-write consistent), by the connhost_key metadata the
// connector writes, never taken from the connector's answer.

// paymentArgs are create_payment arguments charging amount with pm.
func paymentArgs(amount int, pm string) string {
	return fmt.Sprintf(`{"amount":%d,"currency":"usd","payment_method":%q,"description":"e2e"}`, amount, pm)
}

// intentsWithKey returns the PaymentIntents the emulator holds for key.
func intentsWithKey(tb testing.TB, key string) []stripe.PaymentIntent {
	tb.Helper()
	pis, err := shared.sbc.FindPaymentIntents(context.Background(), "connhost_key", key)
	if err != nil {
		tb.Fatal(err)
	}
	return pis
}

// wantIntents fails unless the emulator holds exactly n PaymentIntents for
// key, and returns them.
func wantIntents(tb testing.TB, key string, n int) []stripe.PaymentIntent {
	tb.Helper()
	pis := intentsWithKey(tb, key)
	if len(pis) != n {
		tb.Fatalf("the emulator holds %d PaymentIntents with key %s, want %d", len(pis), key, n)
	}
	return pis
}

// refundsWithKey returns the refunds of pi whose metadata carries key.
func refundsWithKey(tb testing.TB, pi, key string) []stripe.Refund {
	tb.Helper()
	rs, err := shared.sbc.Refunds(context.Background(), pi)
	if err != nil {
		tb.Fatal(err)
	}
	var out []stripe.Refund
	for _, r := range rs {
		if r.Metadata["connhost_key"] == key {
			out = append(out, r)
		}
	}
	return out
}

func paymentsStats(tb testing.TB) stripe.Stats {
	tb.Helper()
	st, err := shared.sbc.PaymentsStats(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

type paymentResult struct {
	PaymentIntent string `json:"payment_intent"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
}

type refundResult struct {
	Refund        string `json:"refund"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
	PaymentIntent string `json:"payment_intent"`
}

// replays is the number of answers the Stripe emulator replayed from its
// idempotency cache (tests here run one at a time).
func replays(tb testing.TB) int { return paymentsStats(tb).Replays }

// charge creates a succeeded PaymentIntent through the connector and
// returns its id.
func charge(tb testing.TB, c *conn, amount int) string {
	tb.Helper()
	o := c.executeWithKey(tb, "create_payment", newKey("charge"), paymentArgs(amount, "pm_card_visa"))
	wantOutcome(tb, o, abi.OutcomeOK)
	return o.Receipt
}

func TestPaymentsCreatePaymentChargesOnceAndRecordsTheExecution(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	key := newKey("create")
	before := replays(t)
	o := c.executeWithKey(t, "create_payment", key, paymentArgs(2000, "pm_card_visa"))
	wantOutcome(t, o, abi.OutcomeOK)
	r := result[paymentResult](t, o)
	pi := wantIntents(t, key, 1)[0]
	if o.Receipt != pi.ID || r.PaymentIntent != pi.ID || replays(t) != before {
		t.Fatalf("receipt %q result %+v, want the emulator's %s, not replayed", o.Receipt, r, pi.ID)
	}
	if pi.Status != "succeeded" || pi.Amount != 2000 || pi.Currency != "usd" || r.Status != "succeeded" {
		t.Fatalf("emulator holds %s %d %s, connector says %+v", pi.Status, pi.Amount, pi.Currency, r)
	}
	if got := pi.Metadata["connhost_execution_id"]; got != "exec-"+key {
		t.Fatalf("metadata connhost_execution_id %q, want the call's execution id", got)
	}
}

func TestPaymentsCreatePaymentSameKeyTwiceIsReplayedNotChargedTwice(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	key := newKey("replay")
	args := paymentArgs(2500, "pm_card_visa")
	before := replays(t)
	first := c.executeWithKey(t, "create_payment", key, args)
	afterFirst := replays(t)
	second := c.executeWithKey(t, "create_payment", key, args)
	wantOutcome(t, first, abi.OutcomeOK)
	wantOutcome(t, second, abi.OutcomeOK)
	pi := wantIntents(t, key, 1)[0]
	if afterFirst != before {
		t.Fatal("the first call was answered from the idempotency cache")
	}
	r1, r2 := result[paymentResult](t, first), result[paymentResult](t, second)
	if replays(t) != afterFirst+1 || r1 != r2 || second.Receipt != first.Receipt || second.Receipt != pi.ID {
		t.Fatalf("second call %+v receipt %q, want a replay of %+v with receipt %s", r2, second.Receipt, r1, pi.ID)
	}
}

// TestPaymentsCreatePaymentErrorClasses: each provider error maps to the
// outcome class the host's recovery relies on, and the provider holds the
// effect the class implies.
func TestPaymentsCreatePaymentErrorClasses(t *testing.T) {
	tests := []struct {
		name     string
		pm       string
		amount   int
		fault    *fault.Rule
		want     abi.OutcomeKind
		fragment string
		intents  int // PaymentIntents the emulator holds for the key afterwards
	}{
		{name: "declined card is permanent", pm: "pm_card_chargeDeclined", amount: 2000,
			want: abi.OutcomePermanent, fragment: "card_declined", intents: 1},
		{name: "insufficient funds is permanent", pm: "pm_card_chargeDeclinedInsufficientFunds", amount: 2000,
			want: abi.OutcomePermanent, fragment: "insufficient_funds", intents: 1},
		{name: "amount below Stripe's minimum is a permanent invalid request", pm: "pm_card_visa", amount: 10,
			want: abi.OutcomePermanent, fragment: "invalid_request_error", intents: 0},
		{name: "unknown payment method is a permanent invalid request", pm: "pm_card_nosuchcard", amount: 2000,
			want: abi.OutcomePermanent, fragment: "resource_missing", intents: 0},
		{name: "429 rate limit is retryable", pm: "pm_card_visa", amount: 2000,
			fault: &fault.Rule{Kind: fault.Status, Status: 429, Method: "POST", Path: "/v1/payment_intents"},
			want:  abi.OutcomeRetryable, fragment: "HTTP 429", intents: 0},
		// A 5xx to a POST leaves the result open (Stripe: indeterminate):
		// uncertain, whether or not the charge happened behind it.
		{name: "500 before execution is uncertain", pm: "pm_card_visa", amount: 2000,
			fault: &fault.Rule{Kind: fault.Status, Status: 500, Method: "POST", Path: "/v1/payment_intents"},
			want:  abi.OutcomeUncertain, fragment: "HTTP 500", intents: 0},
		{name: "503 is uncertain", pm: "pm_card_visa", amount: 2000,
			fault: &fault.Rule{Kind: fault.Status, Status: 503, Method: "POST", Path: "/v1/payment_intents"},
			want:  abi.OutcomeUncertain, fragment: "HTTP 503", intents: 0},
		{name: "500 after the charge is uncertain", pm: "pm_card_visa", amount: 2000,
			fault: &fault.Rule{Kind: fault.Status, Status: 500, Apply: true, Method: "POST", Path: "/v1/payment_intents"},
			want:  abi.OutcomeUncertain, fragment: "HTTP 500", intents: 1},
	}
	c := loadPayments(t, shared.sb.PaymentsURL())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fault != nil {
				addPaymentsFault(t, *tt.fault)
			}
			key := newKey("class")
			o := c.executeWithKey(t, "create_payment", key, paymentArgs(tt.amount, tt.pm))
			wantOutcome(t, o, tt.want, tt.fragment)
			wantIntents(t, key, tt.intents)
		})
	}
}

// A retryable or uncertain answer is safe to retry with the same key: the
// retry after a rate limit charges once; the retry after a 500 that hid an
// applied charge gets the saved charge back instead of charging again.
func TestPaymentsCreatePaymentRetryAfterRetryableChargesOnce(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	for _, tc := range []struct {
		rule fault.Rule
		want abi.OutcomeKind
	}{
		{fault.Rule{Kind: fault.Status, Status: 429, Method: "POST", Path: "/v1/payment_intents"}, abi.OutcomeRetryable},
		{fault.Rule{Kind: fault.Status, Status: 500, Apply: true, Method: "POST", Path: "/v1/payment_intents"}, abi.OutcomeUncertain},
	} {
		rule := tc.rule
		t.Run(fmt.Sprintf("%d apply=%v", rule.Status, rule.Apply), func(t *testing.T) {
			addPaymentsFault(t, rule)
			key := newKey("retry")
			args := paymentArgs(3100, "pm_card_visa")
			wantOutcome(t, c.executeWithKey(t, "create_payment", key, args), tc.want)
			before := replays(t)
			o := c.executeWithKey(t, "create_payment", key, args)
			wantOutcome(t, o, abi.OutcomeOK)
			pi := wantIntents(t, key, 1)[0]
			if replayed := replays(t) > before; o.Receipt != pi.ID || replayed != rule.Apply {
				t.Fatalf("retry receipt %q, want receipt %s, replayed %v want %v", o.Receipt, pi.ID, replayed, rule.Apply)
			}
		})
	}
}

// A duplicate while the first request with the key is still executing gets
// 409 idempotency_key_in_use: in progress, and nothing happens twice.
func TestPaymentsInFlightDuplicateIsInProgress(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	tests := []struct {
		op, path string
		args     func() string
		effects  func(t *testing.T, key string) int
	}{
		{op: "create_payment", path: "/v1/payment_intents",
			args:    func() string { return paymentArgs(4200, "pm_card_visa") },
			effects: func(t *testing.T, key string) int { return len(intentsWithKey(t, key)) }},
		{op: "refund_payment", path: "/v1/refunds",
			args: func() string { return fmt.Sprintf(`{"payment_intent":%q,"amount":500}`, charge(t, c, 4200)) },
			effects: func(t *testing.T, key string) int {
				rs, err := shared.sbc.Refunds(context.Background(), "")
				if err != nil {
					t.Fatal(err)
				}
				n := 0
				for _, r := range rs {
					if r.Metadata["connhost_key"] == key {
						n++
					}
				}
				return n
			}},
	}
	for _, tt := range tests {
		t.Run(tt.op, func(t *testing.T) {
			args := tt.args()
			addPaymentsFault(t, fault.Rule{Kind: fault.Hold, Method: "POST", Path: tt.path})
			key := newKey("inflight")
			var first abi.Outcome
			var firstErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				first, firstErr = c.Call(context.Background(), wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: tt.op, Key: key, ExecutionID: "exec-" + key, Args: []byte(args)})
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := shared.sb.Payments().Faults().WaitHeld(ctx, 1); err != nil {
				shared.sb.Payments().Faults().Release()
				wg.Wait()
				t.Fatal(err)
			}
			dup := c.executeWithKey(t, tt.op, key, args)
			shared.sb.Payments().Faults().Release()
			wg.Wait()
			wantOutcome(t, dup, abi.OutcomeInProgress, "HTTP 409", "idempotency_key_in_use")
			if firstErr != nil {
				t.Fatal(firstErr)
			}
			wantOutcome(t, first, abi.OutcomeOK)
			if n := tt.effects(t, key); n != 1 {
				t.Fatalf("the emulator holds %d effects for the key, want 1", n)
			}
		})
	}
}

// The same key with other arguments is Stripe's idempotency_error: a
// permanent error, logged at error level, and the first charge stands alone.
func TestPaymentsCreatePaymentKeyReusedWithOtherArgsIsPermanent(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	key := newKey("reuse")
	wantOutcome(t, c.executeWithKey(t, "create_payment", key, paymentArgs(1500, "pm_card_visa")), abi.OutcomeOK)
	o := c.executeWithKey(t, "create_payment", key, paymentArgs(1600, "pm_card_visa"))
	wantOutcome(t, o, abi.OutcomePermanent, "idempotency_error")
	if pi := wantIntents(t, key, 1)[0]; pi.Amount != 1500 {
		t.Fatalf("the emulator's intent has amount %d, want the first call's 1500", pi.Amount)
	}
	if logs := c.errorLogs(); !containsAny(logs, "reused with different parameters") {
		t.Fatalf("no error-level log about the reused key; error logs: %q", logs)
	}
}

func containsAny(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// create_payment's reconcile: applied for a charged intent, not_applied for
// a declined one (the intent exists and holds no charge), and unknown —
// never not_applied — while Stripe search lags behind the write.
func TestPaymentsCreatePaymentReconcile(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	t.Run("charged intent is applied", func(t *testing.T) {
		key := newKey("rec-applied")
		args := paymentArgs(2000, "pm_card_visa")
		created := c.executeWithKey(t, "create_payment", key, args)
		o := c.reconcile(t, "create_payment", key, args)
		wantOutcome(t, o, abi.OutcomeApplied)
		if o.Receipt != created.Receipt || o.Receipt != wantIntents(t, key, 1)[0].ID {
			t.Fatalf("reconcile receipt %q, want %q", o.Receipt, created.Receipt)
		}
	})
	t.Run("declined intent is not applied", func(t *testing.T) {
		key := newKey("rec-declined")
		args := paymentArgs(2000, "pm_card_chargeDeclined")
		wantOutcome(t, c.executeWithKey(t, "create_payment", key, args), abi.OutcomePermanent)
		wantOutcome(t, c.reconcile(t, "create_payment", key, args), abi.OutcomeNotApplied, "holds no charge")
	})
	t.Run("key never used is unknown since search may lag", func(t *testing.T) {
		key := newKey("rec-never")
		wantOutcome(t, c.reconcile(t, "create_payment", key, paymentArgs(2000, "pm_card_visa")), abi.OutcomeUnknown, "lags")
		wantIntents(t, key, 0)
	})
	t.Run("search lag gives unknown, then applied once search catches up", func(t *testing.T) {
		resetSandboxAtCleanup(t)
		ctx := context.Background()
		if err := shared.sbc.SetSearchLag(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
		key := newKey("rec-lag")
		args := paymentArgs(2000, "pm_card_visa")
		created := c.executeWithKey(t, "create_payment", key, args)
		wantOutcome(t, created, abi.OutcomeOK)
		wantIntents(t, key, 1) // the charge exists: lists read their own writes
		wantOutcome(t, c.reconcile(t, "create_payment", key, args), abi.OutcomeUnknown)
		if err := shared.sbc.AdvanceClock(ctx, time.Hour+time.Second); err != nil {
			t.Fatal(err)
		}
		o := c.reconcile(t, "create_payment", key, args)
		wantOutcome(t, o, abi.OutcomeApplied)
		if o.Receipt != created.Receipt {
			t.Fatalf("reconcile receipt %q, want %q", o.Receipt, created.Receipt)
		}
	})
	t.Run("Stripe 500 on search is unknown", func(t *testing.T) {
		addPaymentsFault(t, fault.Rule{Kind: fault.Status, Status: 500, Method: "GET", Path: "/v1/payment_intents/search"})
		wantOutcome(t, c.reconcile(t, "create_payment", newKey("rec-500"), paymentArgs(2000, "pm_card_visa")), abi.OutcomeUnknown, "HTTP 500")
	})
}

func TestPaymentsRefundPayment(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	t.Run("success refunds once", func(t *testing.T) {
		pi := charge(t, c, 5000)
		key := newKey("refund")
		o := c.executeWithKey(t, "refund_payment", key, fmt.Sprintf(`{"payment_intent":%q,"amount":1200,"reason":"requested_by_customer"}`, pi))
		wantOutcome(t, o, abi.OutcomeOK)
		rs := refundsWithKey(t, pi, key)
		if len(rs) != 1 || rs[0].Amount != 1200 || o.Receipt != rs[0].ID {
			t.Fatalf("emulator refunds %+v, receipt %q: want one refund of 1200", rs, o.Receipt)
		}
	})
	t.Run("same key twice is replayed", func(t *testing.T) {
		pi := charge(t, c, 5000)
		key := newKey("refund-replay")
		args := fmt.Sprintf(`{"payment_intent":%q,"amount":700}`, pi)
		first := c.executeWithKey(t, "refund_payment", key, args)
		before := replays(t)
		second := c.executeWithKey(t, "refund_payment", key, args)
		wantOutcome(t, first, abi.OutcomeOK)
		wantOutcome(t, second, abi.OutcomeOK)
		if r1, r2 := result[refundResult](t, first), result[refundResult](t, second); replays(t) != before+1 || r1 != r2 || second.Receipt != first.Receipt {
			t.Fatalf("second refund %+v, want a replay of %+v", r2, r1)
		}
		if rs, _ := shared.sbc.Refunds(context.Background(), pi); len(rs) != 1 {
			t.Fatalf("the emulator holds %d refunds of %s, want 1", len(rs), pi)
		}
	})
	tests := []struct {
		name     string
		args     func(pi string) string
		fault    *fault.Rule
		want     abi.OutcomeKind
		fragment string
	}{
		{name: "unknown payment intent is a permanent invalid request",
			args: func(string) string { return `{"payment_intent":"pi_e2eNoSuchIntent"}` },
			want: abi.OutcomePermanent, fragment: "resource_missing"},
		{name: "more than the charge is a permanent invalid request",
			args: func(pi string) string { return fmt.Sprintf(`{"payment_intent":%q,"amount":9999}`, pi) },
			want: abi.OutcomePermanent, fragment: "amount_too_large"},
		{name: "429 is retryable",
			args:  func(pi string) string { return fmt.Sprintf(`{"payment_intent":%q}`, pi) },
			fault: &fault.Rule{Kind: fault.Status, Status: 429, Method: "POST", Path: "/v1/refunds"},
			want:  abi.OutcomeRetryable, fragment: "HTTP 429"},
		{name: "502 is uncertain",
			args:  func(pi string) string { return fmt.Sprintf(`{"payment_intent":%q}`, pi) },
			fault: &fault.Rule{Kind: fault.Status, Status: 502, Method: "POST", Path: "/v1/refunds"},
			want:  abi.OutcomeUncertain, fragment: "HTTP 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi := charge(t, c, 5000)
			if tt.fault != nil {
				addPaymentsFault(t, *tt.fault)
			}
			key := newKey("refund-err")
			wantOutcome(t, c.executeWithKey(t, "refund_payment", key, tt.args(pi)), tt.want, tt.fragment)
			if rs, _ := shared.sbc.Refunds(context.Background(), pi); len(rs) != 0 {
				t.Fatalf("the emulator holds %d refunds of %s, want none", len(rs), pi)
			}
		})
	}
	t.Run("idempotency_error is permanent", func(t *testing.T) {
		pi := charge(t, c, 5000)
		key := newKey("refund-reuse")
		wantOutcome(t, c.executeWithKey(t, "refund_payment", key, fmt.Sprintf(`{"payment_intent":%q,"amount":100}`, pi)), abi.OutcomeOK)
		wantOutcome(t, c.executeWithKey(t, "refund_payment", key, fmt.Sprintf(`{"payment_intent":%q,"amount":200}`, pi)), abi.OutcomePermanent, "idempotency_error")
		if rs := refundsWithKey(t, pi, key); len(rs) != 1 || rs[0].Amount != 100 {
			t.Fatalf("emulator refunds %+v, want only the first (100)", rs)
		}
	})
}

// refund_payment's reconcile lists the intent's refunds (read-after-write
// consistent): applied when one carries the key, not_applied when the whole
// list was read and none does, unknown when Stripe cannot answer.
func TestPaymentsRefundPaymentReconcile(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	pi := charge(t, c, 5000)
	key := newKey("rec-refund")
	args := fmt.Sprintf(`{"payment_intent":%q,"amount":300}`, pi)
	// Another refund of the same intent, under another key, is not ours.
	wantOutcome(t, c.executeWithKey(t, "refund_payment", newKey("other"), fmt.Sprintf(`{"payment_intent":%q,"amount":100}`, pi)), abi.OutcomeOK)

	wantOutcome(t, c.reconcile(t, "refund_payment", key, args), abi.OutcomeNotApplied, "none of the 1 refunds")
	refunded := c.executeWithKey(t, "refund_payment", key, args)
	wantOutcome(t, refunded, abi.OutcomeOK)
	o := c.reconcile(t, "refund_payment", key, args)
	wantOutcome(t, o, abi.OutcomeApplied)
	if o.Receipt != refunded.Receipt || len(refundsWithKey(t, pi, key)) != 1 {
		t.Fatalf("reconcile receipt %q, want %q", o.Receipt, refunded.Receipt)
	}
	addPaymentsFault(t, fault.Rule{Kind: fault.Status, Status: 503, Method: "GET", Path: "/v1/refunds"})
	wantOutcome(t, c.reconcile(t, "refund_payment", key, args), abi.OutcomeUnknown, "HTTP 503")
}

func TestPaymentsGetPayment(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	pi := charge(t, c, 2600)
	t.Run("success reads the intent without its metadata", func(t *testing.T) {
		o := c.execute(t, "get_payment", fmt.Sprintf(`{"payment_intent":%q}`, pi))
		wantOutcome(t, o, abi.OutcomeOK)
		v := result[map[string]any](t, o)
		if v["id"] != pi || v["status"] != "succeeded" || v["amount"] != float64(2600) || v["amount_received"] != float64(2600) {
			t.Fatalf("get_payment %s", o.Result)
		}
		if _, ok := v["metadata"]; ok {
			t.Fatalf("get_payment exposes metadata: %s", o.Result)
		}
	})
	t.Run("unknown intent is permanent", func(t *testing.T) {
		// Stripe answers 404 here; the emulator answers 400 (see the
		// report). Either is permanent, so only the code is checked.
		wantOutcome(t, c.execute(t, "get_payment", `{"payment_intent":"pi_e2eNoSuchIntent"}`), abi.OutcomePermanent, "resource_missing")
	})
	t.Run("500 is retryable", func(t *testing.T) {
		addPaymentsFault(t, fault.Rule{Kind: fault.Status, Status: 500, Method: "GET", Path: "/v1/payment_intents/"})
		wantOutcome(t, c.execute(t, "get_payment", fmt.Sprintf(`{"payment_intent":%q}`, pi)), abi.OutcomeRetryable, "HTTP 500")
	})
	t.Run("429 is retryable", func(t *testing.T) {
		addPaymentsFault(t, fault.Rule{Kind: fault.Status, Status: 429, Method: "GET", Path: "/v1/payment_intents/"})
		wantOutcome(t, c.execute(t, "get_payment", fmt.Sprintf(`{"payment_intent":%q}`, pi)), abi.OutcomeRetryable, "HTTP 429")
	})
}

// The execution id is written into the PaymentIntent's metadata, so it is
// part of what Stripe fingerprints under the key: the host must hand every
// attempt of one key the same execution id, or the retry is refused as an
// idempotency_error (permanent) instead of being replayed.
func TestPaymentsSameKeyWithAnotherExecutionIDIsAnIdempotencyError(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	key := newKey("execid")
	args := []byte(paymentArgs(2000, "pm_card_visa"))
	call := func(execID string) abi.Outcome {
		o, err := c.Call(context.Background(), wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: "create_payment", Key: key, ExecutionID: execID, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	wantOutcome(t, call("exec-a"), abi.OutcomeOK)
	wantOutcome(t, call("exec-b"), abi.OutcomePermanent, "idempotency_error")
	if pi := wantIntents(t, key, 1)[0]; pi.Metadata["connhost_execution_id"] != "exec-a" {
		t.Fatalf("metadata %v", pi.Metadata)
	}
}
