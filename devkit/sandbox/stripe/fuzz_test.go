package stripe

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The search parser reads untrusted query strings: it must never panic,
// and whatever it accepts must evaluate.
func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{
		"metadata['connhost_execution_id']:'exec-1'",
		`metadata["k"]:"v" AND amount>=100`,
		"status:'succeeded' OR -currency:'usd'",
		"amount<5", "created>1700000000", "metadata['k", `status:"a\"b"`, "a:b AND",
	} {
		f.Add(s)
	}
	pi := &PaymentIntent{Amount: 100, Currency: "usd", Status: "succeeded", Metadata: map[string]string{"k": "v"}}
	f.Fuzz(func(t *testing.T, q string) {
		sq, err := parseSearch(q)
		if err != nil {
			return
		}
		if len(sq.clauses) == 0 || len(sq.clauses) > 10 {
			t.Fatalf("accepted %d clauses", len(sq.clauses))
		}
		sq.match(pi)
	})
}

// Form bodies are untrusted: every body gets a Stripe answer (never a
// panic or a 5xx).
func FuzzCreatePaymentIntent(f *testing.F) {
	for _, s := range []string{
		"amount=2000&currency=usd&confirm=true&payment_method=pm_card_visa&metadata[a]=b",
		"amount=2000&currency=usd&payment_method_types[0]=card",
		"metadata[a][b]=c", "amount=%zz", "[]=x", "metadata=", "amount=-1&currency=usd",
	} {
		f.Add(s)
	}
	s := New(Options{Now: func() time.Time { return time.Unix(1700000000, 0) }})
	f.Fuzz(func(t *testing.T, body string) {
		r := httptest.NewRequest("POST", "/v1/payment_intents", strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer sk_test_fuzz")
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusPaymentRequired:
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, w.Body)
		}
	})
}
