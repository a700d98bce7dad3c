package sandbox_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
)

// A charge whose answer is lost after Stripe applied it, retried with the
// same Idempotency-Key: the provider sees one effect.
func ExampleStart() {
	ctx := context.Background()
	sb, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		panic(err)
	}
	defer sb.Close()
	c := sb.Client()

	// The next charge is performed, then answered 500.
	_ = c.AddPaymentsFault(ctx, fault.Rule{Kind: fault.Status, Status: 500, Apply: true, Path: "/v1/payment_intents"})

	charge := func() (status int, replayed bool) {
		form := url.Values{"amount": {"2000"}, "currency": {"usd"}, "confirm": {"true"},
			"payment_method": {"pm_card_visa"}, "metadata[connhost_execution_id]": {"exec-1"}}
		req, _ := http.NewRequest("POST", sb.PaymentsURL()+"/v1/payment_intents", strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer sk_test_example")
		req.Header.Set("Idempotency-Key", "exec-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true"
	}
	fmt.Println(charge())
	fmt.Println(charge())
	found, _ := c.FindPaymentIntents(ctx, "connhost_execution_id", "exec-1")
	fmt.Println(len(found), found[0].Status)
	// Output:
	// 500 false
	// 200 true
	// 1 succeeded
}
