package main

import (
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
)

// BenchmarkGuestCreatePayment is create_payment's own work: decode and
// validate the arguments, build the form, decode Stripe's PaymentIntent
// (recorded from the emulator, served in-process) and encode the result.
// It runs natively: the test binary compiled to wasip1 imports the host's
// connhost module, which a plain wasm runtime does not provide. The same
// work compiled to wasm and called through the host is what
// BenchmarkPaymentOverhead in devkit/testing/e2e measures.
func BenchmarkGuestCreatePayment(b *testing.B) {
	s := stripe.New(stripe.Options{})
	b.Cleanup(s.Close)
	const origin = "http://stripe.test:80"
	h := newTestHost(origin, map[string]string{"base_url": origin, "api_key": testAPIKey})
	h.Handler = s
	wantKind(b, create(h, key1, createJSON), abi.OutcomeOK, "")
	c := &guesttest.Canned{ExecID: h.ExecID, Values: h.Values, Responses: h.Responses()}
	args := []byte(createJSON)
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		if o := guest.Invoke(c, abi.ExportExecuteWithKey, "create_payment", key1, args); o.Kind != abi.OutcomeOK {
			b.Fatalf("%s %q", o.Kind, o.Error)
		}
	}
}
