package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// The names of the spans the test follows (internal/telemetry).
const (
	spanExecute  = "execute_tool payments.create_payment"
	spanIntent   = "connhost.ledger.intent"
	spanSync     = "connhost.ledger.sync"
	spanDispatch = "connhost.ledger.dispatch"
	spanOutcome  = "connhost.ledger.outcome"
	spanWasm     = "connhost.wasm.call"
	spanApprove  = "connhost.approve"
	spanRecover  = "connhost.recover"
	spanProvider = "POST" // the provider request: an HTTP client span
)

// TestTracesOfAGatedPayment runs connhost serve as a real process with
// [telemetry] exporting to a real Jaeger (built from tools/jaeger) and
// follows one gated payment through the trace its runtime started:
//
//   - "HTTP headers" and "MCP _meta": the runtime's span (traceparent in
//     the request's headers, or in tools/call's _meta) → the server's span →
//     execute_tool → the intent write (→ the fsync it waited for); the reviewer's approval joins the
//     same trace as a child of that execute_tool (linked to the reviewer's
//     request); the call sent again → execute_tool → the dispatch write, the
//     wasm call → the provider request, whose traceparent the Stripe
//     emulator received (its parent is that span) → the outcome write. No
//     span holds an argument value. The access log line and the
//     connector-call histogram's exemplar name the trace.
//   - "crash, recovery and retry": the process is SIGKILLed after the
//     provider answered; the restarted process's recovery pass re-dispatches
//     in the same trace (a child of the call's execute_tool), and the
//     provider sees both attempts' requests in that trace.
func TestTracesOfAGatedPayment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and Jaeger and runs them")
	}
	began := time.Now()
	jaeger := testenv.StartJaeger(t)
	t.Logf("Jaeger %s ready in %v (OTLP %s, query %s)", testenv.JaegerVersion, time.Since(began).Round(time.Millisecond), jaeger.OTLP, jaeger.Query)
	runtime := runtimeTracer(t, jaeger.OTLP)

	ctx := t.Context()
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	mods, mans, data := filepath.Join(tmp, "modules"), filepath.Join(tmp, "manifests"), filepath.Join(tmp, "data")
	installPayments(t, ctx, mods, mans)
	sb, err := sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	origin := strings.TrimSuffix(sb.PaymentsURL(), "/")
	const runtimeTok, ritaTok = "tok-runtime-0123456789", "tok-rita-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", fmt.Sprintf(`[server]
token_env = "T_RUNTIME"

[[principals]]
name = "rita"
roles = ["approver"]
token_env = "T_RITA"

[connectors.payments]
api_key = "sk_test_traces"
base_url = %q
allow_http = [%q]

[telemetry]
endpoint = %q
service_name = "connhost"
`, sb.PaymentsURL(), origin, jaeger.OTLP))
	// Spans leave the batch a tenth of a second after they end.
	env := cliEnv("T_RUNTIME="+runtimeTok, "T_RITA="+ritaTok, "OTEL_BSP_SCHEDULE_DELAY=100")
	serveArgs := func(extra ...string) []string {
		return append([]string{"--json", "--data", data, "--manifests", mans, "--modules", mods, "serve", "--config", cfg, "--listen", "127.0.0.1:0"}, extra...)
	}
	srv := startServer(t, bin, env, "serving the HTTP API", serveArgs()...)
	si, err := readServerInfo(data)
	if err != nil {
		t.Fatal(err)
	}
	api := &apiClient{t: t, base: si.URL}
	payment := map[string]any{"amount": 4242, "currency": "usd", "payment_method": "pm_card_visa", "description": "secret-description-xyz"}

	t.Run("HTTP headers", func(t *testing.T) {
		began := time.Now()
		tctx, root := runtime.Start(ctx, "runtime turn (HTTP)")
		call := map[string]any{"session_id": "s-http", "tool_call_id": "c-http", "tool": "payments.create_payment", "arguments": payment}
		var gated host.Result
		api.post(tctx, runtimeTok, "/v1/executions", call, &gated)
		if gated.Status != host.StatusAwaitingApproval || gated.Approval == nil {
			t.Fatalf("gated call: %+v", gated)
		}
		var approved host.Result
		api.post(ctx, ritaTok, "/v1/approvals/"+gated.Approval.ID+"/approve", httpapi.DecisionRequest{Digest: gated.Approval.ArgsDigest}, &approved)
		var done host.Result
		api.post(tctx, runtimeTok, "/v1/executions", call, &done)
		if done.Status != host.StatusSucceeded {
			t.Fatalf("approved call sent again: %+v", done)
		}
		root.End()
		traceID := root.SpanContext().TraceID().String()
		spans := waitTrace(t, jaeger, traceID, spanOutcome, spanApprove)
		tree := checkGatedTree(t, spans, root.SpanContext().SpanID().String(), "POST /v1/executions", sb.Payments(), traceID)
		noArgumentValues(t, spans)
		// The access log line of the call names its trace.
		if !slices.ContainsFunc(strings.Split(srv.log.String(), "\n"), func(l string) bool {
			return strings.Contains(l, `"msg":"http request"`) && strings.Contains(l, `"path":"/v1/executions"`) && strings.Contains(l, `"trace_id":"`+traceID+`"`)
		}) {
			t.Errorf("no access log line of POST /v1/executions names trace_id %s", traceID)
		}
		// The connector call's latency has the trace as its exemplar.
		metrics := api.get(runtimeTok, "/metrics", "application/openmetrics-text; version=1.0.0")
		if !strings.Contains(metrics, `trace_id="`+traceID+`"`) {
			t.Errorf("/metrics (OpenMetrics) has no exemplar with trace_id %s", traceID)
		}
		t.Logf("HTTP: %d spans in trace %s, tree checked (%s) in %v", len(spans), traceID, tree, time.Since(began).Round(time.Millisecond))
	})

	t.Run("MCP _meta", func(t *testing.T) {
		began := time.Now()
		tctx, root := runtime.Start(ctx, "runtime turn (MCP)")
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(tctx, carrier)
		mc := mcp.NewClient(&mcp.Implementation{Name: "traces-test", Version: "0"}, nil)
		cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: si.URL + "/mcp",
			HTTPClient: &http.Client{Transport: bearer{runtimeTok}}}, nil)
		if err != nil {
			t.Fatalf("mcp connect: %v", err)
		}
		defer cs.Close()
		// The MCP HTTP requests carry no trace headers: the trace context
		// travels in _meta only.
		params := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment,
			Meta: mcp.Meta{mcpserver.MetaSessionID: "s-mcp", mcpserver.MetaToolCallID: "c-mcp", "traceparent": carrier["traceparent"]}}
		res, err := cs.CallTool(ctx, params)
		sc := structured(t, res, err)
		if sc["status"] != "awaiting_approval" {
			t.Fatalf("gated call over MCP: %+v", sc)
		}
		ap, _ := sc["approval"].(map[string]any)
		var approved host.Result
		api.post(ctx, ritaTok, "/v1/approvals/"+fmt.Sprint(ap["id"])+"/approve", httpapi.DecisionRequest{Digest: fmt.Sprint(ap["args_digest"])}, &approved)
		res, err = cs.CallTool(ctx, params)
		if sc = structured(t, res, err); sc["status"] != "succeeded" {
			t.Fatalf("approved call sent again over MCP: %+v", sc)
		}
		root.End()
		traceID := root.SpanContext().TraceID().String()
		spans := waitTrace(t, jaeger, traceID, spanOutcome, spanApprove)
		tree := checkGatedTree(t, spans, root.SpanContext().SpanID().String(), "tools/call", sb.Payments(), traceID)
		for _, s := range spans {
			if strings.HasPrefix(s.OperationName, "tools/call") && s.Tag("mcp.method.name") != "tools/call" {
				t.Errorf("%s: mcp.method.name %q", s.OperationName, s.Tag("mcp.method.name"))
			}
		}
		noArgumentValues(t, spans)
		t.Logf("MCP: %d spans in trace %s, tree checked (%s) in %v", len(spans), traceID, tree, time.Since(began).Round(time.Millisecond))
	})

	t.Run("crash, recovery and retry", func(t *testing.T) {
		began := time.Now()
		srv.stop(t)
		crashing := startServerAt(t, bin, env, crash.AfterPluginReturn, "serving the HTTP API", serveArgs("--allow-test-hooks")...)
		si, err := readServerInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		api := &apiClient{t: t, base: si.URL}
		tctx, root := runtime.Start(ctx, "runtime turn (crash)")
		call := map[string]any{"session_id": "s-crash", "tool_call_id": "c-crash", "tool": "payments.create_payment", "arguments": payment}
		var gated host.Result
		api.post(tctx, runtimeTok, "/v1/executions", call, &gated)
		var approved host.Result
		api.post(ctx, ritaTok, "/v1/approvals/"+gated.Approval.ID+"/approve", httpapi.DecisionRequest{Digest: gated.Approval.ArgsDigest}, &approved)
		// What was done before the dispatch is exported (a reviewer
		// takes longer than the batch's tenth of a second); the kill
		// loses what the dispatching request had not exported.
		waitTrace(t, jaeger, root.SpanContext().TraceID().String(), spanExecute, spanIntent, spanApprove)
		if b, err := api.send(tctx, runtimeTok, "/v1/executions", call); err == nil {
			t.Fatalf("the dispatching request was answered: the process did not crash after the provider's answer: %s\n%s", b, crashing.log)
		}
		if res, err := crashing.Wait(ctx); err != nil || res.Signal == 0 {
			t.Fatalf("the server did not die by a signal: %s %v", res, err)
		}
		key := firstAttemptKey(t, sb.Payments(), root.SpanContext().TraceID().String())
		// Restarted, the recovery pass of Open retries the dispatched
		// attempt with the same key.
		restarted := startServer(t, bin, env, "serving the HTTP API", serveArgs()...)
		si, err = readServerInfo(data)
		if err != nil {
			t.Fatal(err)
		}
		api = &apiClient{t: t, base: si.URL}
		var done host.Result
		api.post(tctx, runtimeTok, "/v1/executions", call, &done)
		if done.Status != host.StatusSucceeded || done.Attempt != 2 || !done.Recorded {
			t.Fatalf("after recovery: %+v", done)
		}
		root.End()
		traceID := root.SpanContext().TraceID().String()
		spans := waitTrace(t, jaeger, traceID, spanRecover, spanOutcome)
		byID := spansByID(spans)
		var execute testenv.JaegerSpan
		for _, s := range spans {
			if s.OperationName == spanExecute && s.Tag("connhost.state") == "awaiting_approval" {
				execute = s
			}
		}
		if execute.SpanID == "" {
			t.Fatalf("no execute_tool span of the gated call in trace %s:\n%s", traceID, describe(spans))
		}
		rec := one(t, spans, spanRecover, func(s testenv.JaegerSpan) bool { return s.Parent() == execute.SpanID })
		dispatch := one(t, spans, spanDispatch, func(s testenv.JaegerSpan) bool { return s.Parent() == rec.SpanID })
		if dispatch.Tag("connhost.decision") != "recover_retry" || dispatch.Tag("connhost.actor") != "recovery" || dispatch.Tag("connhost.attempt") != "2" {
			t.Errorf("recovery's dispatch: decision %q actor %q attempt %q", dispatch.Tag("connhost.decision"), dispatch.Tag("connhost.actor"), dispatch.Tag("connhost.attempt"))
		}
		wasm := one(t, spans, spanWasm, func(s testenv.JaegerSpan) bool { return s.Parent() == rec.SpanID && s.Tag("connhost.attempt") == "2" })
		provider := one(t, spans, spanProvider, func(s testenv.JaegerSpan) bool { return s.Parent() == wasm.SpanID })
		one(t, spans, spanOutcome, func(s testenv.JaegerSpan) bool {
			return s.Parent() == rec.SpanID && s.Tag("connhost.state") == "succeeded"
		})
		// Both attempts reached the provider in the runtime's trace, with
		// one key; the retry's request is the child of its span.
		var inTrace []stripe.Traced
		for _, tr := range sb.Payments().Traces() {
			if traceOf(tr.Traceparent) == traceID {
				inTrace = append(inTrace, tr)
			}
		}
		if len(inTrace) != 2 || inTrace[0].IdempotencyKey != key || inTrace[1].IdempotencyKey != key {
			t.Fatalf("the provider saw %d requests in trace %s (want 2 with key %s): %+v", len(inTrace), traceID, key, inTrace)
		}
		if parentOf(inTrace[1].Traceparent) != provider.SpanID {
			t.Errorf("the retry's traceparent %s: want the parent %s (its provider request span)", inTrace[1].Traceparent, provider.SpanID)
		}
		if _, ok := byID[parentOf(inTrace[0].Traceparent)]; ok {
			t.Logf("the killed attempt's provider span was exported before the kill")
		}
		noArgumentValues(t, spans)
		restarted.stop(t)
		t.Logf("crash: recovery joined trace %s (%d spans) in %v", traceID, len(spans), time.Since(began).Round(time.Millisecond))
	})
	t.Logf("whole test, Jaeger start included: %v", time.Since(began).Round(time.Millisecond))
}

// checkGatedTree checks the tree of a gated payment in spans, under the
// runtime's span rootID: the server's span (named server…) → execute_tool →
// the intent write; the approval, a child of that execute_tool; the call
// sent again: the server's span → execute_tool → the dispatch write, the
// wasm call → the provider request (the emulator received its
// traceparent) → the outcome write. It returns the chain it found.
func checkGatedTree(t *testing.T, spans []testenv.JaegerSpan, rootID, server string, provider *stripe.Server, traceID string) string {
	t.Helper()
	servers := all(spans, func(s testenv.JaegerSpan) bool {
		return strings.HasPrefix(s.OperationName, server) && s.Parent() == rootID
	})
	if len(servers) != 2 {
		t.Fatalf("want 2 server spans %q under the runtime's span %s, got %d:\n%s", server, rootID, len(servers), describe(spans))
	}
	var first, again testenv.JaegerSpan // the execute_tool spans of the two requests
	for _, sv := range servers {
		ex := one(t, spans, spanExecute, func(s testenv.JaegerSpan) bool { return s.Parent() == sv.SpanID })
		if ex.Tag("gen_ai.tool.call.id") == "" || ex.Tag("gen_ai.operation.name") != "execute_tool" || ex.Tag("connhost.execution.id") == "" {
			t.Errorf("execute_tool attributes: %+v", ex.Tags)
		}
		if ex.Tag("connhost.state") == "awaiting_approval" {
			first = ex
		} else {
			again = ex
		}
	}
	if first.SpanID == "" || again.SpanID == "" || again.Tag("connhost.state") != "succeeded" {
		t.Fatalf("want the first execute_tool awaiting_approval and the second succeeded:\n%s", describe(spans))
	}
	intent := one(t, spans, spanIntent, func(s testenv.JaegerSpan) bool {
		return s.Parent() == first.SpanID && s.Tag("connhost.state") == "awaiting_approval" && s.Tag("connhost.ledger.durability") == "synced"
	})
	// The fsync the intent's synced write waited for.
	one(t, spans, spanSync, func(s testenv.JaegerSpan) bool { return s.Parent() == intent.SpanID })
	approve := one(t, spans, spanApprove, func(s testenv.JaegerSpan) bool { return s.Parent() == first.SpanID })
	if len(approve.Links()) == 0 {
		t.Errorf("the approval has no link to the reviewer's request: %+v", approve.References)
	}
	one(t, spans, spanDispatch, func(s testenv.JaegerSpan) bool {
		return s.Parent() == again.SpanID && s.Tag("connhost.decision") == "dispatch"
	})
	wasm := one(t, spans, spanWasm, func(s testenv.JaegerSpan) bool { return s.Parent() == again.SpanID })
	req := one(t, spans, spanProvider, func(s testenv.JaegerSpan) bool {
		return s.Parent() == wasm.SpanID && s.Tag("http.request.method") == "POST" && s.Tag("http.response.status_code") == "200"
	})
	if !slices.ContainsFunc(provider.Traces(), func(tr stripe.Traced) bool {
		return traceOf(tr.Traceparent) == traceID && parentOf(tr.Traceparent) == req.SpanID && !tr.Baggage
	}) {
		t.Errorf("the emulator received no request whose traceparent is the provider request span %s of trace %s: %+v", req.SpanID, traceID, provider.Traces())
	}
	one(t, spans, spanOutcome, func(s testenv.JaegerSpan) bool {
		return s.Parent() == again.SpanID && s.Tag("connhost.state") == "succeeded"
	})
	return "runtime → " + server + " → execute_tool → intent; approval; " + server + " → execute_tool → dispatch, wasm call → provider request → emulator; outcome"
}

// noArgumentValues fails if a span's attribute holds one of the payment's
// argument values.
func noArgumentValues(t *testing.T, spans []testenv.JaegerSpan) {
	t.Helper()
	for _, s := range spans {
		for _, tag := range s.Tags {
			v := fmt.Sprint(tag.Value)
			if strings.Contains(v, "4242") || strings.Contains(v, "pm_card_visa") || strings.Contains(v, "secret-description-xyz") || strings.Contains(v, "sk_test") {
				t.Errorf("span %s attribute %s holds an argument value or secret: %q", s.OperationName, tag.Key, v)
			}
		}
	}
}

// waitTrace polls Jaeger until trace traceID holds a span of each of
// names (spans are exported in batches), and returns its spans.
func waitTrace(t *testing.T, j *testenv.Jaeger, traceID string, names ...string) []testenv.JaegerSpan {
	t.Helper()
	deadline := time.Now().Add(processBound)
	for {
		spans, err := j.Trace(traceID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(names, func(n string) bool {
			return !slices.ContainsFunc(spans, func(s testenv.JaegerSpan) bool { return s.OperationName == n })
		}) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s lacks spans %v after %v:\n%s", traceID, names, processBound, describe(spans))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func all(spans []testenv.JaegerSpan, match func(testenv.JaegerSpan) bool) []testenv.JaegerSpan {
	var out []testenv.JaegerSpan
	for _, s := range spans {
		if match(s) {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span named name that match accepts, failing the
// test unless there is exactly one.
func one(t *testing.T, spans []testenv.JaegerSpan, name string, match func(testenv.JaegerSpan) bool) testenv.JaegerSpan {
	t.Helper()
	found := all(spans, func(s testenv.JaegerSpan) bool { return s.OperationName == name && match(s) })
	if len(found) != 1 {
		t.Fatalf("want one %s span where expected, found %d:\n%s", name, len(found), describe(spans))
	}
	return found[0]
}

func spansByID(spans []testenv.JaegerSpan) map[string]testenv.JaegerSpan {
	m := map[string]testenv.JaegerSpan{}
	for _, s := range spans {
		m[s.SpanID] = s
	}
	return m
}

// describe lists spans as "service name id ← parent [attributes]".
func describe(spans []testenv.JaegerSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %q %s ← %s", s.Service, s.OperationName, s.SpanID, s.Parent())
		for _, tag := range s.Tags {
			if strings.HasPrefix(tag.Key, "connhost.") || strings.HasPrefix(tag.Key, "http.") {
				fmt.Fprintf(&b, " %s=%v", tag.Key, tag.Value)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// traceOf and parentOf split a traceparent (version-trace-parent-flags).
func traceOf(tp string) string {
	if p := strings.Split(tp, "-"); len(p) == 4 {
		return p[1]
	}
	return ""
}

func parentOf(tp string) string {
	if p := strings.Split(tp, "-"); len(p) == 4 {
		return p[2]
	}
	return ""
}

// firstAttemptKey is the idempotency key of the one request of trace
// traceID the provider received before the kill.
func firstAttemptKey(t *testing.T, p *stripe.Server, traceID string) string {
	t.Helper()
	for _, tr := range p.Traces() {
		if traceOf(tr.Traceparent) == traceID {
			return tr.IdempotencyKey
		}
	}
	t.Fatalf("the provider received no request in trace %s before the kill", traceID)
	return ""
}

// runtimeTracer is the agent runtime's tracing: its spans go to the same
// backend, synchronously, as service agent-runtime.
func runtimeTracer(t *testing.T, endpoint string) trace.Tracer {
	t.Helper()
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(endpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "agent-runtime"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("agent-runtime")
}

// installPayments writes the shipped payments connector's module and its
// manifest, pinned to it, into mods and mans.
func installPayments(t *testing.T, ctx context.Context, mods, mans string) {
	t.Helper()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	wasm, digest, err := wasmbuild.Cached(ctx, "plugins/payments")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{mods, mans} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(wasm)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mods, "payments.wasm", string(b))
	src, err := os.ReadFile(filepath.Join(root, "manifests", "payments.toml"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := manifests.SetSHA256(src, digest)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, mans, "payments.toml", string(pinned))
}

// structured is a tools/call result's structured content.
func structured(t *testing.T, res *mcp.CallToolResult, err error) map[string]any {
	t.Helper()
	if err != nil || res == nil {
		t.Fatalf("tools/call: %v", err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if sc == nil {
		t.Fatalf("tools/call: no structured content: %+v", res)
	}
	return sc
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// apiClient calls the HTTP API, with the trace context of the context it
// is given in the request's headers (as a traced runtime would send it).
type apiClient struct {
	t    *testing.T
	base string
}

func (a *apiClient) send(ctx context.Context, token, path string, body any) ([]byte, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", a.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("POST %s: %s %s", path, resp.Status, out)
	}
	return out, err
}

func (a *apiClient) post(ctx context.Context, token, path string, body, out any) {
	a.t.Helper()
	b, err := a.send(ctx, token, path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		a.t.Fatalf("POST %s: %v: %s", path, err, b)
	}
}

func (a *apiClient) get(token, path, accept string) string {
	a.t.Helper()
	req, _ := http.NewRequest("GET", a.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
