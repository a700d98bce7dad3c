package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeStripe is a test double of the Stripe API subset the connector uses,
// following Stripe's documented semantics: form-encoded requests, bearer
// auth, idempotency keys that replay the first response
// (Idempotent-Replayed: true) and reject reuse with other parameters
// (idempotency_error), a search index that can lag behind writes, and a
// read-after-write consistent refund list.
type fakeStripe struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	n        int
	pis      map[string]map[string]any
	piOrder  []string
	refunds  []map[string]any
	idem     map[string]idemEntry
	indexed  map[string]bool // PaymentIntents visible to search
	lagging  bool            // new PaymentIntents are not searchable yet
	fault    func(w http.ResponseWriter, r *http.Request) bool
	calls    map[string]int // "METHOD path" -> count
	afterAct func()         // runs after a POST took effect, before answering
}

type idemEntry struct {
	fingerprint string
	status      int
	body        []byte
}

const testAPIKey = "sk_test_connhost"

func newFakeStripe(t *testing.T) *fakeStripe {
	f := &fakeStripe{
		t:       t,
		pis:     map[string]map[string]any{},
		idem:    map[string]idemEntry{},
		indexed: map[string]bool{},
		calls:   map[string]int{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// host returns a test host configured for this fake.
func (f *fakeStripe) host() *testHost {
	return newTestHost(f.srv.URL, map[string]string{"base_url": f.srv.URL, "api_key": testAPIKey})
}

func (f *fakeStripe) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

func (f *fakeStripe) numPaymentIntents() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pis)
}

func (f *fakeStripe) numRefunds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.refunds)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_test")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func stripeErr(typ, code, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"type": typ, "code": code, "message": msg}}
}

var piPath = regexp.MustCompile(`^/v1/payment_intents/(pi_[A-Za-z0-9_]+)$`)

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls[r.Method+" "+r.URL.Path]++
	fault := f.fault
	f.mu.Unlock()
	if fault != nil && fault(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
		writeJSON(w, 401, stripeErr("invalid_request_error", "", "Invalid API Key provided"))
		return
	}
	if r.Header.Get("Stripe-Version") == "" {
		writeJSON(w, 400, stripeErr("invalid_request_error", "", "no Stripe-Version"))
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/payment_intents":
		f.idempotent(w, r, f.createPI)
	case r.Method == "POST" && r.URL.Path == "/v1/refunds":
		f.idempotent(w, r, f.createRefund)
	case r.Method == "GET" && r.URL.Path == "/v1/payment_intents/search":
		f.search(w, r)
	case r.Method == "GET" && r.URL.Path == "/v1/refunds":
		f.listRefunds(w, r)
	case r.Method == "GET" && piPath.MatchString(r.URL.Path):
		id := piPath.FindStringSubmatch(r.URL.Path)[1]
		f.mu.Lock()
		pi, ok := f.pis[id]
		f.mu.Unlock()
		if !ok {
			writeJSON(w, 404, stripeErr("invalid_request_error", "resource_missing", "No such payment_intent: '"+id+"'"))
			return
		}
		writeJSON(w, 200, pi)
	default:
		writeJSON(w, 404, stripeErr("invalid_request_error", "", "Unrecognized request URL"))
	}
}

// idempotent wraps a POST handler with Stripe's idempotency layer.
func (f *fakeStripe) idempotent(w http.ResponseWriter, r *http.Request, act func(url.Values) (int, any)) {
	if err := r.ParseForm(); err != nil {
		writeJSON(w, 400, stripeErr("invalid_request_error", "", "bad form"))
		return
	}
	if r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		writeJSON(w, 400, stripeErr("invalid_request_error", "", "not form encoded"))
		return
	}
	key := r.Header.Get("Idempotency-Key")
	fp := r.URL.Path + "?" + r.PostForm.Encode()
	f.mu.Lock()
	if e, ok := f.idem[key]; ok && key != "" {
		f.mu.Unlock()
		if e.fingerprint != fp {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"type": "idempotency_error",
				"message": "Keys for idempotent requests can only be used with the same parameters they were first used with."}})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(e.status)
		_, _ = w.Write(e.body)
		return
	}
	status, v := act(r.PostForm)
	body, _ := json.Marshal(v)
	if key != "" {
		f.idem[key] = idemEntry{fp, status, body}
	}
	after := f.afterAct
	f.mu.Unlock()
	if after != nil {
		after()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func metadataOf(form url.Values) map[string]string {
	md := map[string]string{}
	for k, vs := range form {
		if strings.HasPrefix(k, "metadata[") && strings.HasSuffix(k, "]") {
			md[k[len("metadata["):len(k)-1]] = vs[0]
		}
	}
	return md
}

// createPI runs with f.mu held.
func (f *fakeStripe) createPI(form url.Values) (int, any) {
	amount, err := strconv.ParseInt(form.Get("amount"), 10, 64)
	if err != nil || amount <= 0 {
		return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "parameter_missing",
			"param": "amount", "message": "Missing required param: amount."}}
	}
	if cur := form.Get("currency"); len(cur) != 3 || cur == "zzz" {
		return 400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "code": "parameter_invalid_string",
			"param": "currency", "message": "Invalid currency: " + cur}}
	}
	f.n++
	id := fmt.Sprintf("pi_test%04d", f.n)
	pi := map[string]any{
		"id": id, "object": "payment_intent", "amount": amount, "currency": form.Get("currency"),
		"status": "succeeded", "amount_received": amount, "created": 1700000000 + f.n,
		"metadata": metadataOf(form), "payment_method": form.Get("payment_method"),
		"description": nil,
	}
	if d := form.Get("description"); d != "" {
		pi["description"] = d
	}
	f.pis[id] = pi
	f.piOrder = append(f.piOrder, id)
	if !f.lagging {
		f.indexed[id] = true
	}
	if form.Get("payment_method") == "pm_card_chargeDeclined" {
		pi["status"] = "requires_payment_method"
		pi["amount_received"] = 0
		return 402, map[string]any{"error": map[string]any{"type": "card_error", "code": "card_declined",
			"decline_code": "generic_decline", "message": "Your card was declined.",
			"payment_intent": map[string]any{"id": id, "status": "requires_payment_method"}}}
	}
	return 200, pi
}

// createRefund runs with f.mu held.
func (f *fakeStripe) createRefund(form url.Values) (int, any) {
	pi, ok := f.pis[form.Get("payment_intent")]
	if !ok {
		return 404, stripeErr("invalid_request_error", "resource_missing", "No such payment_intent")
	}
	amount := pi["amount"].(int64)
	if a := form.Get("amount"); a != "" {
		amount, _ = strconv.ParseInt(a, 10, 64)
	}
	f.n++
	r := map[string]any{
		"id": fmt.Sprintf("re_test%04d", f.n), "object": "refund", "amount": amount,
		"currency": pi["currency"], "status": "succeeded", "payment_intent": pi["id"],
		"metadata": metadataOf(form),
	}
	f.refunds = append(f.refunds, r)
	return 200, r
}

var searchQuery = regexp.MustCompile(`^metadata\['([a-z_]+)'\]:'((?:[^'\\]|\\.)*)'$`)

func (f *fakeStripe) search(w http.ResponseWriter, r *http.Request) {
	m := searchQuery.FindStringSubmatch(r.URL.Query().Get("query"))
	if m == nil {
		writeJSON(w, 400, stripeErr("invalid_request_error", "", "bad query "+r.URL.Query().Get("query")))
		return
	}
	value := strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[2])
	f.mu.Lock()
	var data []any
	for _, id := range f.piOrder {
		pi := f.pis[id]
		if f.indexed[id] && pi["metadata"].(map[string]string)[m[1]] == value {
			data = append(data, pi)
		}
	}
	f.mu.Unlock()
	if data == nil {
		data = []any{}
	}
	writeJSON(w, 200, map[string]any{"object": "search_result", "url": "/v1/payment_intents/search",
		"has_more": false, "data": data})
}

func (f *fakeStripe) listRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 10
	}
	f.mu.Lock()
	var all []map[string]any
	for _, re := range f.refunds {
		if re["payment_intent"] == q.Get("payment_intent") {
			all = append(all, re)
		}
	}
	f.mu.Unlock()
	// Newest first, as Stripe lists.
	sort.SliceStable(all, func(i, j int) bool { return all[i]["id"].(string) > all[j]["id"].(string) })
	start := 0
	if after := q.Get("starting_after"); after != "" {
		for i, re := range all {
			if re["id"] == after {
				start = i + 1
			}
		}
	}
	end := min(start+limit, len(all))
	data := []map[string]any{}
	if start < len(all) {
		data = all[start:end]
	}
	writeJSON(w, 200, map[string]any{"object": "list", "url": "/v1/refunds", "has_more": end < len(all), "data": data})
}
