package main

import (
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// refund is the subset of Stripe's Refund the connector reads.
type refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Status        string            `json:"status"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	PaymentIntent string            `json:"payment_intent"`
	Metadata      map[string]string `json:"metadata"`
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

// refundArgs are refund_payment's arguments.
type refundArgs struct {
	PaymentIntent string `json:"payment_intent"`
	// Amount is optional: without it Stripe refunds what remains.
	Amount *int64 `json:"amount"`
	Reason string `json:"reason"`
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
	if err := guest.DecodeArgs(args, &a); err != nil {
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
	form := url.Values{}
	form.Set("payment_intent", a.PaymentIntent)
	if a.Amount != nil {
		form.Set("amount", itoa(*a.Amount))
	}
	if a.Reason != "" {
		form.Set("reason", a.Reason)
	}
	setMetadata(c, form)

	resp := s.send("POST", "/v1/refunds", nil, form, c.Key)
	if f, ok := check(resp, true); !ok {
		return executeFailure(c, f)
	}
	var r refund
	if err := json.Unmarshal(resp.Body, &r); err != nil || r.ID == "" || (r.Object != "" && r.Object != "refund") {
		return guest.Uncertain("refund_payment: unreadable 2xx response from Stripe (%d bytes)", len(resp.Body))
	}
	noteReplay(c, resp, r.ID)
	return guest.OK(r.result(), r.ID)
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
	if err := guest.DecodeArgs(args, &a); err != nil {
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
	q := url.Values{}
	q.Set("payment_intent", a.PaymentIntent)
	q.Set("limit", "100")
	seen := 0
	for page := 0; page < maxRefundPages; page++ {
		resp := s.send("GET", "/v1/refunds", q, nil, "")
		if f, ok := check(resp, false); !ok {
			return guest.Unknown("refund_payment reconcile: %s", f.msg)
		}
		var list struct {
			Object  string   `json:"object"`
			Data    []refund `json:"data"`
			HasMore *bool    `json:"has_more"`
		}
		if err := json.Unmarshal(resp.Body, &list); err != nil || list.HasMore == nil {
			return guest.Unknown("refund_payment reconcile: unreadable refund list (%d bytes)", len(resp.Body))
		}
		seen += len(list.Data)
		for _, r := range list.Data {
			if r.ID != "" && r.Metadata[metaKey] == c.Key {
				return guest.Applied(r.result(), r.ID)
			}
		}
		if !*list.HasMore {
			return guest.NotApplied("refund_payment reconcile: none of the %d refunds of %s carries this key",
				seen, a.PaymentIntent)
		}
		if len(list.Data) == 0 {
			return guest.Unknown("refund_payment reconcile: Stripe reported more refunds after an empty page")
		}
		q.Set("starting_after", list.Data[len(list.Data)-1].ID)
	}
	return guest.Unknown("refund_payment reconcile: %s has more than %d refunds; not searched further",
		a.PaymentIntent, maxRefundPages*100)
}
