// Package connector is the webhook connector's code: it delivers events to
// a webhook receiver service that deduplicates deliveries by
// Idempotency-Key and lets a delivery be looked up by its key.
//
// The connector's module is plugins/webhook (package main, an empty main
// that registers Honest). broken/keyignored and broken/notapplied register
// the two ways of breaking the declared policies that only a crash
// reveals, broken/bytopic a reconcile that names another call's delivery
// and broken/argkey a key taken from the arguments, which only two calls
// with equal arguments reveal; connhost crashtest must catch all four.
// broken/bodykey sends its key in a body field, for the proof of a [provider]
// claim (honest when the manifest names that field).
package connector

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// Variant says which connector a module is.
type Variant int

// Variants.
const (
	// Honest sends the host's key as Idempotency-Key, and reconcile looks
	// the key up.
	Honest Variant = iota
	// KeyIgnored sends a fresh random key on every attempt: the provider
	// cannot tell a retry from a new delivery.
	KeyIgnored
	// AlwaysNotApplied answers reconcile "not applied" without looking.
	AlwaysNotApplied
	// ByTopic reconciles by the event's topic, which many deliveries
	// share, and answers the first delivery of that topic: another
	// call's, which exists.
	ByTopic
	// KeyFromArgs sends a key derived from the arguments instead of the
	// host's: every retry of a call carries it, but so does another call
	// with equal arguments, which the receiver then takes for a retry.
	KeyFromArgs
	// BodyKey sends the host's key as the delivery's event_id, which the
	// receiver deduplicates by, and in a header X-Event-Id, which it
	// ignores: a manifest may claim either.
	BodyKey
)

// Register registers the operations of variant v.
func Register(v Variant) {
	c := conn{v: v}
	guest.Register(
		guest.Operation{Name: "deliver", ExecuteWithKey: c.deliver, Reconcile: c.reconcileDeliver},
		guest.Operation{Name: "get_delivery", Execute: c.getDelivery},
	)
}

type conn struct{ v Variant }

// Delivery is what the receiver answers about a delivery.
type Delivery struct {
	ID      string          `json:"id"`
	Topic   string          `json:"topic"`
	Payload json.RawMessage `json:"payload"`
}

const defaultBaseURL = "https://hooks.example.com"

func baseURL(c *guest.Call) string {
	if v, err := c.Config("base_url"); err == nil && v != "" {
		return strings.TrimSuffix(v, "/")
	}
	return defaultBaseURL
}

func (k conn) deliver(c *guest.Call, args []byte) abi.Outcome {
	var in struct {
		Topic   string          `json:"topic"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := guest.DecodeArgs(args, &in); err != nil {
		return guest.Permanent("deliver: bad arguments: %v", err)
	}
	key := c.Key
	switch k.v {
	case KeyIgnored:
		var b [8]byte
		_, _ = rand.Read(b[:])
		key = hex.EncodeToString(b[:])
	case KeyFromArgs:
		sum := sha256.Sum256(args)
		key = hex.EncodeToString(sum[:16])
	}
	body, _ := json.Marshal(in)
	header := []abi.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "Idempotency-Key", Value: key}}
	if k.v == BodyKey {
		body, _ = json.Marshal(struct {
			Topic   string          `json:"topic"`
			Payload json.RawMessage `json:"payload"`
			EventID string          `json:"event_id"`
		}{in.Topic, in.Payload, key})
		header = []abi.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Event-Id", Value: key}}
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: baseURL(c) + "/v1/deliveries", Header: header, Body: body})
	switch {
	case resp.Err == abi.HTTPDenied:
		return guest.Permanent("deliver: %s", resp.Message)
	case resp.Err != abi.HTTPOK:
		return guest.Uncertain("deliver: %s: %s", resp.Err, resp.Message)
	case resp.Status == 409:
		return guest.InProgress("deliver: the receiver is still processing key %s", key)
	case resp.Status == 429:
		return guest.Retryable("deliver: rate limited")
	case resp.Status >= 500:
		return guest.Uncertain("deliver: receiver error %d", resp.Status)
	case resp.Status != 200 && resp.Status != 201:
		return guest.Permanent("deliver: status %d: %s", resp.Status, resp.Body)
	}
	var d Delivery
	if err := json.Unmarshal(resp.Body, &d); err != nil || d.ID == "" {
		return guest.Uncertain("deliver: unreadable answer")
	}
	return guest.OK(d, d.ID)
}

// reconcileDeliver looks the delivery up by the call's key: found ->
// applied; the receiver says none carries it -> not applied; anything
// else -> unknown.
func (k conn) reconcileDeliver(c *guest.Call, args []byte) abi.Outcome {
	if k.v == AlwaysNotApplied {
		return guest.NotApplied("deliver: not looked up")
	}
	lookup := baseURL(c) + "/v1/deliveries?idempotency_key=" + url.QueryEscape(c.Key)
	if k.v == ByTopic {
		lookup = baseURL(c) + "/v1/deliveries"
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: lookup})
	if resp.Err != abi.HTTPOK || resp.Status != 200 {
		return guest.Unknown("deliver: lookup: %s %s (status %d)", resp.Err, resp.Message, resp.Status)
	}
	var list struct {
		Data []Delivery `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &list); err != nil || list.Data == nil {
		return guest.Unknown("deliver: lookup: unreadable answer")
	}
	if k.v == ByTopic {
		var in struct {
			Topic string `json:"topic"`
		}
		_ = json.Unmarshal(args, &in)
		list.Data = slices.DeleteFunc(list.Data, func(d Delivery) bool { return d.Topic != in.Topic })
	}
	if len(list.Data) == 0 {
		return guest.NotApplied("deliver: no delivery carries key %s", c.Key)
	}
	return guest.Applied(list.Data[0], list.Data[0].ID)
}

func (k conn) getDelivery(c *guest.Call, args []byte) abi.Outcome {
	var in struct {
		ID string `json:"id"`
	}
	if err := guest.DecodeArgs(args, &in); err != nil {
		return guest.Permanent("get_delivery: bad arguments: %v", err)
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: baseURL(c) + "/v1/deliveries/" + url.PathEscape(in.ID)})
	switch {
	case resp.Err == abi.HTTPDenied:
		return guest.Permanent("get_delivery: %s", resp.Message)
	case resp.Err != abi.HTTPOK:
		return guest.Retryable("get_delivery: %s: %s", resp.Err, resp.Message)
	case resp.Status == 404:
		return guest.Permanent("get_delivery: no delivery %s", in.ID)
	case resp.Status != 200:
		return guest.Retryable("get_delivery: status %d", resp.Status)
	}
	var d Delivery
	if err := json.Unmarshal(resp.Body, &d); err != nil {
		return guest.Retryable("get_delivery: unreadable answer")
	}
	return guest.OK(d, d.ID)
}
