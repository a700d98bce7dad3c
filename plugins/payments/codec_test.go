package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"reflect"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// The connector reads and writes JSON and forms with package codec instead
// of encoding/json and url.Values. These tests hold it to what the
// standard library did: same results byte for byte, same request bodies
// byte for byte, same fields read from Stripe's answers.

// Tagged twins of the connector's types, as encoding/json decoded them.
type jsonPaymentIntent struct {
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

type jsonCreateArgs struct {
	Amount        *int64 `json:"amount"`
	Currency      string `json:"currency"`
	PaymentMethod string `json:"payment_method"`
	Description   string `json:"description"`
	CustomerEmail string `json:"customer_email"`
}

type jsonAPIError struct {
	Error *struct {
		Type          string `json:"type"`
		Code          string `json:"code"`
		DeclineCode   string `json:"decline_code"`
		Message       string `json:"message"`
		Param         string `json:"param"`
		PaymentIntent *struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"payment_intent"`
	} `json:"error"`
}

func TestResultsEncodeAsEncodingJSON(t *testing.T) {
	desc := "order <42> & \"more\"\u2028\xff"
	for _, v := range []interface{ json() []byte }{
		paymentResult{PaymentIntent: "pi_1", Status: "succeeded", Amount: 2000, Currency: "usd"},
		paymentResult{},
		paymentView{ID: "pi_1", Status: "requires_action", Amount: -1, AmountReceived: 99999999, Currency: "eur", Description: &desc, Created: 1700000000},
		paymentView{},
		refundResult{Refund: "re_1", Status: "pending", Amount: 5, Currency: "usd", PaymentIntent: "pi_\n"},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.json(); !bytes.Equal(got, want) {
			t.Errorf("%T:\ngot  %s\nwant %s", v, got, want)
		}
	}
}

// TestRequestsEncodeAsURLValues: every form body and query the connector
// sends is what url.Values.Encode makes of the same fields, so an attempt
// by this version of the connector sends the bytes an earlier version sent
// for the same execution.
func TestRequestsEncodeAsURLValues(t *testing.T) {
	f := newFakeStripe(t)
	h := f.host()
	create(h, key1, createJSON)
	create(h, "ck_plain", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa"}`)
	h.ExecID = ""
	create(h, "ck_noexec", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"a b&c=d/é+%"}`)
	h.ExecID = "exec 1/é"
	pi := create(h, "ck_pi", `{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}`).Receipt
	refundCall(h, abi.ExportExecuteWithKey, "ck_r1", `{"payment_intent":"`+pi+`"}`)
	refundCall(h, abi.ExportExecuteWithKey, "ck_r2", `{"payment_intent":"`+pi+`","amount":100,"reason":"duplicate"}`)
	refundCall(h, abi.ExportReconcile, "ck_r2", `{"payment_intent":"`+pi+`","amount":100,"reason":"duplicate"}`)
	invoke(h, abi.ExportReconcile, "create_payment", "ck_it's\\", createJSON)
	sent := h.Sent()
	if len(sent) < 8 {
		t.Fatalf("%d requests", len(sent))
	}
	for _, r := range sent {
		u, err := url.Parse(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		for what, enc := range map[string]string{"query": u.RawQuery, "body": string(r.Body)} {
			vals, err := url.ParseQuery(enc)
			if err != nil {
				t.Fatalf("%s %s %s %q: %v", r.Method, u.Path, what, enc, err)
			}
			if enc != vals.Encode() {
				t.Errorf("%s %s %s:\nsent        %s\nurl.Values  %s", r.Method, u.Path, what, enc, vals.Encode())
			}
		}
	}
}

func refundCall(h guest.Host, export, key, args string) abi.Outcome {
	return invoke(h, export, "refund_payment", key, args)
}

// recordedBodies returns Stripe answers recorded from the emulator: a
// PaymentIntent, a declined card's error, a refund, a search result.
func recordedBodies(t testing.TB) [][]byte {
	_, h := startSandbox(t, stripe.Options{})
	o := create(h, key1, createJSON)
	create(h, "ck_declined", `{"amount":2000,"currency":"usd","payment_method":"pm_card_chargeDeclined"}`)
	refundCall(h, abi.ExportExecuteWithKey, "ck_r", `{"payment_intent":"`+o.Receipt+`","amount":500}`)
	invoke(h, abi.ExportReconcile, "create_payment", key1, createJSON)
	var out [][]byte
	for _, r := range h.Responses() {
		out = append(out, r.Body)
	}
	if len(out) < 4 {
		t.Fatalf("%d responses", len(out))
	}
	return out
}

func TestDecodersAgreeWithEncodingJSONOnRecordedAnswers(t *testing.T) {
	for _, b := range recordedBodies(t) {
		checkPaymentIntent(t, b)
		checkAPIError(t, b)
	}
}

// checkPaymentIntent compares decodePaymentIntent with encoding/json.
func checkPaymentIntent(t *testing.T, b []byte) {
	t.Helper()
	got, gotErr := decodePaymentIntent(b)
	var want jsonPaymentIntent
	wantErr := json.Unmarshal(b, &want)
	if wantErr == nil && (want.ID == "" || (want.Object != "" && want.Object != "payment_intent")) {
		wantErr = io.ErrUnexpectedEOF // decodePaymentIntent's own check
	}
	if guesttest.CodecDiffers(b, stripeNames...) {
		if !json.Valid(b) && gotErr == nil {
			t.Fatalf("decodePaymentIntent accepted invalid JSON %q", b)
		}
		return
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("decodePaymentIntent(%q): %v; encoding/json: %v", b, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(jsonPaymentIntent(got), want) {
		t.Fatalf("decodePaymentIntent(%q) = %+v; encoding/json = %+v", b, got, want)
	}
}

// checkAPIError compares decodeAPIError with encoding/json.
func checkAPIError(t *testing.T, b []byte) {
	t.Helper()
	got, ok := decodeAPIError(b)
	var want jsonAPIError
	err := json.Unmarshal(b, &want)
	if guesttest.CodecDiffers(b, stripeNames...) {
		if !json.Valid(b) && ok {
			t.Fatalf("decodeAPIError accepted invalid JSON %q", b)
		}
		return
	}
	if wantOK := err == nil && want.Error != nil; ok != wantOK {
		t.Fatalf("decodeAPIError(%q) ok %t; encoding/json %v %+v", b, ok, err, want.Error)
	}
	if !ok {
		return
	}
	w := want.Error
	if got.Type != w.Type || got.Code != w.Code || got.DeclineCode != w.DeclineCode || got.Message != w.Message ||
		got.Param != w.Param || (got.PaymentIntent == nil) != (w.PaymentIntent == nil) ||
		(got.PaymentIntent != nil && (got.PaymentIntent.ID != w.PaymentIntent.ID || got.PaymentIntent.Status != w.PaymentIntent.Status)) {
		t.Fatalf("decodeAPIError(%q) = %+v; encoding/json = %+v", b, got, w)
	}
}

// stripeNames are the names the connector reads from Stripe and from its
// arguments.
var stripeNames = []string{"id", "object", "status", "amount", "amount_received", "currency", "description",
	"created", "metadata", "error", "type", "code", "decline_code", "message", "param", "payment_intent",
	"payment_method", "customer_email"}

func FuzzDecodeStripeAnswers(f *testing.F) {
	for _, b := range recordedBodies(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"error":null}`))
	f.Add([]byte(`{"error":{"type":"card_error","payment_intent":null}}`))
	f.Add([]byte(`{"id":"pi_1","description":null,"metadata":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkPaymentIntent(t, b)
		checkAPIError(t, b)
	})
}

// FuzzCreateArgs: create_payment's arguments read as guest.DecodeArgs
// read them, except that codec also refuses duplicate and case-folded
// names and text encoding/json would alter.
func FuzzCreateArgs(f *testing.F) {
	f.Add([]byte(createJSON))
	f.Add([]byte(`{"amount":null,"currency":"usd"}`))
	f.Add([]byte(`{"amount":1.5}`))
	f.Add([]byte(`{"Amount":1}`))
	f.Add([]byte(`{"amount":1,"key":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got createArgs
		gotErr := guest.ReadArgs(b, got.member)
		var want jsonCreateArgs
		wantErr := abi.UnmarshalStrict(b, &want)
		switch {
		case gotErr == nil && wantErr != nil:
			t.Fatalf("accepted %q, which encoding/json refuses: %v", b, wantErr)
		case gotErr == nil && !reflect.DeepEqual(jsonCreateArgs(got), want):
			t.Fatalf("read %q as %+v; encoding/json %+v", b, got, want)
		case gotErr != nil && wantErr == nil && !guesttest.CodecDiffers(b, stripeNames...):
			t.Fatalf("refused %q, which encoding/json accepts: %v", b, gotErr)
		}
	})
}
