package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
	"github.com/connhost/connhost/server/tooldefs"
)

// legacy is the newest protocol revision in which the server asks for
// approval with elicitation/create during the call; later ones answer
// with input requests (multi round trip).
const legacy = "2025-11-25"

var payment = map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"}

func ids(session, toolCall string) mcp.Meta {
	return mcp.Meta{mcpserver.MetaSessionID: session, mcpserver.MetaToolCallID: toolCall}
}

// callTool calls a tool and decodes the structuredContent every result
// carries.
func callTool(t testing.TB, cs *mcp.ClientSession, tool string, args any, meta mcp.Meta) (*mcp.CallToolResult, mcpserver.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The SDK adds its own keys to the request's _meta map: a copy keeps
	// one client's capabilities out of the next client's calls.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args, Meta: maps.Clone(meta)})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res, structured(t, res)
}

func structured(t testing.TB, res *mcp.CallToolResult) mcpserver.Result {
	t.Helper()
	if res.StructuredContent == nil {
		t.Fatalf("result without structuredContent: %+v", res)
	}
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var r mcpserver.Result
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&r), "structuredContent %s", b)
	return r
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// events returns an execution's audit trail. Over stdio the client must
// be closed first (the process holds the ledger).
func (f *fixture) events(execID string) []ledger.Event {
	t := f.t
	t.Helper()
	if f.ex != nil {
		_, evs, err := f.ex.Get(context.Background(), execID)
		require.NoError(t, err)
		return evs
	}
	led, err := ledger.Open(context.Background(), ledger.Options{
		Dir: filepath.Join(f.data, "ledger"), Create: ledger.CreateNever, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	defer led.Close()
	evs, err := led.Events(context.Background(), execID)
	require.NoError(t, err)
	return evs
}

func eachTransport(t *testing.T, f func(t *testing.T, kind transport)) {
	for _, kind := range transports {
		t.Run(string(kind), func(t *testing.T) { f(t, kind) })
	}
}

// TestListTools: tools/list is the manifests' operations as tooldefs
// renders them for MCP, with title, schema, annotations and _meta.
func TestListTools(t *testing.T) {
	ms, err := manifests.LoadDir(shared.manifests)
	require.NoError(t, err)
	want, err := tooldefs.MCPTools(ms)
	require.NoError(t, err)
	eachTransport(t, func(t *testing.T, kind transport) {
		cs := newFixture(t, kind).client(clientOpts{})
		res, err := cs.ListTools(context.Background(), nil)
		require.NoError(t, err)
		require.Len(t, res.Tools, len(want))
		byName := map[string]*mcp.Tool{}
		for _, tl := range res.Tools {
			byName[tl.Name] = tl
		}
		for _, w := range want {
			got := byName[w.Name]
			require.NotNil(t, got, "tool %s not listed", w.Name)
			require.Equal(t, w.Title, got.Title)
			require.Equal(t, w.Description, got.Description)
			var schema any
			require.NoError(t, json.Unmarshal(w.InputSchema, &schema))
			require.Equal(t, schema, got.InputSchema, "%s inputSchema", w.Name)
			require.NotNil(t, got.Annotations)
			require.Equal(t, w.Annotations.ReadOnlyHint, got.Annotations.ReadOnlyHint, w.Name)
			require.Equal(t, w.Annotations.IdempotentHint, got.Annotations.IdempotentHint, w.Name)
			require.Equal(t, w.Annotations.DestructiveHint, *got.Annotations.DestructiveHint, w.Name)
			require.Equal(t, w.Annotations.OpenWorldHint, *got.Annotations.OpenWorldHint, w.Name)
			require.Equal(t, w.Meta[tooldefs.MetaRequiresApproval], got.Meta[tooldefs.MetaRequiresApproval], w.Name)
		}
		pay := byName["payments_create_payment"]
		require.Equal(t, "Payments: create payment (needs approval)", pay.Title)
		require.False(t, pay.Annotations.ReadOnlyHint)
		require.True(t, *pay.Annotations.DestructiveHint)
		require.True(t, *pay.Annotations.OpenWorldHint)
		require.Equal(t, "idempotent-retry", pay.Meta[tooldefs.MetaRecovery])
		echo := byName["noop_echo"]
		require.True(t, echo.Annotations.ReadOnlyHint)
		require.True(t, echo.Annotations.IdempotentHint)
		require.False(t, *echo.Annotations.OpenWorldHint, "noop reaches no host")
	})
}

// TestReadCall: a read answers succeeded with its result. Without _meta
// ids the identity holds for one request: a second identical call is
// another execution and the audit trail says so (a read needs no warning:
// it has nothing to duplicate); with ids, the second call returns the
// recorded outcome, and the audit trail names the keys.
func TestReadCall(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		f := newFixture(t, kind)
		cs := f.client(clientOpts{})
		args := map[string]any{"msg": "hi"}
		res, out := callTool(t, cs, "noop.echo", args, nil)
		require.False(t, res.IsError, text(res))
		require.Equal(t, "succeeded", out.Status)
		require.JSONEq(t, `{"msg":"hi"}`, string(out.Result.Result))
		require.Equal(t, mcpserver.IdentityPerRequest, out.Identity)
		require.True(t, strings.HasPrefix(out.SessionID, "mcp:"), out.SessionID)
		require.True(t, strings.HasPrefix(out.ToolCallID, "mcp-req:"), out.ToolCallID)
		require.NotContains(t, text(res), "Warning")
		_, again := callTool(t, cs, "noop.echo", args, nil)
		require.NotEqual(t, out.ToolCallID, again.ToolCallID)
		require.NotEqual(t, out.ExecutionID, again.ExecutionID)
		require.False(t, again.Recorded)

		res, first := callTool(t, cs, "noop.echo", args, ids("s-read", "call_1"))
		require.False(t, res.IsError)
		require.Equal(t, mcpserver.IdentityClient, first.Identity)
		require.Equal(t, ledger.ExecutionID(ledger.DefaultNamespace, "s-read", "call_1"), first.ExecutionID)
		require.NotContains(t, text(res), "Warning")
		_, second := callTool(t, cs, "noop.echo", args, ids("s-read", "call_1"))
		require.True(t, second.Recorded, "the same ids return the recorded outcome")
		require.Equal(t, first.ExecutionID, second.ExecutionID)

		require.NoError(t, cs.Close())
		evs := f.events(out.ExecutionID)
		require.Contains(t, evs[0].Reason, "identity derived for this request only")
		require.Equal(t, "mcp: identity from _meta io.connhost/session_id and io.connhost/tool_call_id", f.events(first.ExecutionID)[0].Reason)
	})
}

// TestGatedPayment: a gated payment answers awaiting_approval (not an
// error) to a runtime that may not approve; once a reviewer approved, the
// same call (same _meta ids) charges once, and a further call returns the
// same receipt without a second charge.
func TestGatedPayment(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		f := newFixture(t, kind)
		before := charges()
		meta := ids("s-pay-"+string(kind), "call_1")
		cs := f.client(clientOpts{})
		res, out := callTool(t, cs, "payments.create_payment", payment, meta)
		require.False(t, res.IsError, text(res))
		require.Equal(t, "awaiting_approval", out.Status)
		require.NotNil(t, out.Approval)
		require.Contains(t, text(res), "A human must approve this call")
		require.Contains(t, text(res), "Do not issue this call again")
		require.NotContains(t, text(res), "_meta", "a model cannot set _meta")
		require.Contains(t, text(res), out.Approval.ID)
		require.Contains(t, text(res), out.Approval.ArgsDigest)
		require.Equal(t, before, charges())

		switch kind {
		case overHTTP:
			// A reviewer approves through the HTTP API with a token of
			// their own; the runtime re-issues the call.
			body := fmt.Sprintf(`{"digest":%q}`, out.Approval.ArgsDigest)
			req, _ := http.NewRequest("POST", f.srv.URL+"/v1/approvals/"+out.Approval.ID+"/approve", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+tokenApprover)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
		case overStdio:
			// The ledger belongs to the running process: the user
			// approves in the client's dialog.
			require.NoError(t, cs.Close())
			cs = f.client(clientOpts{approver: true, client: &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					return &mcp.ElicitResult{Action: "accept"}, nil
				},
			}})
		}
		res, done := callTool(t, cs, "payments.create_payment", payment, meta)
		require.False(t, res.IsError, text(res))
		require.Equal(t, "succeeded", done.Status)
		require.True(t, strings.HasPrefix(done.Receipt, "pi_"), done.Receipt)
		require.Equal(t, before+1, charges())

		res, again := callTool(t, cs, "payments.create_payment", payment, meta)
		require.False(t, res.IsError)
		require.Equal(t, done.Receipt, again.Receipt)
		require.True(t, again.Recorded)
		require.Contains(t, text(res), "nothing was done again")
		require.Equal(t, before+1, charges(), "a second call charges nothing")
	})
}

// TestIntentMismatch: the same ids with other arguments are refused with
// isError and the problem code; nothing runs.
func TestIntentMismatch(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		cs := newFixture(t, kind).client(clientOpts{})
		res, first := callTool(t, cs, "plain.echo", map[string]any{"msg": "a"}, ids("s1", "c1"))
		require.False(t, res.IsError)
		res, out := callTool(t, cs, "plain.echo", map[string]any{"msg": "b"}, ids("s1", "c1"))
		require.True(t, res.IsError)
		require.Equal(t, "refused", out.Status)
		require.Equal(t, httpapi.CodeIntentMismatch, out.Code)
		require.Equal(t, first.ExecutionID, out.ExecutionID)
		require.NotNil(t, out.Problem)
		require.NotEqual(t, out.Problem.RecordedDigest, out.Problem.GivenDigest)
		require.Contains(t, text(res), "intent_mismatch")
	})
}

// TestFencedSession: a resumed call in a session the ledger does not
// know is recovery_required (isError, code recovery_required), and the
// session is fenced: the next call is refused with session_fenced.
func TestFencedSession(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		cs := newFixture(t, kind).client(clientOpts{})
		meta := ids("old", "c1")
		meta[mcpserver.MetaResumed] = true
		res, out := callTool(t, cs, "plain.echo", map[string]any{"msg": "a"}, meta)
		require.True(t, res.IsError, text(res))
		require.Equal(t, "recovery_required", out.Status)
		require.Equal(t, httpapi.CodeRecoveryRequired, out.Code)
		require.Contains(t, text(res), "Outcome unknown")

		res, fenced := callTool(t, cs, "plain.echo", map[string]any{"msg": "b"}, ids("old", "c2"))
		require.True(t, res.IsError)
		require.Equal(t, httpapi.CodeSessionFenced, fenced.Code)
		require.Len(t, fenced.Problem.UncertainCalls, 1)
		require.Equal(t, out.ExecutionID, fenced.Problem.UncertainCalls[0].ExecutionID)
	})
}

// TestBadMeta: identity in _meta is checked as the HTTP API checks its
// fields; a malformed one is refused (isError, bad_request), not guessed.
func TestBadMeta(t *testing.T) {
	cs := newFixture(t, overHTTP).client(clientOpts{})
	for _, tt := range []struct {
		name string
		meta mcp.Meta
		want string
	}{
		{"session only", mcp.Meta{mcpserver.MetaSessionID: "s"}, "together"},
		{"number", mcp.Meta{mcpserver.MetaSessionID: "s", mcpserver.MetaToolCallID: 7}, "must be a string"},
		{"resumed alone", mcp.Meta{mcpserver.MetaResumed: true}, "cannot be resumed"},
		{"resumed not bool", mcp.Meta{mcpserver.MetaSessionID: "s", mcpserver.MetaToolCallID: "c", mcpserver.MetaResumed: "yes"}, "must be a boolean"},
		{"control character", ids("s", "c\x01"), "control character"},
		{"too long", ids("s", strings.Repeat("x", host.MaxIdentityBytes+1)), "at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, out := callTool(t, cs, "noop.echo", map[string]any{}, tt.meta)
			require.True(t, res.IsError)
			require.Equal(t, httpapi.CodeBadRequest, out.Code)
			require.Contains(t, text(res), tt.want)
		})
	}
	// Arguments never carry the identity: the same ids with a key inside
	// the arguments are refused by the schema, not taken.
	res, out := callTool(t, cs, "noop.echo", map[string]any{"tool_call_id": "x"}, ids("s", "c"))
	require.True(t, res.IsError)
	require.Equal(t, httpapi.CodeInvalidArguments, out.Code)
}

// approvalHandler answers the approval dialog with action and records
// what it was shown.
type approvalHandler struct {
	action string
	mu     sync.Mutex
	asked  []*mcp.ElicitParams
}

func (h *approvalHandler) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	h.mu.Lock()
	h.asked = append(h.asked, req.Params)
	h.mu.Unlock()
	return &mcp.ElicitResult{Action: h.action, Content: map[string]any{"reason": "checked the amount"}}, nil
}

func (h *approvalHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.asked)
}

// variants are the transports and protocol revisions of the elicitation
// tests: stdio and HTTP with the SDK's latest revision (input requests;
// stateless over HTTP) and with the last revision of elicitation/create
// (stateful sessions over HTTP).
var variants = []struct {
	name    string
	kind    transport
	version string
}{
	{"stdio", overStdio, ""},
	{"stdio-" + legacy, overStdio, legacy},
	{"http", overHTTP, ""},
	{"http-" + legacy, overHTTP, legacy},
}

// TestElicitationApproveAndReject: a user who may approve sees the exact
// call in the client's dialog; accept approves it under the user's name
// and the call runs, decline rejects it, dismissing leaves it waiting.
// A runtime that may not approve is never asked.
func TestElicitationApproveAndReject(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			accept := &approvalHandler{action: "accept"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: accept.handle}})
			res, out := callTool(t, cs, "gated.echo", map[string]any{"msg": "ship it"}, ids("s-el", "c1"))
			require.False(t, res.IsError, text(res))
			require.Equal(t, "succeeded", out.Status)
			require.JSONEq(t, `{"msg":"ship it"}`, string(out.Result.Result))
			require.Equal(t, 1, accept.count(), "asked once")
			shown := accept.asked[0]
			require.Contains(t, shown.Message, "gated.echo")
			require.Contains(t, shown.Message, "\n  msg = \"ship it\"\n")
			require.Contains(t, shown.Message, out.Approval.ArgsDigest)
			require.Contains(t, shown.Message, out.Approval.ExpiresAt.UTC().Format(time.RFC3339))
			require.Equal(t, out.Approval.ID, shown.Meta[mcpserver.MetaApprovalID])

			// The same ids again: the recorded outcome, nobody asked.
			_, again := callTool(t, cs, "gated.echo", map[string]any{"msg": "ship it"}, ids("s-el", "c1"))
			require.True(t, again.Recorded)
			require.Equal(t, 1, accept.count())
			require.NoError(t, cs.Close())

			decline := &approvalHandler{action: "decline"}
			cs = f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
			res, rej := callTool(t, cs, "gated.echo", map[string]any{"msg": "no"}, ids("s-el", "c2"))
			require.True(t, res.IsError, text(res))
			require.Equal(t, "rejected", rej.Status)
			require.Equal(t, 1, decline.count())
			require.NoError(t, cs.Close())

			dismiss := &approvalHandler{action: "cancel"}
			cs = f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: dismiss.handle}})
			res, waiting := callTool(t, cs, "gated.echo", map[string]any{"msg": "later"}, ids("s-el", "c3"))
			require.False(t, res.IsError)
			require.Equal(t, "awaiting_approval", waiting.Status)
			require.Contains(t, text(res), "dismissed")
			require.NoError(t, cs.Close())

			never := &approvalHandler{action: "accept"}
			cs = f.client(clientOpts{approver: false, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: never.handle}})
			res, notAsked := callTool(t, cs, "gated.echo", map[string]any{"msg": "runtime"}, ids("s-el", "c4"))
			require.False(t, res.IsError)
			require.Equal(t, "awaiting_approval", notAsked.Status)
			require.Zero(t, never.count(), "a runtime that may not approve is never asked")
			require.NoError(t, cs.Close())

			approved := decisionEvent(t, f.events(out.ExecutionID), "approved")
			require.Equal(t, "rita", approved.Actor)
			require.Equal(t, "approved in the MCP client's dialog: checked the amount", approved.Reason)
			rejected := decisionEvent(t, f.events(rej.ExecutionID), "rejected")
			require.Equal(t, "rita", rejected.Actor)
		})
	}
}

func decisionEvent(t testing.TB, evs []ledger.Event, decision string) ledger.Event {
	t.Helper()
	for _, ev := range evs {
		if ev.Decision == decision {
			return ev
		}
	}
	t.Fatalf("no %s event in %+v", decision, evs)
	return ledger.Event{}
}

// TestCancellation: a client that cancels a call while it waits (here,
// for the user's answer in the approval dialog) cancels the execution, as
// connhost cancel does; the same call afterwards answers cancelled.
func TestCancellation(t *testing.T) {
	for _, kind := range transports {
		t.Run(string(kind), func(t *testing.T) {
			f := newFixture(t, kind)
			asked := make(chan struct{}, 1)
			// The user never answers; the dialog closes when the server
			// withdraws it, or at the end of the test (over HTTP the
			// withdrawal has no stream left to travel on).
			closed := make(chan struct{})
			cs := f.client(clientOpts{approver: true, version: legacy, client: &mcp.ClientOptions{
				ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked <- struct{}{}
					select {
					case <-ctx.Done():
					case <-closed:
					}
					return &mcp.ElicitResult{Action: "cancel"}, nil
				},
			}})
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "gated.echo", Arguments: map[string]any{"msg": "x"}, Meta: ids("s-cancel", "c1")})
				errc <- err
			}()
			select {
			case <-asked:
			case <-time.After(2 * time.Minute):
				t.Fatal("the approval dialog was never opened")
			}
			cancel()
			require.ErrorIs(t, <-errc, context.Canceled)
			f.log.waitFor(t, "cancelled by the client")
			close(closed)

			res, out := callTool(t, cs, "gated.echo", map[string]any{"msg": "x"}, ids("s-cancel", "c1"))
			require.True(t, res.IsError, text(res))
			require.Equal(t, "cancelled", out.Status)
			require.NoError(t, cs.Close())
			ev := decisionEvent(t, f.events(out.ExecutionID), "cancelled")
			want := "rita"
			if kind == overStdio {
				want = mcpserver.DefaultStdioActor
			}
			require.Equal(t, want, ev.Actor)
		})
	}
}

// TestProgressOnRetries: a client that gave a progress token hears of
// each retry; the call still ends succeeded with one effect.
func TestProgressOnRetries(t *testing.T) {
	eachTransport(t, func(t *testing.T, kind transport) {
		var mu sync.Mutex
		var notes []string
		cs := newFixture(t, kind).client(clientOpts{client: &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				notes = append(notes, r.Params.Message)
				mu.Unlock()
			},
		}})
		before := shared.effect.total()
		shared.effect.failNext(2)
		meta := ids("s-progress-"+string(kind), "c1")
		meta["progressToken"] = "p1"
		res, out := callTool(t, cs, "effect.apply", map[string]any{"n": 1}, meta)
		require.False(t, res.IsError, text(res))
		require.Equal(t, "succeeded", out.Status)
		require.Equal(t, 3, out.Attempt)
		require.Equal(t, before+1, shared.effect.total())
		// Notifications sent before the answer arrive before it.
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, notes, 2, "%q", notes)
		require.Contains(t, notes[0], "attempt 1 did not complete")
		require.Contains(t, notes[1], "attempt 2 did not complete")
	})
}

// TestHTTPAuthentication: /mcp obeys the API's credentials: no token is
// 401, an approver without role runtime is 403, and a session belongs to
// the principal that opened it.
func TestHTTPAuthentication(t *testing.T) {
	f := newFixture(t, overHTTP)
	post := func(tok, session string) int {
		req, _ := http.NewRequest("POST", f.srv.URL+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 401, post("", ""))
	require.Equal(t, 403, post(tokenApprover, ""))
	require.Equal(t, 200, post(tokenRuntime, ""))

	cs := f.client(clientOpts{version: legacy}) // 2026-07-28 has no sessions
	require.NotEmpty(t, cs.ID())
	require.Equal(t, 403, post(tokenRita, cs.ID()), "another principal cannot use the runtime's session")
}

// TestToolsMatchHTTPAPI: the HTTP API's GET /v1/tools?format=mcp lists
// what /mcp lists.
func TestToolsMatchHTTPAPI(t *testing.T) {
	f := newFixture(t, overHTTP)
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/tools?format=mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tokenRuntime)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var api struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&api))
	res, err := f.client(clientOpts{}).ListTools(context.Background(), nil)
	require.NoError(t, err)
	var a, b []string
	for _, tl := range api.Tools {
		a = append(a, tl.Name)
	}
	for _, tl := range res.Tools {
		b = append(b, tl.Name)
	}
	slices.Sort(b)
	require.Equal(t, a, b)
}

// TestTenantsOverMCP: over /mcp a principal bound to a namespace calls
// tools in it; _meta naming another namespace is refused with the HTTP
// API's code and records nothing; its limits answer their codes.
func TestTenantsOverMCP(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{principals: []httpapi.Principal{
		{Name: "tenant-a", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-a", Namespaces: []string{"tenant-a"}},
		{Name: "tenant-b", Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: "tok-b", Namespaces: []string{"tenant-b"},
			Limits: httpapi.Limits{CallsPerSecond: 0.01, Burst: 1}},
	}})
	a := f.client(clientOpts{token: "tok-a"})
	b := f.client(clientOpts{token: "tok-b"})

	res, r := callTool(t, a, "payments.create_payment", payment, ids("a-s1", "pay-1"))
	require.False(t, res.IsError, text(res))
	require.Equal(t, "awaiting_approval", r.Status)
	require.Equal(t, "tenant-a", r.Namespace, "a call naming no namespace runs in the principal's")
	require.Equal(t, ledger.ExecutionID("tenant-a", "a-s1", "pay-1"), r.ExecutionID)

	meta := ids("a-s1", "b-1")
	meta[mcpserver.MetaNamespace] = "tenant-a"
	res, r = callTool(t, b, "payments.create_payment", payment, meta)
	require.True(t, res.IsError)
	require.Equal(t, httpapi.CodeNamespaceForbidden, r.Code, text(res))
	_, err := f.ex.Ledger().Get(context.Background(), ledger.ExecutionID("tenant-a", "a-s1", "b-1"))
	require.ErrorIs(t, err, ledger.ErrNotFound, "nothing was recorded")

	res, r = callTool(t, b, "payments.create_payment", payment, ids("a-s1", "b-2"))
	require.False(t, res.IsError, text(res))
	require.Equal(t, "tenant-b", r.Namespace)
	res, r = callTool(t, b, "payments.create_payment", payment, ids("a-s1", "b-3"))
	require.True(t, res.IsError)
	require.Equal(t, httpapi.CodeRateLimited, r.Code, text(res))
	require.Positive(t, r.Problem.RetryAfter)
	require.Contains(t, text(res), "call the tool again with the same arguments and ids in")
}
