package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
)

const (
	key1       = "ck_7f3a9c01d2e4b5a6"
	createJSON = `{"amount":2000,"currency":"USD","payment_method":"pm_card_visa","description":"order 42","customer_email":"jane@example.com"}`
)

// replayed reports whether the connector logged that Stripe replayed a
// saved answer.
func replayed(h *guesttest.Host) bool {
	for _, l := range h.Logs(abi.LevelInfo) {
		if strings.Contains(l, "Stripe replayed") {
			return true
		}
	}
	return false
}

func create(h guest.Host, key, args string) abi.Outcome {
	return invoke(h, abi.ExportExecuteWithKey, "create_payment", key, args)
}

// TestDescribe proves the module says what the manifest declares: the
// policy cross-check at load time depends on these entry points.
func TestDescribe(t *testing.T) {
	want := map[string]abi.OperationInfo{
		"create_payment": {Name: "create_payment", ExecuteWithKey: true, Reconcile: true},
		"refund_payment": {Name: "refund_payment", ExecuteWithKey: true, Reconcile: true},
		"get_payment":    {Name: "get_payment", Execute: true},
	}
	d := guest.Describe()
	if d.ABI != abi.Version || len(d.Operations) != len(want) {
		t.Fatalf("describe = %+v", d)
	}
	for _, op := range d.Operations {
		if op != want[op.Name] {
			t.Errorf("operation %s = %+v, want %+v", op.Name, op, want[op.Name])
		}
	}
}

func TestCreatePaymentSuccess(t *testing.T) {
	f := newFakeStripe(t)
	h := f.host()
	o := create(h, key1, createJSON)
	wantKind(t, o, abi.OutcomeOK, "")
	res := guesttest.Result[paymentResult](t, o)
	if res.PaymentIntent == "" || o.Receipt != res.PaymentIntent || res.Status != "succeeded" ||
		res.Amount != 2000 || res.Currency != "usd" || replayed(h) {
		t.Fatalf("result %+v receipt %q, replay logged %t", res, o.Receipt, replayed(h))
	}
	reqs := h.Sent()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	q := reqs[0]
	for name, want := range map[string]string{
		"Authorization":   "Bearer " + testAPIKey,
		"Stripe-Version":  stripeVersion,
		"Idempotency-Key": key1,
		"Content-Type":    "application/x-www-form-urlencoded",
	} {
		if got := q.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	form, err := url.ParseQuery(string(q.Body))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"amount": "2000", "currency": "usd", "payment_method": "pm_card_visa", "confirm": "true",
		"payment_method_types[]": "card", "description": "order 42", "receipt_email": "jane@example.com",
		"metadata[connhost_key]": key1, "metadata[connhost_execution_id]": "exec-0001",
	} {
		if got := form.Get(k); got != want {
			t.Errorf("form %s = %q, want %q", k, got, want)
		}
	}
}

// TestCreatePaymentReplay: a second attempt with the same key gets Stripe's
// saved response (logged as a replay), the same result, and no second
// PaymentIntent exists.
func TestCreatePaymentReplay(t *testing.T) {
	f := newFakeStripe(t)
	h1, h2 := f.host(), f.host()
	first := create(h1, key1, createJSON)
	second := create(h2, key1, createJSON)
	wantKind(t, second, abi.OutcomeOK, "")
	r1, r2 := guesttest.Result[paymentResult](t, first), guesttest.Result[paymentResult](t, second)
	if replayed(h1) || !replayed(h2) || r1 != r2 || second.Receipt != first.Receipt {
		t.Fatalf("first %+v second %+v, replays logged %t %t", r1, r2, replayed(h1), replayed(h2))
	}
	if n := f.numPaymentIntents(); n != 1 {
		t.Fatalf("%d PaymentIntents, want 1", n)
	}
}

// TestCreatePaymentKeyNotFromArgs: arguments that try to carry a key are
// rejected before any request, and can never become the Idempotency-Key.
func TestCreatePaymentKeyNotFromArgs(t *testing.T) {
	for _, extra := range []string{`"key":"attacker"`, `"idempotency_key":"attacker"`} {
		f := newFakeStripe(t)
		h := f.host()
		args := strings.Replace(createJSON, "{", "{"+extra+",", 1)
		wantKind(t, create(h, key1, args), abi.OutcomePermanent, "unknown field")
		if len(h.Sent()) != 0 {
			t.Fatalf("%s: a request was sent", extra)
		}
	}
}

// TestCreatePaymentFailures covers every error class the connector maps.
func TestCreatePaymentFailures(t *testing.T) {
	htmlPage := func(status int) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			fmt.Fprint(w, "<html><body><h1>Bad gateway</h1></body></html>")
			return true
		}
	}
	truncated := func(status int) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, `{"id":"pi_123","object":"payment_in`)
			return true
		}
	}
	status := func(code int, body map[string]any) func(w http.ResponseWriter, r *http.Request) bool {
		return func(w http.ResponseWriter, r *http.Request) bool { writeJSON(w, code, body); return true }
	}
	tests := []struct {
		name     string
		args     string
		fault    func(w http.ResponseWriter, r *http.Request) bool
		want     abi.OutcomeKind
		contains string
	}{
		{name: "declined card", args: strings.Replace(createJSON, "pm_card_visa", "pm_card_chargeDeclined", 1),
			want: abi.OutcomePermanent, contains: "card_error/card_declined/generic_decline"},
		{name: "invalid request", args: strings.Replace(createJSON, "USD", "zzz", 1),
			want: abi.OutcomePermanent, contains: "invalid_request_error/parameter_invalid_string param currency"},
		{name: "not found", fault: status(404, stripeErr("invalid_request_error", "resource_missing", "No such")),
			want: abi.OutcomePermanent, contains: "404"},
		{name: "rate limited", fault: status(429, stripeErr("rate_limit_error", "rate_limit", "Too many requests")),
			want: abi.OutcomeRetryable, contains: "429"},
		{name: "key in use", fault: status(409, stripeErr("idempotency_error", "idempotency_key_in_use", "in use")),
			want: abi.OutcomeInProgress, contains: "idempotency_key_in_use"},
		{name: "lock timeout", fault: status(409, stripeErr("invalid_request_error", "lock_timeout", "locked")),
			want: abi.OutcomeRetryable, contains: "lock_timeout"},
		{name: "server error", fault: status(500, stripeErr("api_error", "", "Something went wrong")),
			want: abi.OutcomeUncertain, contains: "500 api_error"},
		{name: "html 502", fault: htmlPage(502), want: abi.OutcomeUncertain, contains: "non-Stripe body (text/html"},
		{name: "html 403", fault: htmlPage(403), want: abi.OutcomePermanent, contains: "non-Stripe body"},
		{name: "truncated 200", fault: truncated(200), want: abi.OutcomeUncertain, contains: "unreadable 2xx"},
		{name: "truncated 503", fault: truncated(503), want: abi.OutcomeUncertain, contains: "503"},
		{name: "truncated 400", fault: truncated(400), want: abi.OutcomePermanent, contains: "400"},
		{name: "connection dropped", fault: func(w http.ResponseWriter, r *http.Request) bool {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return true
		}, want: abi.OutcomeUncertain, contains: "network"},
		{name: "bad amount", args: `{"amount":0,"currency":"usd","payment_method":"pm_card_visa"}`,
			want: abi.OutcomePermanent, contains: "amount must be"},
		{name: "fractional amount", args: `{"amount":10.5,"currency":"usd","payment_method":"pm_card_visa"}`,
			want: abi.OutcomePermanent, contains: "invalid arguments"},
		{name: "trailing data", args: createJSON + `{}`, want: abi.OutcomePermanent, contains: "trailing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeStripe(t)
			f.fault = tt.fault
			args := tt.args
			if args == "" {
				args = createJSON
			}
			o := create(f.host(), key1, args)
			wantKind(t, o, tt.want, tt.contains)
			if o.Result != nil || o.Receipt != "" {
				t.Fatalf("failure carries result %s receipt %q", o.Result, o.Receipt)
			}
		})
	}
}

// TestCreatePaymentIdempotencyError: the same key with other parameters is
// permanent, and loud in the log.
func TestCreatePaymentIdempotencyError(t *testing.T) {
	f := newFakeStripe(t)
	wantKind(t, create(f.host(), key1, createJSON), abi.OutcomeOK, "")
	h := f.host()
	o := create(h, key1, strings.Replace(createJSON, "2000", "2500", 1))
	wantKind(t, o, abi.OutcomePermanent, "idempotency_error")
	if logs := h.ErrorLogs(); len(logs) != 1 || !strings.Contains(logs[0], "idempotency key") {
		t.Fatalf("error logs %q, want one about the idempotency key", logs)
	}
	if n := f.numPaymentIntents(); n != 1 {
		t.Fatalf("%d PaymentIntents, want 1", n)
	}
}

// TestCreatePaymentTimeoutThenRetry: Stripe applied the request but the
// answer was lost to a timeout. The outcome is uncertain, and the retry with
// the same key returns the one PaymentIntent instead of charging again.
func TestCreatePaymentTimeoutThenRetry(t *testing.T) {
	f := newFakeStripe(t)
	release := make(chan struct{})
	f.afterAct = func() { <-release }
	h := f.host()
	h.Timeout = 200 * time.Millisecond
	o := create(h, key1, createJSON)
	close(release)
	wantKind(t, o, abi.OutcomeUncertain, "timeout")
	f.mu.Lock()
	f.afterAct = nil
	f.mu.Unlock()

	rh := f.host()
	retry := create(rh, key1, createJSON)
	wantKind(t, retry, abi.OutcomeOK, "")
	if !replayed(rh) {
		t.Fatalf("retry not replayed: %+v", retry)
	}
	if n := f.numPaymentIntents(); n != 1 {
		t.Fatalf("%d PaymentIntents after timeout + retry, want 1", n)
	}
}

func TestCreatePaymentHostFailures(t *testing.T) {
	t.Run("denied", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		h.Allow = []string{"https://api.stripe.com:443"}
		wantKind(t, create(h, key1, createJSON), abi.OutcomePermanent, "allowlist")
		if f.count("POST /v1/payment_intents") != 0 {
			t.Fatal("denied request reached the provider")
		}
	})
	t.Run("too large", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		h.MaxBody = 16
		wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "size cap")
		wantKind(t, invoke(h, abi.ExportExecute, "get_payment", "", `{"payment_intent":"pi_test0001"}`),
			abi.OutcomePermanent, "size cap")
	})
	t.Run("unreachable", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		f.srv.Close()
		wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "network")
	})
	t.Run("mangled response envelope", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		h.Mangle = true
		wantKind(t, create(h, key1, createJSON), abi.OutcomeUncertain, "envelope")
		rh := f.host()
		retry := create(rh, key1, createJSON)
		if !replayed(rh) || f.numPaymentIntents() != 1 {
			t.Fatalf("retry %+v, %d PaymentIntents", retry, f.numPaymentIntents())
		}
		wantKind(t, invoke(h, abi.ExportExecute, "get_payment", "", `{"payment_intent":"pi_test0001"}`),
			abi.OutcomePermanent, "envelope")
	})
	t.Run("no api key", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		h.Values["api_key"] = ""
		wantKind(t, create(h, key1, createJSON), abi.OutcomePermanent, "api_key")
	})
	t.Run("no key", func(t *testing.T) {
		f := newFakeStripe(t)
		wantKind(t, create(f.host(), "", createJSON), abi.OutcomePermanent, "no idempotency key")
		wantKind(t, invoke(f.host(), abi.ExportExecute, "create_payment", "", createJSON),
			abi.OutcomePermanent, "does not implement")
	})
}

func TestReconcileCreatePayment(t *testing.T) {
	reconcile := func(h guest.Host, key string) abi.Outcome {
		return invoke(h, abi.ExportReconcile, "create_payment", key, createJSON)
	}
	t.Run("applied", func(t *testing.T) {
		f := newFakeStripe(t)
		created := create(f.host(), key1, createJSON)
		o := reconcile(f.host(), key1)
		wantKind(t, o, abi.OutcomeApplied, "")
		if o.Receipt != created.Receipt {
			t.Fatalf("receipt %q, want %q", o.Receipt, created.Receipt)
		}
	})
	t.Run("search lag is unknown", func(t *testing.T) {
		f := newFakeStripe(t)
		f.lagging = true
		wantKind(t, create(f.host(), key1, createJSON), abi.OutcomeOK, "")
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "not evidence")
	})
	t.Run("never created is unknown too", func(t *testing.T) {
		f := newFakeStripe(t)
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "search lags")
	})
	t.Run("other keys do not count", func(t *testing.T) {
		f := newFakeStripe(t)
		wantKind(t, create(f.host(), key1+"x", createJSON), abi.OutcomeOK, "")
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "")
	})
	t.Run("quote in key", func(t *testing.T) {
		f := newFakeStripe(t)
		k := `it's\k`
		created := create(f.host(), k, createJSON)
		o := reconcile(f.host(), k)
		wantKind(t, o, abi.OutcomeApplied, "")
		if o.Receipt != created.Receipt {
			t.Fatalf("receipt %q, want %q", o.Receipt, created.Receipt)
		}
	})
	t.Run("declined is not applied", func(t *testing.T) {
		f := newFakeStripe(t)
		declined := strings.Replace(createJSON, "pm_card_visa", "pm_card_chargeDeclined", 1)
		wantKind(t, create(f.host(), key1, declined), abi.OutcomePermanent, "card_declined")
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeNotApplied, "holds no charge")
		// Without a fresh read the search status may be stale: unknown.
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path == "/v1/payment_intents/search" {
				return false
			}
			writeJSON(w, 500, stripeErr("api_error", "", "boom"))
			return true
		}
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "stale")
	})
	t.Run("server error", func(t *testing.T) {
		f := newFakeStripe(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			writeJSON(w, 500, stripeErr("api_error", "", "boom"))
			return true
		}
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "500")
	})
	t.Run("garbage", func(t *testing.T) {
		f := newFakeStripe(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			fmt.Fprint(w, `{"data":[{"id":`)
			return true
		}
		wantKind(t, reconcile(f.host(), key1), abi.OutcomeUnknown, "unreadable")
	})
	t.Run("unreachable", func(t *testing.T) {
		f := newFakeStripe(t)
		h := f.host()
		f.srv.Close()
		wantKind(t, reconcile(h, key1), abi.OutcomeUnknown, "network")
	})
}

func TestGetPayment(t *testing.T) {
	f := newFakeStripe(t)
	created := create(f.host(), key1, createJSON)
	get := func(h guest.Host, id string) abi.Outcome {
		return invoke(h, abi.ExportExecute, "get_payment", "", `{"payment_intent":"`+id+`"}`)
	}
	o := get(f.host(), created.Receipt)
	wantKind(t, o, abi.OutcomeOK, "")
	v := guesttest.Result[paymentView](t, o)
	if v.ID != created.Receipt || v.Amount != 2000 || v.Status != "succeeded" || v.Description == nil || *v.Description != "order 42" {
		t.Fatalf("view %+v", v)
	}
	if strings.Contains(string(o.Result), key1) {
		t.Fatalf("result leaks the idempotency key: %s", o.Result)
	}
	wantKind(t, get(f.host(), "pi_missing"), abi.OutcomePermanent, "resource_missing")
	h := f.host()
	wantKind(t, get(h, "pi_../../v1/refunds"), abi.OutcomePermanent, "invalid arguments")
	if len(h.Sent()) != 0 {
		t.Fatal("invalid id reached the provider")
	}
	f.fault = func(w http.ResponseWriter, r *http.Request) bool {
		writeJSON(w, 503, stripeErr("api_error", "", "unavailable"))
		return true
	}
	wantKind(t, get(f.host(), created.Receipt), abi.OutcomeRetryable, "503")
}

func TestRefundPayment(t *testing.T) {
	const rkey = "ck_refund_1"
	refundArgs := func(pi string) string {
		return `{"payment_intent":"` + pi + `","amount":500,"reason":"requested_by_customer"}`
	}
	refundOp := func(h guest.Host, export, key, args string) abi.Outcome {
		return invoke(h, export, "refund_payment", key, args)
	}

	t.Run("execute and replay", func(t *testing.T) {
		f := newFakeStripe(t)
		pi := create(f.host(), key1, createJSON).Receipt
		h := f.host()
		o := refundOp(h, abi.ExportExecuteWithKey, rkey, refundArgs(pi))
		wantKind(t, o, abi.OutcomeOK, "")
		r := guesttest.Result[refundResult](t, o)
		if r.Refund != o.Receipt || r.Amount != 500 || r.PaymentIntent != pi || replayed(h) {
			t.Fatalf("refund %+v", r)
		}
		if got := h.Sent()[0].Get("Idempotency-Key"); got != rkey {
			t.Fatalf("Idempotency-Key %q", got)
		}
		ah := f.host()
		again := refundOp(ah, abi.ExportExecuteWithKey, rkey, refundArgs(pi))
		if r2 := guesttest.Result[refundResult](t, again); !replayed(ah) || r2 != r || again.Receipt != o.Receipt {
			t.Fatalf("replay %+v", r2)
		}
		if f.numRefunds() != 1 {
			t.Fatalf("%d refunds, want 1", f.numRefunds())
		}
	})
	t.Run("reconcile applied", func(t *testing.T) {
		f := newFakeStripe(t)
		pi := create(f.host(), key1, createJSON).Receipt
		o := refundOp(f.host(), abi.ExportExecuteWithKey, rkey, refundArgs(pi))
		rec := refundOp(f.host(), abi.ExportReconcile, rkey, refundArgs(pi))
		wantKind(t, rec, abi.OutcomeApplied, "")
		if rec.Receipt != o.Receipt {
			t.Fatalf("receipt %q, want %q", rec.Receipt, o.Receipt)
		}
	})
	t.Run("reconcile not applied", func(t *testing.T) {
		f := newFakeStripe(t)
		pi := create(f.host(), key1, createJSON).Receipt
		// Another execution's refund of the same PaymentIntent.
		wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, rkey+"-other", refundArgs(pi)), abi.OutcomeOK, "")
		wantKind(t, refundOp(f.host(), abi.ExportReconcile, rkey, refundArgs(pi)), abi.OutcomeNotApplied, "none of the 1 refunds")
	})
	t.Run("reconcile pages", func(t *testing.T) {
		f := newFakeStripe(t)
		pi := create(f.host(), key1, createJSON).Receipt
		o := refundOp(f.host(), abi.ExportExecuteWithKey, rkey, `{"payment_intent":"`+pi+`","amount":1}`)
		for i := 0; i < 150; i++ {
			k := fmt.Sprintf("%s-%03d", rkey, i)
			wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, k, `{"payment_intent":"`+pi+`","amount":1}`), abi.OutcomeOK, "")
		}
		h := f.host()
		rec := refundOp(h, abi.ExportReconcile, rkey, `{"payment_intent":"`+pi+`","amount":1}`)
		wantKind(t, rec, abi.OutcomeApplied, "")
		if rec.Receipt != o.Receipt || len(h.Sent()) != 2 {
			t.Fatalf("receipt %q (want %q) after %d requests", rec.Receipt, o.Receipt, len(h.Sent()))
		}
		wantKind(t, refundOp(f.host(), abi.ExportReconcile, "ck_absent", `{"payment_intent":"`+pi+`","amount":1}`),
			abi.OutcomeNotApplied, "none of the 151 refunds")
	})
	t.Run("reconcile unknown", func(t *testing.T) {
		f := newFakeStripe(t)
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>bad gateway</html>")
			return true
		}
		wantKind(t, refundOp(f.host(), abi.ExportReconcile, rkey, refundArgs("pi_x")), abi.OutcomeUnknown, "502")
		h := f.host()
		f.srv.Close()
		wantKind(t, refundOp(h, abi.ExportReconcile, rkey, refundArgs("pi_x")), abi.OutcomeUnknown, "network")
	})
	t.Run("failures", func(t *testing.T) {
		f := newFakeStripe(t)
		wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, rkey, refundArgs("pi_missing")), abi.OutcomePermanent, "resource_missing")
		wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, rkey, `{"payment_intent":"pi_1","reason":"because"}`),
			abi.OutcomePermanent, "reason must be")
		wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, rkey, `{"payment_intent":"pi_1","key":"x"}`),
			abi.OutcomePermanent, "unknown field")
		f.fault = func(w http.ResponseWriter, r *http.Request) bool {
			writeJSON(w, 429, stripeErr("rate_limit_error", "rate_limit", "slow down"))
			return true
		}
		wantKind(t, refundOp(f.host(), abi.ExportExecuteWithKey, rkey, refundArgs("pi_1")), abi.OutcomeRetryable, "429")
	})
}
