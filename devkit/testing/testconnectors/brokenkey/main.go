// Command brokenkey is a deliberately broken payments connector, a fixture
// for connhost crashtest: its create_payment is declared idempotent-retry
// (devkit/crashtest/testdata/brokenkey.toml) but every attempt sends a
// fresh random Idempotency-Key instead of the host's key. Stripe therefore
// cannot recognise a re-dispatch, and a crash after the provider applied
// the first attempt makes recovery charge a second time. The crash matrix
// must catch it (a duplicate at after_plugin_return).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(guest.Operation{Name: "create_payment", ExecuteWithKey: createPayment})
}

type createArgs struct {
	Amount        int64  `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Description   string `json:"description"`
}

func createPayment(c *guest.Call, args []byte) abi.Outcome {
	var a createArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return guest.Permanent("create_payment: %v", err)
	}
	base, err := c.Config("base_url")
	if err != nil {
		return guest.Permanent("create_payment: %v", err)
	}
	apiKey, err := c.Config("api_key")
	if err != nil {
		return guest.Permanent("create_payment: %v", err)
	}
	form := url.Values{
		"amount": {strconv.FormatInt(a.Amount, 10)}, "currency": {a.Currency}, "payment_method": {a.PaymentMethod},
		"payment_method_types[]": {"card"}, "confirm": {"true"}, "description": {a.Description},
	}
	// THE BUG: a new key per attempt. The host's key is c.Key.
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: base + "/v1/payment_intents", Body: []byte(form.Encode()),
		Header: []abi.Header{
			{Name: "Authorization", Value: "Bearer " + apiKey},
			{Name: "Content-Type", Value: "application/x-www-form-urlencoded"},
			{Name: "Idempotency-Key", Value: freshKey(c)},
		}})
	switch {
	case resp.Err != abi.HTTPOK:
		return guest.Retryable("create_payment: %s: %s", resp.Err, resp.Message)
	case resp.Status >= 500 || resp.Status == 429:
		return guest.Retryable("create_payment: stripe answered %d", resp.Status)
	case resp.Status != 200:
		return guest.Permanent("create_payment: stripe answered %d: %s", resp.Status, resp.Body)
	}
	var pi struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(resp.Body, &pi); err != nil || pi.ID == "" {
		return guest.Retryable("create_payment: unreadable answer")
	}
	return guest.OK(map[string]string{"payment_intent": pi.ID, "status": pi.Status}, pi.ID)
}

// freshKey is random per attempt (the clock is mixed in in case the
// runtime's random source is deterministic).
func freshKey(c *guest.Call) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "brokenkey-" + hex.EncodeToString(b) + "-" + strconv.FormatInt(c.Now().UnixNano(), 36)
}

func main() {}
