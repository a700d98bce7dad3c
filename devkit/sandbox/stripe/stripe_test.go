package stripe_test

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// Expectations below are taken from Stripe's documentation (API reference
// "Errors", "Idempotent requests", "PaymentIntents", "Refunds", "Search");
// there is no real Stripe to run them against, so each case names the
// documented rule it checks.

func TestAuthentication(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	cases := []struct {
		name   string
		header map[string]string
		apiKey string
		want   int
	}{
		{"no key", nil, "-", 401},
		{"live key refused by the sandbox", nil, "sk_live_abc", 401},
		{"publishable key", nil, "pk_test_abc", 401},
		{"bare prefix", nil, "sk_test_", 401},
		{"bearer test key", nil, "", 200},
		{"basic auth with the key as user", map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(testKey+":"))}, "-", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(req{method: "GET", path: "/v1/payment_intents", apiKey: c.apiKey, header: c.header})
			if r.status != c.want {
				t.Fatalf("status %d, want %d: %s", r.status, c.want, r.body)
			}
			if c.want == 401 {
				if got := r.errObj(t); got.Type != "invalid_request_error" || got.Message == "" {
					t.Fatalf("error %+v", got)
				}
			}
		})
	}
	if n := len(e.listPIs()); n != 0 {
		t.Fatalf("%d payment intents", n)
	}
}

func TestCreatePaymentIntent(t *testing.T) {
	cases := []struct {
		name           string
		form           string
		wantStatus     string
		wantReceived   int64
		wantCapturable int64
		wantCharge     bool
	}{
		{"confirmed visa", createPI("exec-1"), "succeeded", 2000, 0, true},
		{"manual capture", "amount=2000&currency=USD&confirm=true&payment_method=pm_card_mastercard&capture_method=manual", "requires_capture", 0, 2000, true},
		{"unconfirmed with payment method", "amount=2000&currency=usd&payment_method=pm_card_visa", "requires_confirmation", 0, 0, false},
		{"unconfirmed without payment method", "amount=2000&currency=usd&payment_method_types[]=card", "requires_payment_method", 0, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, stripe.Options{})
			r := e.do(req{path: "/v1/payment_intents", form: c.form, header: map[string]string{"Stripe-Version": "2024-06-20"}})
			if r.status != 200 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			pi := r.pi(t)
			if !strings.HasPrefix(pi.ID, "pi_") || pi.Status != c.wantStatus || pi.Amount != 2000 || pi.Currency != "usd" ||
				pi.AmountReceived != c.wantReceived || pi.AmountCapturable != c.wantCapturable || (pi.LatestCharge != nil) != c.wantCharge {
				t.Fatalf("payment intent %+v", pi)
			}
			if pi.LatestCharge != nil && !strings.HasPrefix(*pi.LatestCharge, "ch_") {
				t.Fatalf("latest_charge %q", *pi.LatestCharge)
			}
			if pi.Created != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Unix() {
				t.Fatalf("created %d", pi.Created)
			}
			if got := r.header.Get("Stripe-Version"); got != "2024-06-20" {
				t.Fatalf("Stripe-Version %q not echoed", got)
			}
			if !strings.HasPrefix(r.header.Get("Request-Id"), "req_") {
				t.Fatalf("Request-Id %q", r.header.Get("Request-Id"))
			}
			got := e.do(req{method: "GET", path: "/v1/payment_intents/" + pi.ID})
			if got.status != 200 || got.pi(t).ID != pi.ID || got.pi(t).Status != c.wantStatus {
				t.Fatalf("retrieve: %d %s", got.status, got.body)
			}
		})
	}
	t.Run("metadata and default version", func(t *testing.T) {
		e := newEnv(t, stripe.Options{})
		r := e.do(req{path: "/v1/payment_intents", form: createPI("exec-7") + "&metadata[other]=x&description=hello"})
		pi := r.pi(t)
		if pi.Metadata["connhost_execution_id"] != "exec-7" || pi.Metadata["other"] != "x" || pi.Description == nil || *pi.Description != "hello" {
			t.Fatalf("%+v", pi)
		}
		if r.header.Get("Stripe-Version") != stripe.DefaultAPIVersion {
			t.Fatalf("Stripe-Version %q", r.header.Get("Stripe-Version"))
		}
	})
}

// Parameter validation fails before the endpoint executes: 400
// invalid_request_error, nothing created, and (tested in
// TestIdempotency) nothing saved under the key.
func TestCreatePaymentIntentValidation(t *testing.T) {
	long := strings.Repeat("k", 41)
	cases := []struct {
		name      string
		form      string
		wantParam string
		wantCode  string
	}{
		{"missing amount", "currency=usd", "amount", "parameter_missing"},
		{"amount not an integer", "amount=12.5&currency=usd", "amount", "parameter_invalid_integer"},
		{"amount below the minimum", "amount=49&currency=usd", "amount", "amount_too_small"},
		{"amount above the maximum", "amount=100000000&currency=usd", "amount", "amount_too_large"},
		{"missing currency", "amount=2000", "currency", "parameter_missing"},
		{"bad currency", "amount=2000&currency=dollars", "currency", ""},
		{"unknown parameter", "amount=2000&currency=usd&idempotency_key=x", "idempotency_key", "parameter_unknown"},
		{"unknown payment method", "amount=2000&currency=usd&payment_method=pm_nope", "payment_method", "resource_missing"},
		{"confirm without payment method", "amount=2000&currency=usd&confirm=true", "payment_method", "parameter_missing"},
		{"bad boolean", "amount=2000&currency=usd&confirm=yes", "confirm", ""},
		{"bad capture method", "amount=2000&currency=usd&capture_method=later", "capture_method", ""},
		{"unsupported payment method type", "amount=2000&currency=usd&payment_method_types[]=sepa_debit", "payment_method_types", ""},
		{"metadata key too long", "amount=2000&currency=usd&metadata[" + long + "]=v", "metadata", ""},
		{"metadata value too long", "amount=2000&currency=usd&metadata[k]=" + strings.Repeat("v", 501), "metadata", ""},
	}
	e := newEnv(t, stripe.Options{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(req{path: "/v1/payment_intents", form: c.form})
			if r.status != 400 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			got := r.errObj(t)
			if got.Type != "invalid_request_error" || got.Param != c.wantParam || got.Code != c.wantCode {
				t.Fatalf("error %+v, want param %q code %q", got, c.wantParam, c.wantCode)
			}
		})
	}
	if n := len(e.listPIs()); n != 0 {
		t.Fatalf("validation failures created %d payment intents", n)
	}
}

// Stripe's test cards: a confirmed decline answers 402 card_error, the
// error carries the PaymentIntent (status requires_payment_method), and
// the PaymentIntent exists afterwards although nothing was charged.
func TestDeclines(t *testing.T) {
	cases := []struct {
		pm, code, decline string
	}{
		{"pm_card_chargeDeclined", "card_declined", "generic_decline"},
		{"pm_card_chargeDeclinedInsufficientFunds", "card_declined", "insufficient_funds"},
		{"pm_card_chargeDeclinedFraudulent", "card_declined", "fraudulent"},
		{"pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"},
		{"pm_card_chargeDeclinedIncorrectCvc", "incorrect_cvc", "incorrect_cvc"},
		{"pm_card_chargeDeclinedProcessingError", "processing_error", "processing_error"},
	}
	for _, c := range cases {
		t.Run(c.pm, func(t *testing.T) {
			e := newEnv(t, stripe.Options{})
			r := e.do(req{path: "/v1/payment_intents", form: "amount=2000&currency=usd&confirm=true&metadata[connhost_execution_id]=x&payment_method=" + c.pm})
			if r.status != 402 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			got := r.errObj(t)
			if got.Type != "card_error" || got.Code != c.code || got.DeclineCode != c.decline || !strings.HasPrefix(got.Charge, "ch_") {
				t.Fatalf("error %+v", got)
			}
			if got.PaymentIntent == nil || got.PaymentIntent.Status != "requires_payment_method" || got.PaymentIntent.LastPaymentError == nil ||
				got.PaymentIntent.LastPaymentError.Code != c.code || got.PaymentIntent.AmountReceived != 0 {
				t.Fatalf("error.payment_intent %+v", got.PaymentIntent)
			}
			pis := e.listPIs()
			if len(pis) != 1 || pis[0].ID != got.PaymentIntent.ID || pis[0].Status != "requires_payment_method" {
				t.Fatalf("listed %+v", pis)
			}
			if st := e.srv.Stats(); st.ChargesDeclined != 1 || st.ChargesSucceeded != 0 || st.PaymentIntentsCreated != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestRetrieveMissing(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	for _, c := range []struct{ path, param string }{
		{"/v1/payment_intents/pi_missing", "intent"},
		{"/v1/refunds/re_missing", "id"},
	} {
		r := e.do(req{method: "GET", path: c.path})
		if got := r.errObj(t); r.status != 404 && r.status != 400 || got.Code != "resource_missing" || got.Param != c.param {
			t.Fatalf("%s: %d %+v", c.path, r.status, got)
		}
	}
	r := e.do(req{method: "GET", path: "/v1/charges"})
	if r.status != 404 || !strings.Contains(r.errObj(t).Message, "Unrecognized request URL") {
		t.Fatalf("unknown route: %d %s", r.status, r.body)
	}
}

func TestListPaymentIntents(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	var ids []string
	for i := range 5 {
		ids = append(ids, e.do(req{path: "/v1/payment_intents", form: createPI("exec-" + string(rune('a'+i)))}).pi(t).ID)
	}
	get := func(q string) stripe.List[stripe.PaymentIntent] {
		r := e.do(req{method: "GET", path: "/v1/payment_intents", form: q})
		var l stripe.List[stripe.PaymentIntent]
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 {
			t.Fatalf("list %q: %d %s", q, r.status, r.body)
		}
		return l
	}
	pick := func(l stripe.List[stripe.PaymentIntent]) []string {
		var out []string
		for _, p := range l.Data {
			out = append(out, p.ID)
		}
		return out
	}
	cases := []struct {
		name     string
		q        string
		want     []string
		wantMore bool
	}{
		{"default limit, newest first", "", []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, false},
		{"limit", "limit=2", []string{ids[4], ids[3]}, true},
		{"starting_after", "limit=2&starting_after=" + ids[3], []string{ids[2], ids[1]}, true},
		{"last page", "limit=2&starting_after=" + ids[1], []string{ids[0]}, false},
		{"ending_before", "limit=2&ending_before=" + ids[1], []string{ids[3], ids[2]}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := get(c.q)
			if got := pick(l); strings.Join(got, ",") != strings.Join(c.want, ",") || l.HasMore != c.wantMore || l.Object != "list" || l.URL != "/v1/payment_intents" {
				t.Fatalf("got %v more=%v, want %v more=%v", got, l.HasMore, c.want, c.wantMore)
			}
		})
	}
	if r := e.do(req{method: "GET", path: "/v1/payment_intents", form: "limit=101"}); r.status != 400 {
		t.Fatalf("limit=101: %d", r.status)
	}
}

// Search is not read-after-write consistent: a new object becomes visible
// only SearchLag after its creation; list and retrieve see it at once.
func TestSearchLag(t *testing.T) {
	e := newEnv(t, stripe.Options{SearchLag: 30 * time.Second})
	pi := e.do(req{path: "/v1/payment_intents", form: createPI("exec-lag")}).pi(t)
	q := "metadata['connhost_execution_id']:'exec-lag'"
	if s := e.search(q); len(s.Data) != 0 {
		t.Fatalf("visible to search right after creation: %+v", s.Data)
	}
	if n := len(e.listPIs()); n != 1 {
		t.Fatalf("list sees %d, want 1 at once", n)
	}
	e.srv.Advance(29 * time.Second)
	if s := e.search(q); len(s.Data) != 0 {
		t.Fatal("visible before the lag passed")
	}
	e.srv.Advance(time.Second)
	s := e.search(q)
	if len(s.Data) != 1 || s.Data[0].ID != pi.ID || s.Object != "search_result" || s.URL != "/v1/payment_intents/search" {
		t.Fatalf("after the lag: %+v", s)
	}
	// Raising the lag hides objects again until they are old enough.
	e.srv.SetSearchLag(time.Hour)
	if s := e.search(q); len(s.Data) != 0 {
		t.Fatal("visible under a one-hour lag")
	}
}

func TestSearchQueries(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	a := e.do(req{path: "/v1/payment_intents", form: createPI("exec-a")}).pi(t)
	b := e.do(req{path: "/v1/payment_intents", form: "amount=5000&currency=eur&metadata[connhost_execution_id]=exec-b"}).pi(t)
	cases := []struct {
		q    string
		want []string
	}{
		{"metadata['connhost_execution_id']:'exec-a'", []string{a.ID}},
		{`metadata["connhost_execution_id"]:"exec-b"`, []string{b.ID}},
		{"metadata['connhost_execution_id']:'exec'", nil}, // exact, not substring
		{"metadata['connhost_execution_id']:'EXEC-A'", nil},
		{"status:'succeeded'", []string{a.ID}},
		{"amount>2000", []string{b.ID}},
		{"amount>=2000", []string{b.ID, a.ID}},
		{"currency:'eur' AND amount:5000", []string{b.ID}},
		{"currency:'usd' OR currency:'eur'", []string{b.ID, a.ID}},
		{"-status:'succeeded'", []string{b.ID}},
		{"metadata['missing']:'x'", nil},
	}
	for _, c := range cases {
		t.Run(c.q, func(t *testing.T) {
			var got []string
			for _, p := range e.search(c.q).Data {
				got = append(got, p.ID)
			}
			if strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	for _, bad := range []string{"", "metadata['k']", "color:'red'", "status:'a' AND status:'b' OR amount:1", "amount:'x'", "status>'a'", "metadata['k':'v'"} {
		t.Run("invalid "+bad, func(t *testing.T) {
			r := e.do(req{method: "GET", path: "/v1/payment_intents/search", form: "query=" + url.QueryEscape(bad)})
			if r.status != 400 || r.errObj(t).Param != "query" {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
	t.Run("pagination", func(t *testing.T) {
		s := e.search("currency:'usd' OR currency:'eur'")
		if s.HasMore {
			t.Fatal("has_more with 2 results and limit 10")
		}
		r := e.do(req{method: "GET", path: "/v1/payment_intents/search", form: "limit=1&query=" + url.QueryEscape("amount>1")})
		var p1 stripe.SearchResult[stripe.PaymentIntent]
		_ = json.Unmarshal(r.body, &p1)
		if len(p1.Data) != 1 || !p1.HasMore || p1.NextPage == nil {
			t.Fatalf("page 1: %s", r.body)
		}
		r = e.do(req{method: "GET", path: "/v1/payment_intents/search", form: "limit=1&page=" + url.QueryEscape(*p1.NextPage) + "&query=" + url.QueryEscape("amount>1")})
		var p2 stripe.SearchResult[stripe.PaymentIntent]
		_ = json.Unmarshal(r.body, &p2)
		if len(p2.Data) != 1 || p2.HasMore || p2.Data[0].ID == p1.Data[0].ID {
			t.Fatalf("page 2: %s", r.body)
		}
	})
}

func TestRefunds(t *testing.T) {
	e := newEnv(t, stripe.Options{})
	pi := e.do(req{path: "/v1/payment_intents", form: createPI("exec-r")}).pi(t)
	unpaid := e.do(req{path: "/v1/payment_intents", form: "amount=2000&currency=usd"}).pi(t)
	refund := func(form string) resp { return e.do(req{path: "/v1/refunds", form: form}) }

	r := refund("payment_intent=" + pi.ID + "&amount=500&metadata[connhost_execution_id]=exec-r1")
	if r.status != 200 {
		t.Fatalf("partial refund: %d %s", r.status, r.body)
	}
	var re stripe.Refund
	_ = json.Unmarshal(r.body, &re)
	if !strings.HasPrefix(re.ID, "re_") || re.Object != "refund" || re.Amount != 500 || re.Status != "succeeded" ||
		re.PaymentIntent != pi.ID || re.Charge != *pi.LatestCharge || re.Currency != "usd" || re.Metadata["connhost_execution_id"] != "exec-r1" {
		t.Fatalf("refund %+v", re)
	}

	failures := []struct {
		name      string
		form      string
		wantParam string
		wantCode  string
	}{
		{"more than is left", "payment_intent=" + pi.ID + "&amount=1501", "amount", "amount_too_large"},
		{"not charged", "payment_intent=" + unpaid.ID, "payment_intent", "payment_intent_unexpected_state"},
		{"unknown payment intent", "payment_intent=pi_missing", "payment_intent", "resource_missing"},
		{"unknown charge", "charge=ch_missing", "charge", "resource_missing"},
		{"no reference", "amount=100", "payment_intent", "parameter_missing"},
		{"zero amount", "payment_intent=" + pi.ID + "&amount=0", "amount", ""},
		{"bad reason", "payment_intent=" + pi.ID + "&reason=because", "reason", ""},
		{"unknown parameter", "payment_intent=" + pi.ID + "&foo=bar", "foo", "parameter_unknown"},
	}
	for _, c := range failures {
		t.Run(c.name, func(t *testing.T) {
			r := refund(c.form)
			if r.status != 400 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			if got := r.errObj(t); got.Type != "invalid_request_error" || got.Param != c.wantParam || got.Code != c.wantCode {
				t.Fatalf("error %+v, want param %q code %q", got, c.wantParam, c.wantCode)
			}
		})
	}

	// The rest (1500) by charge id, then nothing is left.
	if r := refund("charge=" + *pi.LatestCharge); r.status != 200 {
		t.Fatalf("refund the rest: %d %s", r.status, r.body)
	}
	r = refund("payment_intent=" + pi.ID + "&amount=1")
	if got := r.errObj(t); r.status != 400 || got.Code != "charge_already_refunded" {
		t.Fatalf("refund of a refunded charge: %d %+v", r.status, got)
	}

	// List (newest first, filtered) and retrieve.
	other := e.do(req{path: "/v1/payment_intents", form: createPI("exec-o")}).pi(t)
	if r := refund("payment_intent=" + other.ID); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	list := func(q string) []stripe.Refund {
		r := e.do(req{method: "GET", path: "/v1/refunds", form: q})
		var l stripe.List[stripe.Refund]
		if err := json.Unmarshal(r.body, &l); err != nil || r.status != 200 || l.URL != "/v1/refunds" {
			t.Fatalf("list: %d %s", r.status, r.body)
		}
		return l.Data
	}
	if all := list(""); len(all) != 3 || all[0].PaymentIntent != other.ID {
		t.Fatalf("all refunds %+v", all)
	}
	mine := list("payment_intent=" + pi.ID)
	if len(mine) != 2 || mine[0].Amount != 1500 || mine[1].Amount != 500 {
		t.Fatalf("refunds of %s: %+v", pi.ID, mine)
	}
	if r := e.do(req{method: "GET", path: "/v1/refunds/" + re.ID}); r.status != 200 || !strings.Contains(string(r.body), re.ID) {
		t.Fatalf("retrieve: %d %s", r.status, r.body)
	}
	if st := e.srv.Stats(); st.Refunds != 3 {
		t.Fatalf("stats %+v", st)
	}
}
