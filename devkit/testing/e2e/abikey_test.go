package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// countingProxy forwards to target and counts the requests that reach it.
func countingProxy(tb testing.TB, target string) (string, *atomic.Int64) {
	tb.Helper()
	u, err := url.Parse(target)
	if err != nil {
		tb.Fatal(err)
	}
	var n atomic.Int64
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		rp.ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	return srv.URL, &n
}

// The idempotency key crosses the boundary only as the ABI's key argument.
// Arguments that try to carry one are refused by the operation's schema
// (the host validates before any dispatch) and, should they get past it,
// by the connector's strict decoding — before any request reaches the
// provider.
func TestIdempotencyKeyCrossesOnlyThroughTheABI(t *testing.T) {
	tests := []struct {
		name, connector, op, export, args string
	}{
		{"payments create_payment idempotency_key", "payments", "create_payment", abi.ExportExecuteWithKey,
			`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","idempotency_key":"model-chosen"}`},
		{"payments create_payment key", "payments", "create_payment", abi.ExportExecuteWithKey,
			`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","key":"model-chosen"}`},
		{"payments refund_payment idempotency_key", "payments", "refund_payment", abi.ExportExecuteWithKey,
			`{"payment_intent":"pi_e2eAnyIntent","idempotency_key":"model-chosen"}`},
		{"email send idempotency_key", "email", "send", abi.ExportExecuteWithKey,
			`{"to":"a@example.com","subject":"s","text":"t","idempotency_key":"model-chosen"}`},
		{"email send Message-ID smuggled as a field", "email", "send", abi.ExportExecuteWithKey,
			`{"to":"a@example.com","subject":"s","text":"t","headers":{"Message-ID":"<model-chosen@connhost.invalid>"}}`},
	}
	payments := loadPayments(t, shared.sb.PaymentsURL())
	var email *conn
	var mailpitRequests *atomic.Int64
	if shared.mailpitURL != "" {
		var proxy string
		proxy, mailpitRequests = countingProxy(t, shared.mailpitURL)
		email = loadEmail(t, proxy)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// requests counts what reaches the provider: the Stripe
			// emulator's own counter, or a proxy in front of Mailpit.
			c, requests := payments, func() int64 { return int64(paymentsStats(t).Requests) }
			if tt.connector == "email" {
				needMailpit(t)
				c, requests = email, mailpitRequests.Load
			}
			before := requests()
			reached := func() int64 { return requests() - before }
			op, _ := c.Manifest().Operation(tt.op)
			err := op.ValidateArgs([]byte(tt.args))
			var ae *manifests.ArgsError
			if !errors.Is(err, manifests.ErrInvalidArgs) || !errors.As(err, &ae) {
				t.Fatalf("schema accepted arguments carrying a key: %v", err)
			}
			// Past the schema (a host bug), the connector still refuses.
			key := newKey("abi")
			o, err := c.Call(context.Background(), wasmrt.CallRequest{Export: tt.export, Operation: tt.op, Key: key, ExecutionID: "exec-" + key, Args: []byte(tt.args)})
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, o, abi.OutcomePermanent, "invalid arguments", "unknown field")
			if n := reached(); n != 0 {
				t.Fatalf("%d requests reached the provider", n)
			}
			if tt.connector == "payments" {
				if pis := intentsWithKey(t, "model-chosen"); len(pis) != 0 {
					t.Fatalf("the provider holds %d PaymentIntents under the model's key", len(pis))
				}
			}
		})
	}
}

// Reconcile identifies the execution by the ABI key alone: a key written
// into the (recorded) arguments neither finds another execution's charge
// nor hides this one's.
func TestReconcileUsesTheABIKeyNotOneInTheArguments(t *testing.T) {
	c := loadPayments(t, shared.sb.PaymentsURL())
	charged := newKey("abi-charged")
	created := c.executeWithKey(t, "create_payment", charged, paymentArgs(2000, "pm_card_visa"))
	wantOutcome(t, created, abi.OutcomeOK)
	smuggle := func(key string) []byte {
		return []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","idempotency_key":"` + key + `"}`)
	}
	rec := func(key string, args []byte) abi.Outcome {
		o, err := c.Call(context.Background(), wasmrt.CallRequest{Export: abi.ExportReconcile, Operation: "create_payment", Key: key, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := rec(charged, smuggle(newKey("other")))
	wantOutcome(t, o, abi.OutcomeApplied)
	if o.Receipt != created.Receipt {
		t.Fatalf("reconcile receipt %q, want %q", o.Receipt, created.Receipt)
	}
	wantOutcome(t, rec(newKey("abi-unused"), smuggle(charged)), abi.OutcomeUnknown)
}

// The shipped manifests are unpinned for now; the tests pin them to the
// digest wasmbuild returned, and Load checks that pin.
func TestLoadChecksThePinnedDigest(t *testing.T) {
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasmrt.Options{CacheDir: shared.wazeroCache})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	t.Run("another module's digest is refused even when unpinned modules are allowed", func(t *testing.T) {
		m := shippedManifest(t, "payments", shared.emailDigest)
		_, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: shared.paymentsWasm, AllowUnpinned: true})
		var dm *host.DigestMismatchError
		if !errors.As(err, &dm) || !errors.Is(err, host.ErrDigestMismatch) || dm.Actual != shared.paymentsDigest || dm.Pinned != shared.emailDigest {
			t.Fatalf("Load = %v, want a *host.DigestMismatchError naming both digests", err)
		}
	})
	t.Run("the shipped unpinned manifest is refused unless allowed", func(t *testing.T) {
		m := shippedManifest(t, "payments", "")
		if _, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: shared.paymentsWasm}); !errors.Is(err, host.ErrUnpinned) {
			t.Fatalf("Load = %v, want host.ErrUnpinned", err)
		}
	})
	t.Run("the built digest loads", func(t *testing.T) {
		m := shippedManifest(t, "payments", shared.paymentsDigest)
		c, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: shared.paymentsWasm})
		if err != nil {
			t.Fatal(err)
		}
		if c.ModuleDigest() != shared.paymentsDigest {
			t.Fatalf("digest %s", c.ModuleDigest())
		}
	})
}
