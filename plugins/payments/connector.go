package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
)

// The operations and the entry points each implements. The manifest
// (manifests/payments.toml) declares the recovery policy of each one; the
// host refuses the module when a declared policy lacks its entry point.
//
//	create_payment  execute_with_key + reconcile   declared idempotent-retry
//	refund_payment  execute_with_key + reconcile   declared reconcile
//	get_payment     execute                        read
func init() {
	guest.Register(
		guest.Operation{Name: "create_payment", ExecuteWithKey: createPayment, Reconcile: reconcileCreatePayment},
		guest.Operation{Name: "refund_payment", ExecuteWithKey: refundPayment, Reconcile: reconcileRefund},
		guest.Operation{Name: "get_payment", Execute: getPayment},
	)
}

// paymentIntent is the subset of Stripe's PaymentIntent the connector reads.
type paymentIntent struct {
	ID             string
	Object         string
	Status         string
	Amount         int64
	AmountReceived int64
	Currency       string
	Description    *string
	Created        int64
	Metadata       map[string]string
}

// member reads the fields the connector uses and skips the rest.
func (pi *paymentIntent) member(name string, v *codec.Value) error {
	switch name {
	case "id":
		return v.String(&pi.ID)
	case "object":
		return v.String(&pi.Object)
	case "status":
		return v.String(&pi.Status)
	case "amount":
		return v.Int64(&pi.Amount)
	case "amount_received":
		return v.Int64(&pi.AmountReceived)
	case "currency":
		return v.String(&pi.Currency)
	case "description":
		return v.OptString(&pi.Description)
	case "created":
		return v.Int64(&pi.Created)
	case "metadata":
		return v.StringMap(&pi.Metadata)
	}
	return nil
}

func decodePaymentIntent(b []byte) (paymentIntent, error) {
	var pi paymentIntent
	if err := codec.DecodeObject(b, pi.member); err != nil {
		return pi, err
	}
	if pi.ID == "" || (pi.Object != "" && pi.Object != "payment_intent") {
		return pi, fmt.Errorf("not a payment_intent object (object %q, id %q)", pi.Object, pi.ID)
	}
	return pi, nil
}

// paymentResult is the result of create_payment (and of its reconcile).
type paymentResult struct {
	PaymentIntent string `json:"payment_intent"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
}

// resultOf is the result create_payment reports for pi.
func resultOf(pi paymentIntent) paymentResult {
	return paymentResult{PaymentIntent: pi.ID, Status: pi.Status, Amount: pi.Amount, Currency: pi.Currency}
}

// json returns r as encoding/json marshals it.
func (r paymentResult) json() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("payment_intent", r.PaymentIntent)
		o.String("status", r.Status)
		o.Int("amount", r.Amount)
		o.String("currency", r.Currency)
	})
}

// noteReplay logs, at info level, that Stripe answered from its
// idempotency cache (Idempotent-Replayed: true): an earlier attempt of
// this execution already did the work. It is not part of the result: a
// result says what happened at Stripe, not how this attempt learnt it, so
// an outcome re-derived after a crash is the one the caller was given.
func noteReplay(c *guest.Call, resp abi.HTTPResponse, object string) {
	if resp.Get("Idempotent-Replayed") == "true" {
		c.Info(c.Operation + ": Stripe replayed the saved answer of an earlier attempt (Idempotent-Replayed): " + object)
	}
}

// createArgs are create_payment's arguments.
type createArgs struct {
	Amount        *int64
	Currency      string
	PaymentMethod string
	Description   string
	CustomerEmail string
}

// member reads one argument; any other name is refused as unknown.
func (a *createArgs) member(name string, v *codec.Value) error {
	switch name {
	case "amount":
		return v.OptInt64(&a.Amount)
	case "currency":
		return v.String(&a.Currency)
	case "payment_method":
		return v.String(&a.PaymentMethod)
	case "description":
		return v.String(&a.Description)
	case "customer_email":
		return v.String(&a.CustomerEmail)
	}
	return nil
}

func (a *createArgs) validate() error {
	var bad []string
	if a.Amount == nil || *a.Amount <= 0 || *a.Amount > 99999999 {
		bad = append(bad, "amount must be an integer between 1 and 99999999 (smallest currency unit)")
	}
	if len(a.Currency) != 3 || strings.IndexFunc(a.Currency, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		bad = append(bad, "currency must be a 3-letter ISO code")
	}
	a.Currency = strings.ToLower(a.Currency)
	if !validID(a.PaymentMethod, "pm_") {
		bad = append(bad, "payment_method must be a PaymentMethod id (pm_…)")
	}
	if len(a.Description) > 1000 {
		bad = append(bad, "description is longer than 1000 bytes")
	}
	if a.CustomerEmail != "" && (len(a.CustomerEmail) > 512 || !strings.Contains(a.CustomerEmail, "@") ||
		strings.ContainsAny(a.CustomerEmail, " \r\n<>,")) {
		bad = append(bad, "customer_email is not an email address")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// createPayment creates and confirms a PaymentIntent.
//
// It is declared idempotent-retry: every attempt of one execution sends the
// same parameters with Idempotency-Key = the host's key, so Stripe creates
// at most one PaymentIntent and replays the first answer to later attempts.
// Timeouts, network errors and 5xx — which may hide an applied request —
// are Uncertain: the host re-dispatches with the same key, which cannot
// charge twice while Stripe still holds it (at least 24 hours), and never
// reports the call failed. A 409 idempotency_key_in_use is InProgress.
func createPayment(c *guest.Call, args []byte) abi.Outcome {
	var a createArgs
	if err := guest.ReadArgs(args, a.member); err != nil {
		return guest.Permanent("create_payment: invalid arguments: %v", err)
	}
	if err := a.validate(); err != nil {
		return guest.Permanent("create_payment: invalid arguments: %v", err)
	}
	if err := checkKey(c.Key); err != nil {
		return guest.Permanent("create_payment: %v", err)
	}
	s, err := newStripe(c)
	if err != nil {
		return guest.Permanent("create_payment: %v", err)
	}
	// Fields in sorted order, so the body is byte for byte what
	// url.Values.Encode wrote for earlier versions of the connector. A
	// card-only, confirm-now PaymentIntent: with automatic payment methods
	// Stripe would demand a return_url for redirect-based methods.
	var form codec.Form
	form.Add("amount", itoa(*a.Amount))
	form.Add("confirm", "true")
	form.Add("currency", a.Currency)
	if a.Description != "" {
		form.Add("description", a.Description)
	}
	addMetadata(c, &form)
	form.Add("payment_method", a.PaymentMethod)
	form.Add("payment_method_types[]", "card")
	if a.CustomerEmail != "" {
		form.Add("receipt_email", a.CustomerEmail)
	}

	resp := s.send("POST", "/v1/payment_intents", "", form.Bytes(), c.Key)
	if f, ok := check(resp, true); !ok {
		return executeFailure(c, f)
	}
	pi, err := decodePaymentIntent(resp.Body)
	if err != nil {
		// A 2xx we cannot read may well be a created PaymentIntent; the
		// retry with the same key gets the saved response back.
		return guest.Uncertain("create_payment: unreadable 2xx response from Stripe (%d bytes): %v", len(resp.Body), err)
	}
	noteReplay(c, resp, pi.ID)
	return guest.OK(resultOf(pi).json(), pi.ID)
}

// addMetadata writes the execution identity into the object's metadata, so
// reconcile (and a human) can find what this execution created. The two
// fields sort between "description" and "payment_intent".
func addMetadata(c *guest.Call, form *codec.Form) {
	if id := c.ExecutionID(); id != "" {
		form.Add("metadata["+metaExecution+"]", id)
	}
	form.Add("metadata["+metaKey+"]", c.Key)
}

// reconcileCreatePayment looks for a PaymentIntent carrying this
// execution's key with the Search API. Search is not read-after-write
// consistent (usually under a minute, up to an hour behind during
// incidents), so finding nothing is Unknown, never NotApplied. A hit is
// re-read with the (consistent) retrieve API: a charged, processing or
// authorised intent is Applied; one that holds no charge (declined card:
// requires_payment_method, or canceled) is NotApplied. The manifest
// declares create_payment idempotent-retry, so the host does not need this;
// it is here for operators and for hosts that reconcile before re-driving.
func reconcileCreatePayment(c *guest.Call, args []byte) abi.Outcome {
	if err := checkKey(c.Key); err != nil {
		return guest.Unknown("create_payment reconcile: %v", err)
	}
	s, err := newStripe(c)
	if err != nil {
		return guest.Unknown("create_payment reconcile: %v", err)
	}
	var q codec.Form
	q.Add("limit", "10")
	q.Add("query", "metadata['"+metaKey+"']:"+searchString(c.Key))
	resp := s.send("GET", "/v1/payment_intents/search", q.String(), nil, "")
	if f, ok := check(resp, false); !ok {
		return guest.Unknown("create_payment reconcile: %s", f.msg)
	}
	var data []paymentIntent
	err = codec.DecodeObject(resp.Body, func(name string, v *codec.Value) error {
		if name != "data" {
			return nil
		}
		data = data[:0]
		return v.Array(func(e *codec.Value) error {
			data = append(data, paymentIntent{})
			return e.Object(data[len(data)-1].member)
		})
	})
	if err != nil {
		return guest.Unknown("create_payment reconcile: unreadable search response: %v", err)
	}
	var hits []paymentIntent
	for _, pi := range data {
		// Compare exactly: never trust the query alone to have matched.
		if pi.ID != "" && pi.Metadata[metaKey] == c.Key {
			hits = append(hits, pi)
		}
	}
	if len(hits) == 0 {
		return guest.Unknown("create_payment reconcile: no PaymentIntent with this key in search results; " +
			"Stripe search lags writes (up to an hour), so this is not evidence that nothing was created")
	}
	if len(hits) > 1 {
		ids := make([]string, len(hits))
		for i, pi := range hits {
			ids[i] = pi.ID
		}
		c.Error("create_payment reconcile: several PaymentIntents carry one idempotency key: " + strings.Join(ids, ", "))
	}
	pi := hits[0]
	// Search results may be stale; the retrieve API is consistent.
	fresh := false
	if resp := s.send("GET", "/v1/payment_intents/"+url.PathEscape(pi.ID), "", nil, ""); resp.Err == abi.HTTPOK && resp.Status == 200 {
		if p, err := decodePaymentIntent(resp.Body); err == nil && p.ID == pi.ID {
			pi, fresh = p, true
		}
	}
	switch pi.Status {
	case "requires_payment_method", "canceled":
		// The intent exists but holds no charge: the card was declined
		// (or the intent abandoned). Re-dispatching with the same key
		// gets Stripe's saved answer back, so it cannot charge twice.
		if !fresh {
			return guest.Unknown("create_payment reconcile: %s is %s in search results, which may be stale, and retrieving it failed",
				pi.ID, pi.Status)
		}
		return guest.NotApplied("create_payment reconcile: %s carries this key but holds no charge (status %s)", pi.ID, pi.Status)
	}
	return guest.Applied(resultOf(pi).json(), pi.ID)
}

// paymentView is get_payment's result: what the model may see of a
// PaymentIntent (no metadata: it carries connhost's keys).
type paymentView struct {
	ID             string  `json:"id"`
	Status         string  `json:"status"`
	Amount         int64   `json:"amount"`
	AmountReceived int64   `json:"amount_received"`
	Currency       string  `json:"currency"`
	Description    *string `json:"description"`
	Created        int64   `json:"created"`
}

// json returns p as encoding/json marshals it.
func (p paymentView) json() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("id", p.ID)
		o.String("status", p.Status)
		o.Int("amount", p.Amount)
		o.Int("amount_received", p.AmountReceived)
		o.String("currency", p.Currency)
		o.OptString("description", p.Description)
		o.Int("created", p.Created)
	})
}

// getPayment retrieves one PaymentIntent. It is a read: GET is idempotent,
// so network errors are simply retryable.
func getPayment(c *guest.Call, args []byte) abi.Outcome {
	var id string
	err := guest.ReadArgs(args, func(name string, v *codec.Value) error {
		if name == "payment_intent" {
			return v.String(&id)
		}
		return nil
	})
	if err != nil {
		return guest.Permanent("get_payment: invalid arguments: %v", err)
	}
	if !validID(id, "pi_") {
		return guest.Permanent("get_payment: invalid arguments: payment_intent must be a PaymentIntent id (pi_…)")
	}
	s, err := newStripe(c)
	if err != nil {
		return guest.Permanent("get_payment: %v", err)
	}
	resp := s.send("GET", "/v1/payment_intents/"+url.PathEscape(id), "", nil, "")
	if f, ok := check(resp, false); !ok {
		return executeFailure(c, f)
	}
	pi, err := decodePaymentIntent(resp.Body)
	if err != nil {
		return guest.Permanent("get_payment: unreadable response from Stripe (%d bytes): %v", len(resp.Body), err)
	}
	return guest.OK(paymentView{
		ID:             pi.ID,
		Status:         pi.Status,
		Amount:         pi.Amount,
		AmountReceived: pi.AmountReceived,
		Currency:       pi.Currency,
		Description:    pi.Description,
		Created:        pi.Created,
	}.json(), pi.ID)
}
