package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/manifests/manifesttest"
)

// TestManifest proves manifests/payments.toml and this module agree: the
// same operations, each declared policy backed by the entry point it needs,
// every config key the connector reads declared, and the input schemas
// accepting what the connector accepts and refusing a smuggled key.
func TestManifest(t *testing.T) {
	m, err := manifests.Load(filepath.Join("..", "..", "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	manifesttest.CheckManifest(t, m, guest.Describe())
	for _, k := range []string{"api_key", "base_url"} {
		if !slices.Contains(m.Capabilities.Config, k) {
			t.Errorf("config key %q used but not declared", k)
		}
	}
	valid := map[string][]string{
		"create_payment": {createJSON, `{"amount":1,"currency":"eur","payment_method":"pm_card_visa"}`},
		"refund_payment": {`{"payment_intent":"pi_1"}`, `{"payment_intent":"pi_1","amount":5,"reason":"duplicate"}`},
		"get_payment":    {`{"payment_intent":"pi_1"}`},
	}
	invalid := map[string][]string{
		"create_payment": {
			`{"amount":1,"currency":"usd","payment_method":"pm_card_visa","key":"k"}`,
			`{"amount":1,"currency":"usd","payment_method":"pm_card_visa","idempotency_key":"k"}`,
			`{"amount":0,"currency":"usd","payment_method":"pm_card_visa"}`,
		},
		"refund_payment": {`{"payment_intent":"pi_1","idempotency_key":"k"}`, `{"payment_intent":"ch_1"}`},
		"get_payment":    {`{}`},
	}
	manifesttest.CheckSchemas(t, m, valid, invalid)
}
