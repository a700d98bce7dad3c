package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// guardedPayments opens an executor (Pebble ledger on disk) with the
// shipped payments manifest, its module and the Stripe emulator as its
// provider, as dev mode does.
func guardedPayments(t *testing.T) *host.Executor {
	t.Helper()
	dir := t.TempDir()
	wasm, err := os.ReadFile(shared.paymentsWasm)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "payments.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	m := shippedManifest(t, "payments", shared.paymentsDigest)
	m.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), originOf(t, shared.sbc.PaymentsURL))
	cfg := map[string]string{"api_key": apiKey, "base_url": shared.sbc.PaymentsURL}
	ex, err := host.Open(context.Background(), host.Options{
		DataDir: filepath.Join(dir, "data"), CacheDir: shared.wazeroCache, ModuleDir: dir,
		Manifests: []*manifests.Manifest{m}, Logger: slog.New(slog.DiscardHandler),
		Config: func(connector, key string) (string, bool) { v, ok := cfg[key]; return v, ok && connector == "payments" },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close(context.Background()) })
	return ex
}

// TestPaymentRespellingsHeldAsDuplicates: a payment approved and charged
// once, then sent again under new tool-call ids in the same session,
// spelled as Stripe takes the same payment (the currency in capitals, the
// receipt address's domain in capitals, an added empty or another
// description, the description left out or in NFD). A reviewer approves
// every call not marked a possible duplicate, as one shown no warning
// would, and rejects the others. Before, each re-spelling reached the
// reviewer unmarked and was charged again (7 charges); now each is held as
// a duplicate of the first, and Stripe counts one charge. An amount
// written 500.0 is refused before anything is recorded.
func TestPaymentRespellingsHeldAsDuplicates(t *testing.T) {
	resetSandboxAtCleanup(t)
	ctx := context.Background()
	ex := guardedPayments(t)
	before := paymentsStats(t).ChargesSucceeded
	call := func(id, args string) (host.Result, error) {
		return ex.Execute(ctx, host.ToolCall{SessionID: "s1", ToolCallID: id, Tool: "payments.create_payment", Arguments: json.RawMessage(args)})
	}
	review := func(id, args string) host.Result {
		t.Helper()
		res, err := call(id, args)
		if err != nil || res.Status != host.StatusAwaitingApproval {
			t.Fatalf("%s: %+v %v", id, res, err)
		}
		if res.DuplicateOf != "" {
			// What the reviewer reads says why.
			if v, err := ex.ApprovalView(ctx, res.Approval.ID); err != nil || !strings.Contains(v.Text, "POSSIBLE DUPLICATE: this call is the same intent as execution "+res.DuplicateOf) ||
				!strings.Contains(v.Text, "currency (any case)") {
				t.Errorf("%s: the reviewer is not told why it may be a duplicate (%v):\n%s", id, err, v.Text)
			}
			if _, err := ex.Reject(ctx, res.Approval.ID, host.Decision{By: "rita", Reason: "a repeat"}); err != nil {
				t.Fatal(err)
			}
			return res
		}
		if _, err := ex.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.ArgsDigest}); err != nil {
			t.Fatal(err)
		}
		if res, err = call(id, args); err != nil {
			t.Fatal(err)
		}
		return res
	}
	const email = `"customer_email": "ana@example.com"`
	first := review("c0", `{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", `+email+`, "description": "Caf\u00e9 order"}`)
	if first.Status != host.StatusSucceeded {
		t.Fatalf("the first payment: %+v", first)
	}
	for i, args := range []string{
		`{"amount": 500, "currency": "USD", "payment_method": "pm_card_visa", ` + email + `, "description": "Caf\u00e9 order"}`,
		`{"amount": 500, "currency": "Usd", "payment_method": "pm_card_visa", ` + email + `, "description": "Caf\u00e9 order"}`,
		`{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", "customer_email": "ana@EXAMPLE.com", "description": "Caf\u00e9 order"}`,
		`{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", ` + email + `, "description": ""}`,
		`{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", ` + email + `}`,
		`{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa", ` + email + `, "description": "Cafe\u0301 order"}`,
	} {
		res := review(fmt.Sprint("c", i+1), args)
		if res.DuplicateOf != first.ExecutionID {
			t.Errorf("%s: %s, not held as a possible duplicate of %s", args, res.Status, first.ExecutionID)
		}
	}
	_, err := call("c9", `{"amount": 500.0, "currency": "usd", "payment_method": "pm_card_visa", `+email+`}`)
	var ae *manifests.ArgsError
	if !errors.As(err, &ae) {
		t.Errorf("amount 500.0: %v, want refused arguments", err)
	}
	if recs, err := ex.Ledger().List(ctx, ledger.Filter{Limit: 100}); err != nil || len(recs) != 7 {
		t.Errorf("%d executions recorded (%v), want the 7 before the refused one", len(recs), err)
	}
	if n := paymentsStats(t).ChargesSucceeded - before; n != 1 {
		t.Fatalf("Stripe counted %d charges for one payment", n)
	}
}
