package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// TestHeldCallsDoNotStallAnotherTenant: tenant-b's payments, held at the
// Stripe emulator, take every instance of the real payments connector, and
// more of tenant-b's wait behind them. tenant-a's payment to the same
// connector is not made to wait for them: it is answered before any
// connector call has returned (tenant-b's are still held), with
// ErrConnectorBusy (503 connector_busy over HTTP) and nothing recorded, so
// no attempt was spent and nothing reached the provider. Sent again once the instances are free, the same call is
// charged once; sent a third time it is answered from its record. Every
// call of both tenants is charged exactly once in the end.
func TestHeldCallsDoNotStallAnotherTenant(t *testing.T) {
	ctx := context.Background()
	wasm, digest, err := wasmbuild.Cached(ctx, "plugins/payments")
	if err != nil {
		t.Fatalf("build the payments connector: %v", err)
	}
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifests.Load(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	prov := stripe.New(stripe.Options{})
	srv := httptest.NewServer(prov)
	t.Cleanup(func() { prov.Close(); srv.Close() })
	u, _ := url.Parse(srv.URL)
	m.Connector.SHA256 = digest
	m.Connector.Module = filepath.Base(wasm)
	m.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), "http://"+u.Host)
	for _, op := range m.Operations {
		op.RequiresApproval = false // the calls run at once: what is measured is the instances
	}
	instances := m.Limits.Instances
	returned := &callCounter{}
	const wait = 2 * time.Second
	ex, err := host.Open(ctx, host.Options{
		DataDir: t.TempDir(), Manifests: []*manifests.Manifest{m}, ModuleDir: filepath.Dir(wasm),
		CacheDir: filepath.Join(os.TempDir(), "connhost-example-cache"),
		Config: func(connector, key string) (string, bool) {
			switch key {
			case "api_key":
				return "sk_test_connhost", true
			case "base_url":
				return srv.URL, true
			}
			return "", false
		},
		InstanceWait: wait,
		Logger:       slog.New(slog.DiscardHandler),
		Observer:     returned,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close(context.Background()) })

	pay := func(ns, id string, amount int) host.ToolCall {
		return host.ToolCall{Namespace: ns, SessionID: "s-" + id, ToolCallID: id, Tool: "payments.create_payment",
			Arguments: json.RawMessage(fmt.Sprintf(`{"amount":%d,"currency":"usd","payment_method":"pm_card_visa"}`, amount))}
	}
	type answer struct {
		call   host.ToolCall
		res    host.Result
		err    error
		waited time.Duration
	}
	if err := prov.Faults().Add(fault.Rule{Kind: fault.Hold, Method: "POST", Path: "/v1/payment_intents", Count: instances}); err != nil {
		t.Fatal(err)
	}
	bAnswers := make(chan answer, 2*instances)
	var bCalls []host.ToolCall
	var wg sync.WaitGroup
	for i := range 2 * instances {
		c := pay("tenant-b", fmt.Sprintf("b-%d", i), 1000+i)
		bCalls = append(bCalls, c)
		wg.Go(func() {
			start := time.Now()
			res, err := ex.Execute(ctx, c)
			bAnswers <- answer{c, res, err, time.Since(start)}
		})
	}
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := prov.Faults().WaitHeld(hctx, instances); err != nil {
		t.Fatalf("tenant-b's calls held at the provider: %v", err)
	}

	a := pay("tenant-a", "a-1", 500)
	aAnswer := make(chan answer, 1)
	start := time.Now()
	go func() {
		res, err := ex.Execute(ctx, a)
		aAnswer <- answer{a, res, err, time.Since(start)}
	}()
	var got answer
	select {
	case got = <-aAnswer:
	case <-time.After(10 * wait):
		prov.Faults().Release()
		got = <-aAnswer
		t.Errorf("tenant-a's call was answered only once tenant-b's held calls were released, after %v", got.waited)
	}
	callsThen := returned.n.Load()
	t.Logf("tenant-a's call answered after %v, %d connector calls having returned: %v", got.waited.Round(time.Millisecond), callsThen, got.err)
	if callsThen != 0 {
		t.Errorf("tenant-a's call was answered only after %d connector calls had returned (tenant-b's held ones cut at their deadline, or its own), want before any", callsThen)
	}
	var busy *host.BusyError
	if !errors.As(got.err, &busy) || !errors.Is(got.err, host.ErrConnectorBusy) || busy.Recorded {
		t.Fatalf("tenant-a's call while every instance is held: %+v %v, want a *BusyError with nothing recorded", got.res, got.err)
	}
	if _, err := ex.Ledger().Get(ctx, ledger.ExecutionID("tenant-a", a.SessionID, a.ToolCallID)); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("tenant-a's busy call left a record: %v", err)
	}

	prov.Faults().Release()
	wg.Wait()
	close(bAnswers)
	var again []host.ToolCall
	for ans := range bAnswers {
		switch {
		case ans.err == nil && ans.res.Status == host.StatusSucceeded:
		case errors.Is(ans.err, host.ErrConnectorBusy):
			again = append(again, ans.call)
		default:
			t.Errorf("tenant-b's call %s: %+v %v", ans.call.ToolCallID, ans.res, ans.err)
		}
	}
	t.Logf("tenant-b: %d calls held at the provider, %d answered busy after waiting for an instance", instances, len(again))

	// The same calls, sent again: each charged once.
	for _, c := range append(again, a) {
		res, err := ex.Execute(ctx, c)
		if err != nil || res.Status != host.StatusSucceeded || res.Attempt != 1 {
			t.Fatalf("%s sent again: %+v %v, want succeeded at attempt 1", c.ToolCallID, res, err)
		}
	}
	res, err := ex.Execute(ctx, a)
	if err != nil || !res.Recorded {
		t.Fatalf("tenant-a's call a third time: %+v %v, want its recorded answer", res, err)
	}
	if st := prov.Stats(); st.ChargesSucceeded != len(bCalls)+1 {
		t.Fatalf("the provider charged %d times for %d calls", st.ChargesSucceeded, len(bCalls)+1)
	}
}

// callCounter counts the connector calls that returned.
type callCounter struct {
	n atomic.Int64
}

func (c *callCounter) ConnectorCall(context.Context, string, string, string, time.Duration, error) {
	c.n.Add(1)
}
func (c *callCounter) LedgerWrite(context.Context, time.Duration) {}
func (c *callCounter) Transition(ledger.State, string)            {}
func (c *callCounter) GuestLogDropped(string, int64, int64)       {}
