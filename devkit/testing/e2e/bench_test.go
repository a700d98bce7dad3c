package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/wasmrt"
)

// Each end-to-end benchmark has a Direct twin that makes the same provider
// requests with net/http, in the same run, so that e2e − direct is what the
// host, the wasm connector and the ABI cost per call. Every iteration uses a
// fresh idempotency key, so each one is a real effect, never a replay.
//
//	go test -run '^$' -bench . -benchtime 200x ./devkit/testing/e2e/

// benchRun distinguishes keys of separate runs against the same providers.
var benchRun = newKey("bench")

func BenchmarkPaymentE2E(b *testing.B) {
	c := loadPayments(b, shared.sb.PaymentsURL())
	ctx := context.Background()
	args := []byte(paymentArgs(2000, "pm_card_visa"))
	i := 0
	for b.Loop() {
		i++
		key := fmt.Sprintf("%s-pe2e-%d", benchRun, i)
		o, err := c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: "create_payment", Key: key, ExecutionID: "exec-" + key, Args: args})
		if err != nil || o.Kind != abi.OutcomeOK {
			b.Fatalf("create_payment: %v %s %q", err, o.Kind, o.Error)
		}
	}
	wantWarm(b, c)
}

// wantWarm fails the benchmark unless every call ran on the one warm
// instance Load created (no instance was discarded and re-created).
func wantWarm(b *testing.B, c *conn) {
	b.Helper()
	if st := c.Stats(); st.Created != 1 || st.Discarded != 0 {
		b.Fatalf("pool %+v: calls did not all run on the warm instance", st)
	}
}

// BenchmarkPaymentProviderDirect sends the request create_payment sends
// (same form, same headers) and decodes the PaymentIntent.
func BenchmarkPaymentProviderDirect(b *testing.B) {
	client := &http.Client{}
	defer client.CloseIdleConnections()
	i := 0
	for b.Loop() {
		i++
		paymentDirect(b, client, fmt.Sprintf("%s-pdirect-%d", benchRun, i))
	}
}

// paymentDirect makes create_payment's request with net/http.
func paymentDirect(b *testing.B, client *http.Client, key string) {
	form := url.Values{
		"amount": {"2000"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"},
		"payment_method_types[]": {"card"}, "confirm": {"true"}, "description": {"e2e"},
		"metadata[connhost_key]": {key}, "metadata[connhost_execution_id]": {"exec-" + key},
	}
	req, err := http.NewRequest("POST", shared.sb.PaymentsURL()+"/v1/payment_intents", strings.NewReader(form.Encode()))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Stripe-Version", "2024-06-20")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", key)
	var pi struct {
		ID, Status string
	}
	if st := doJSON(b, client, req, &pi); st != 200 || pi.Status != "succeeded" {
		b.Fatalf("create: %d %+v", st, pi)
	}
}

// BenchmarkPaymentOverhead alternates one create_payment through the host
// (BenchmarkPaymentE2E's call) with the same request made directly
// (BenchmarkPaymentProviderDirect's), so both see the same load and the
// same provider state, and reports each one's time, the host's overhead
// (their difference) and their ratio.
func BenchmarkPaymentOverhead(b *testing.B) {
	c := loadPayments(b, shared.sb.PaymentsURL())
	client := &http.Client{}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	args := []byte(paymentArgs(2000, "pm_card_visa"))
	var p pair
	for b.Loop() {
		p.n++
		key := fmt.Sprintf("%s-pover-%d", benchRun, p.n)
		t0 := time.Now()
		o, err := c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: "create_payment", Key: key, ExecutionID: "exec-" + key, Args: args})
		t1 := time.Now()
		if err != nil || o.Kind != abi.OutcomeOK {
			b.Fatalf("create_payment: %v %s %q", err, o.Kind, o.Error)
		}
		paymentDirect(b, client, key+"-direct")
		p.add(t1.Sub(t0), time.Since(t1))
	}
	p.report(b)
	wantWarm(b, c)
}

// pair sums the two sides of an Overhead benchmark.
type pair struct {
	n            int
	host, direct time.Duration
}

func (p *pair) add(host, direct time.Duration) { p.host += host; p.direct += direct }

// report adds host-µs, direct-µs, overhead-µs (per call) and host/direct.
func (p *pair) report(b *testing.B) {
	n := float64(p.n)
	b.ReportMetric(float64(p.host.Microseconds())/n, "host-µs")
	b.ReportMetric(float64(p.direct.Microseconds())/n, "direct-µs")
	b.ReportMetric(float64((p.host-p.direct).Microseconds())/n, "overhead-µs")
	b.ReportMetric(float64(p.host)/float64(p.direct), "host/direct")
}

func BenchmarkEmailE2E(b *testing.B) {
	base := needMailpit(b)
	emptyMailbox(b)
	c := loadEmail(b, base)
	ctx := context.Background()
	args := []byte(sendArgs)
	i := 0
	for b.Loop() {
		i++
		key := fmt.Sprintf("%s-ee2e-%d", benchRun, i)
		o, err := c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: "send", Key: key, ExecutionID: "exec-" + key, Args: args})
		if err != nil || o.Kind != abi.OutcomeOK {
			b.Fatalf("send: %v %s %q", err, o.Kind, o.Error)
		}
	}
	wantWarm(b, c)
}

// BenchmarkEmailProviderDirect makes the requests send makes on the wire:
// the look-up of the key's Message-ID (message-id: search), then the send
// with the same JSON body.
func BenchmarkEmailProviderDirect(b *testing.B) {
	base := needMailpit(b)
	emptyMailbox(b)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	i := 0
	for b.Loop() {
		i++
		emailDirect(b, client, base, fmt.Sprintf("%s-edirect-%d", benchRun, i))
	}
}

// emailDirect makes send's two requests with net/http.
func emailDirect(b *testing.B, client *http.Client, base, key string) {
	id := messageID(key)
	q := url.Values{"query": {"message-id:" + id}, "start": {"0"}, "limit": {"50"}}
	req, err := http.NewRequest("GET", base+"/api/v1/search?"+q.Encode(), nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	var page struct {
		MessagesCount *uint64 `json:"messages_count"`
		Messages      []struct{ ID, MessageID string }
	}
	if st := doJSON(b, client, req, &page); st != 200 || page.MessagesCount == nil {
		b.Fatalf("search: %d", st)
	}
	body, _ := json.Marshal(map[string]any{
		"From":    map[string]string{"Email": defaultFrom},
		"To":      []map[string]string{{"Email": "customer@example.com"}},
		"Subject": "Invoice 42", "Text": "Your invoice is attached.",
		"Tags":    []string{"connhost", "connhost-" + key[len(key)-16:]},
		"Headers": map[string]string{"Message-ID": "<" + id + ">", "X-Connhost-Execution-Id": "exec-" + key},
	})
	req, err = http.NewRequest("POST", base+"/api/v1/send", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	var out struct{ ID string }
	if st := doJSON(b, client, req, &out); st != 200 || out.ID == "" {
		b.Fatalf("send: %d %+v", st, out)
	}
}

// BenchmarkEmailOverhead alternates one send through the host with the
// same two requests made directly (as BenchmarkPaymentOverhead does), on
// one mailbox that both grow alike.
func BenchmarkEmailOverhead(b *testing.B) {
	base := needMailpit(b)
	emptyMailbox(b)
	c := loadEmail(b, base)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	ctx := context.Background()
	args := []byte(sendArgs)
	var p pair
	for b.Loop() {
		p.n++
		key := fmt.Sprintf("%s-eover-%d", benchRun, p.n)
		t0 := time.Now()
		o, err := c.Call(ctx, wasmrt.CallRequest{Export: abi.ExportExecuteWithKey, Operation: "send", Key: key, ExecutionID: "exec-" + key, Args: args})
		t1 := time.Now()
		if err != nil || o.Kind != abi.OutcomeOK {
			b.Fatalf("send: %v %s %q", err, o.Kind, o.Error)
		}
		emailDirect(b, client, base, key+"-direct")
		p.add(t1.Sub(t0), time.Since(t1))
	}
	p.report(b)
	wantWarm(b, c)
}

// emptyMailbox deletes every message of the real Mailpit, so each email
// benchmark starts from the same mailbox size (the message-id search scans).
func emptyMailbox(b *testing.B) {
	b.Helper()
	if err := shared.mailpit.DeleteMessages(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// doJSON performs req and decodes a JSON answer into out; it returns the
// status.
func doJSON(b *testing.B, client *http.Client, req *http.Request, out any) int {
	b.Helper()
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		b.Fatalf("decode %s: %v (%s)", strconv.Quote(req.URL.Path), err, data)
	}
	return resp.StatusCode
}

// BenchmarkColdPaths reports, for each shipped connector, what serve's
// start and a burst's pool growth pay: load-ms is Load with a warm
// compilation cache (read and check the module, compile from the cache,
// instantiate the describing instance, version check, describe), and
// instance-ms is creating one more pooled instance (Prewarm by one:
// instantiate + _initialize). ns/op is their sum, plus Close.
func BenchmarkColdPaths(b *testing.B) {
	for _, tc := range []struct{ name, wasm, digest string }{
		{"payments", shared.paymentsWasm, shared.paymentsDigest},
		{"email", shared.emailWasm, shared.emailDigest},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := shippedManifest(b, tc.name, tc.digest)
			cfg := map[string]string{"api_key": apiKey, "base_url": "http://127.0.0.1:1", "default_from": defaultFrom}
			ctx := context.Background()
			rt, err := wasmrt.New(ctx, wasmrt.Options{
				CacheDir: shared.wazeroCache,
				Config: func(_, key string) (string, bool) {
					v, ok := cfg[key]
					return v, ok
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(ctx)
			lo := wasmrt.LoadOptions{ModulePath: tc.wasm}
			c, err := rt.Load(ctx, m, lo) // warms the cache
			if err != nil {
				b.Fatal(err)
			}
			c.Close(ctx)
			var load, inst time.Duration
			n := 0
			for b.Loop() {
				n++
				t0 := time.Now()
				c, err := rt.Load(ctx, m, lo)
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				st := c.Stats()
				if err := c.Prewarm(ctx, st.Idle+st.Busy+1); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if got := c.Stats().Created; got != st.Created+1 {
					b.Fatalf("Prewarm created %d instances, want 1", got-st.Created)
				}
				load, inst = load+t1.Sub(t0), inst+t2.Sub(t1)
				c.Close(ctx)
			}
			b.ReportMetric(float64(load.Microseconds())/1000/float64(n), "load-ms")
			b.ReportMetric(float64(inst.Microseconds())/1000/float64(n), "instance-ms")
		})
	}
}
