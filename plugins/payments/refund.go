package main

import (
	"fmt"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
)

// refund is the subset of Stripe's Refund the connector reads.
type refund struct {
	ID            string
	Object        string
	Status        string
	Amount        int64
	Currency      string
	PaymentIntent string
	Metadata      map[string]string
}

// member reads the fields the connector uses and skips the rest.
func (r *refund) member(name string, v *codec.Value) error {
	switch name {
	case "id":
		return v.String(&r.ID)
	case "object":
		return v.String(&r.Object)
	case "status":
		return v.String(&r.Status)
	case "amount":
		return v.Int64(&r.Amount)
	case "currency":
		return v.String(&r.Currency)
	case "payment_intent":
		return v.String(&r.PaymentIntent)
	case "metadata":
		return v.StringMap(&r.Metadata)
	}
	return nil
}

// refundResult is the result of refund_payment (and of its reconcile).
type refundResult struct {
	Refund        string `json:"refund"`
	Status        string `json:"status"`
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentIntent string `json:"payment_intent"`
}

func (r refund) result() refundResult {
	return refundResult{Refund: r.ID, Status: r.Status, Amount: r.Amount, Currency: r.Currency,
		PaymentIntent: r.PaymentIntent}
}

// json returns r as encoding/json marshals it.
func (r refundResult) json() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("refund", r.Refund)
		o.String("status", r.Status)
		o.Int("amount", r.Amount)
		o.String("currency", r.Currency)
		o.String("payment_intent", r.PaymentIntent)
	})
}

// refundArgs are refund_payment's arguments.
type refundArgs struct {
	PaymentIntent string
	// Amount is optional: without it Stripe refunds what remains.
	Amount *int64
	Reason string
}

// member reads one argument; any other name is refused as unknown.
func (a *refundArgs) member(name string, v *codec.Value) error {
	switch name {
	case "payment_intent":
		return v.String(&a.PaymentIntent)
	case "amount":
		return v.OptInt64(&a.Amount)
	case "reason":
		return v.String(&a.Reason)
	}
	return nil
}

func (a *refundArgs) validate() error {
	if !validID(a.PaymentIntent, "pi_") {
		return fmt.Errorf("payment_intent must be a PaymentIntent id (pi_…)")
	}
	if a.Amount != nil && (*a.Amount <= 0 || *a.Amount > 99999999) {
		return fmt.Errorf("amount must be an integer between 1 and 99999999 (smallest currency unit)")
	}
	switch a.Reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return fmt.Errorf("reason must be duplicate, fraudulent or requested_by_customer")
	}
	return nil
}

// refundPayment creates a refund for a PaymentIntent, with the host's key as
// Idempotency-Key and in the refund's metadata.
//
// The manifest declares it reconcile: after a crash the host asks
// reconcileRefund, which lists the PaymentIntent's refunds (a
// read-after-write consistent API) instead of relying on Stripe still
// holding the idempotency key — which it guarantees for 24 hours only,
// while an uncertain refund may sit in recovery longer. Every attempt
// still sends the same key, so retries inside that window deduplicate too.
func refundPayment(c *guest.Call, args []byte) abi.Outcome {
	var a refundArgs
	if err := guest.ReadArgs(args, a.member); err != nil {
		return guest.Permanent("refund_payment: invalid arguments: %v", err)
	}
	if err := a.validate(); err != nil {
		return guest.Permanent("refund_payment: invalid arguments: %v", err)
	}
	if err := checkKey(c.Key); err != nil {
		return guest.Permanent("refund_payment: %v", err)
	}
	s, err := newStripe(c)
	if err != nil {
		return guest.Permanent("refund_payment: %v", err)
	}
	// Fields in sorted order, as url.Values.Encode wrote them for earlier
	// versions of the connector.
	var form codec.Form
	if a.Amount != nil {
		form.Add("amount", itoa(*a.Amount))
	}
	addMetadata(c, &form)
	form.Add("payment_intent", a.PaymentIntent)
	if a.Reason != "" {
		form.Add("reason", a.Reason)
	}

	resp := s.send("POST", "/v1/refunds", "", form.Bytes(), c.Key)
	if f, ok := check(resp, true); !ok {
		return executeFailure(c, f)
	}
	var r refund
	if err := codec.DecodeObject(resp.Body, r.member); err != nil || r.ID == "" || (r.Object != "" && r.Object != "refund") {
		return guest.Uncertain("refund_payment: unreadable 2xx response from Stripe (%d bytes)", len(resp.Body))
	}
	noteReplay(c, resp, r.ID)
	return guest.OK(r.result().json(), r.ID)
}

// maxRefundPages bounds the refund listing reconcile walks (100 a page).
const maxRefundPages = 10

// reconcileRefund decides whether an earlier refund_payment call took
// effect by listing the PaymentIntent's refunds — the list API reads its own
// writes, unlike search — and looking for one whose metadata carries this
// execution's key.
//
//   - found: Applied, receipt = refund id (whatever the refund's status:
//     the refund object exists, a second one must not be created);
//   - the whole list read and none found: NotApplied. The host then
//     re-dispatches with the same Idempotency-Key, so even a request that
//     was still in flight at Stripe during the listing is deduplicated;
//   - anything else (unreachable, 5xx, unreadable, too many refunds):
//     Unknown.
func reconcileRefund(c *guest.Call, args []byte) abi.Outcome {
	var a refundArgs
	if err := guest.ReadArgs(args, a.member); err != nil {
		return guest.Unknown("refund_payment reconcile: cannot read the recorded arguments: %v", err)
	}
	if err := a.validate(); err != nil {
		return guest.Unknown("refund_payment reconcile: recorded arguments are invalid: %v", err)
	}
	if err := checkKey(c.Key); err != nil {
		return guest.Unknown("refund_payment reconcile: %v", err)
	}
	s, err := newStripe(c)
	if err != nil {
		return guest.Unknown("refund_payment reconcile: %v", err)
	}
	seen, after := 0, ""
	for page := 0; page < maxRefundPages; page++ {
		// Fields in sorted order, as url.Values.Encode wrote them.
		var q codec.Form
		q.Add("limit", "100")
		q.Add("payment_intent", a.PaymentIntent)
		if after != "" {
			q.Add("starting_after", after)
		}
		resp := s.send("GET", "/v1/refunds", q.String(), nil, "")
		if f, ok := check(resp, false); !ok {
			return guest.Unknown("refund_payment reconcile: %s", f.msg)
		}
		var data []refund
		var hasMore *bool
		err := codec.DecodeObject(resp.Body, func(name string, v *codec.Value) error {
			switch name {
			case "data":
				data = data[:0]
				return v.Array(func(e *codec.Value) error {
					data = append(data, refund{})
					return e.Object(data[len(data)-1].member)
				})
			case "has_more":
				return v.OptBool(&hasMore)
			}
			return nil
		})
		if err != nil || hasMore == nil {
			return guest.Unknown("refund_payment reconcile: unreadable refund list (%d bytes)", len(resp.Body))
		}
		seen += len(data)
		for _, r := range data {
			if r.ID != "" && r.Metadata[metaKey] == c.Key {
				return guest.Applied(r.result().json(), r.ID)
			}
		}
		if !*hasMore {
			return guest.NotApplied("refund_payment reconcile: none of the %d refunds of %s carries this key",
				seen, a.PaymentIntent)
		}
		if len(data) == 0 {
			return guest.Unknown("refund_payment reconcile: Stripe reported more refunds after an empty page")
		}
		after = data[len(data)-1].ID
	}
	return guest.Unknown("refund_payment reconcile: %s has more than %d refunds; not searched further",
		a.PaymentIntent, maxRefundPages*100)
}
