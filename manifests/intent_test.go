package manifests

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

// TestIntentParsed: the intent table becomes the operation's intent
// fields, nested tables as dotted paths, sorted.
func TestIntentParsed(t *testing.T) {
	op, _ := mustLoad(t, "testdata/intent.toml").Operation("order")
	require.Equal(t, []IntentField{{"amount", IntentText}, {"currency", IntentCase}, {"shipping.city", IntentText}, {"sku", IntentText}, {"to", IntentEmail}}, op.Intent)
	for _, name := range []string{"payments.toml", "email.toml"} {
		m := mustLoad(t, name)
		for _, op := range m.Operations {
			if op.DuplicateWindow > 0 {
				require.NotEmpty(t, op.Intent, "%s: %s is guarded and declares no intent", name, op.Name)
			}
		}
	}
}

// TestIntentDigest: the spellings a provider takes for one effect have one
// intent digest; a different value of an intent argument has another, and
// an argument outside the intent changes nothing.
func TestIntentDigest(t *testing.T) {
	order, _ := mustLoad(t, "testdata/intent.toml").Operation("order")
	pay, _ := mustLoad(t, "payments.toml").Operation("create_payment")
	send, _ := mustLoad(t, "email.toml").Operation("send")
	base := map[*Operation]string{
		pay:   `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com", "description": "Order 1"}`,
		send:  `{"to": ["ana@example.com", "bo@example.org"], "subject": "Caf\u00e9", "text": "hi"}`,
		order: `{"sku": "A-1", "amount": 5, "currency": "eur", "to": "ana@example.com", "shipping": {"city": "K\u00f6ln"}}`,
	}
	for _, tc := range []struct {
		name string
		op   *Operation
		args string
		same bool
	}{
		{"currency upper case", pay, `{"amount": 500, "currency": "USD", "payment_method": "pm_card_visa", "customer_email": "ana@example.com"}`, true},
		{"currency mixed case", pay, `{"amount": 500, "currency": "Usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com"}`, true},
		{"e-mail domain case", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@EXAMPLE.com"}`, true},
		{"an added empty description", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com", "description": ""}`, true},
		{"the description omitted", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com"}`, true},
		{"another description", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com", "description": "Order 2"}`, true},
		{"another amount", pay, `{"amount": 501, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@example.com"}`, false},
		{"another currency", pay, `{"amount": 500, "currency": "eur", "payment_method": "pm_card_visa", "customer_email": "ana@example.com"}`, false},
		{"the e-mail's local part in another case", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "Ana@example.com"}`, false},
		{"no e-mail", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}`, false},
		{"another card", pay, `{"amount": 500, "currency": "usd", "payment_method": "pm_card_mastercard", "customer_email": "ana@example.com"}`, false},

		{"NFD subject", send, `{"to": ["ana@example.com", "bo@example.org"], "subject": "Cafe\u0301", "text": "hi"}`, true},
		{"recipients in another order and case", send, `{"to": ["bo@EXAMPLE.ORG", "ana@example.com", "ana@example.com"], "subject": "Caf\u00e9", "text": "hi"}`, true},
		{"an empty cc and html", send, `{"to": ["ana@example.com", "bo@example.org"], "cc": [], "html": "", "subject": "Caf\u00e9", "text": "hi"}`, true},
		{"another text", send, `{"to": ["ana@example.com", "bo@example.org"], "subject": "Caf\u00e9", "text": "hi!"}`, false},
		{"one recipient fewer", send, `{"to": "ana@example.com", "subject": "Caf\u00e9", "text": "hi"}`, false},

		{"one address as a list, a number by value, NFD in a nested argument, a note", order, `{"sku": "A-1", "amount": 5.0, "currency": "EUR", "to": ["ana@example.com"], "shipping": {"city": "Ko\u0308ln", "tags": [1]}, "note": "x"}`, true},
		{"another amount by value", order, `{"sku": "A-1", "amount": 5.5, "currency": "eur", "to": "ana@example.com", "shipping": {"city": "K\u00f6ln"}}`, false},
		{"another city", order, `{"sku": "A-1", "amount": 5, "currency": "eur", "to": "ana@example.com", "shipping": {"city": "Bonn"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := digestOf(t, tc.op, base[tc.op]), digestOf(t, tc.op, tc.args)
			require.Equal(t, tc.same, a == b, "%s vs %s", base[tc.op], tc.args)
		})
	}
	// Without an intent table every argument counts, each as text.
	bare := &Operation{}
	require.Equal(t, digestOf(t, bare, `{"n": 1, "s": "e\u0301"}`), digestOf(t, bare, `{"n": 1.0, "s": "\u00e9", "empty": ""}`))
	require.NotEqual(t, digestOf(t, bare, `{"n": 1, "s": "x"}`), digestOf(t, bare, `{"n": 1, "s": "X"}`))
	require.NotEqual(t, digestOf(t, bare, `{"n": 1, "note": "a"}`), digestOf(t, bare, `{"n": 1, "note": "b"}`))
	// Types stay apart: the number 5 is not the string "5".
	require.NotEqual(t, digestOf(t, bare, `{"n": 5}`), digestOf(t, bare, `{"n": "5"}`))
}

func digestOf(t *testing.T, op *Operation, args string) string {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	require.NoError(t, err)
	return op.IntentDigest(doc.(map[string]any))
}

// FuzzIntentDigest: any arguments have an intent digest, the same one
// every time, and the same once their text is in Unicode NFC.
func FuzzIntentDigest(f *testing.F) {
	for _, s := range []string{`{}`, `{"sku": "A", "to": ["x@Y.z", "x@y.z"], "currency": "E\u0301UR"}`, `{"amount": 1e400, "shipping": {"city": null}}`, `{"to": [[], {}, ""]}`} {
		f.Add(s)
	}
	m, err := Load("testdata/intent.toml")
	if err != nil {
		f.Fatal(err)
	}
	order, _ := m.Operation("order")
	f.Fuzz(func(t *testing.T, args string) {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		obj, ok := doc.(map[string]any)
		if err != nil || !ok {
			return
		}
		for _, op := range []*Operation{order, {}} {
			d := op.IntentDigest(obj)
			if len(d) != 64 || op.IntentDigest(obj) != d {
				t.Fatalf("digest %q, then another", d)
			}
			nfc, err := jsonschema.UnmarshalJSON(strings.NewReader(norm.NFC.String(args)))
			if err == nil {
				if obj2, ok := nfc.(map[string]any); ok && op.IntentDigest(obj2) != d {
					t.Fatalf("%s and its NFC form have two intents", args)
				}
			}
		}
	})
}
