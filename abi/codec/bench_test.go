package codec

import (
	"encoding/json"
	"strings"
	"testing"
)

// paymentIntent is a PaymentIntent as Stripe writes it (indented), 1.2 KB.
var paymentIntent = []byte(`{
  "id": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
  "object": "payment_intent",
  "amount": 2000,
  "amount_capturable": 0,
  "amount_received": 2000,
  "application": null,
  "capture_method": "automatic",
  "client_secret": "pi_3MtwBwLkdIwHu7ix28a3tqPa_secret_YrKJUKribcBjcG8HVhfZluoGH",
  "confirmation_method": "automatic",
  "created": 1680800504,
  "currency": "usd",
  "customer": null,
  "description": "order 42",
  "last_payment_error": null,
  "latest_charge": "ch_3MtwBwLkdIwHu7ix28a3tqPb",
  "livemode": false,
  "metadata": {
    "connhost_execution_id": "exec-0001",
    "connhost_key": "ck_7f3a9c01d2e4b5a6"
  },
  "next_action": null,
  "payment_method": "pm_1MtwBwLkdIwHu7ixGbd2aPBu",
  "payment_method_options": {
    "card": {
      "installments": null,
      "mandate_options": null,
      "network": null,
      "request_three_d_secure": "automatic"
    }
  },
  "payment_method_types": [
    "card"
  ],
  "receipt_email": "jane@example.com",
  "shipping": null,
  "status": "succeeded"
}`)

type benchIntent struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Status         string            `json:"status"`
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	Currency       string            `json:"currency"`
	Description    *string           `json:"description"`
	Created        int64             `json:"created"`
	Metadata       map[string]string `json:"metadata"`
}

func (pi *benchIntent) member(name string, v *Value) error {
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

// BenchmarkDecodePaymentIntent compares reading the fields a connector
// uses from a PaymentIntent with codec and with encoding/json.
func BenchmarkDecodePaymentIntent(b *testing.B) {
	b.Run("codec", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(paymentIntent)))
		for b.Loop() {
			var pi benchIntent
			if err := DecodeObject(paymentIntent, pi.member); err != nil || pi.Amount != 2000 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(paymentIntent)))
		for b.Loop() {
			var pi benchIntent
			if err := json.Unmarshal(paymentIntent, &pi); err != nil || pi.Amount != 2000 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkValid compares Valid with json.Valid on 1 KiB of JSON string
// (BenchmarkWarmCall's result) and on a PaymentIntent.
func BenchmarkValid(b *testing.B) {
	kib := []byte(`"` + strings.Repeat("x", 1022) + `"`)
	for _, in := range []struct {
		name string
		data []byte
	}{{"string-1KiB", kib}, {"payment-intent", paymentIntent}} {
		b.Run(in.name+"/codec", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				if !Valid(in.data) {
					b.Fatal("invalid")
				}
			}
		})
		b.Run(in.name+"/encoding-json", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			for b.Loop() {
				if !json.Valid(in.data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
