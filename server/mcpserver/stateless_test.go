package mcpserver_test

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// Protocol 2026-07-28 over /mcp: stateless (no initialize, no
// Mcp-Session-Id), identity from _meta, approval as an input request
// whose requestState is single-use in the ledger. The client is the
// official Go SDK's, in its 2026-07-28 mode.

// modern is the stateless protocol revision.
const modern = "2026-07-28"

// wireLog records what an HTTP client sent and was answered.
type wireLog struct {
	next http.RoundTripper
	tok  string

	mu       sync.Mutex
	methods  []string // Mcp-Method of every request
	versions []string // Mcp-Protocol-Version of every request
	sessions []string // Mcp-Session-Id of every answer that carried one
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+l.tok)
	l.mu.Lock()
	l.methods = append(l.methods, r.Header.Get("Mcp-Method"))
	l.versions = append(l.versions, r.Header.Get("Mcp-Protocol-Version"))
	l.mu.Unlock()
	resp, err := l.next.RoundTrip(r)
	if err == nil && resp.Header.Get("Mcp-Session-Id") != "" {
		l.mu.Lock()
		l.sessions = append(l.sessions, resp.Header.Get("Mcp-Session-Id"))
		l.mu.Unlock()
	}
	return resp, err
}

// modernClient connects the SDK's client in its 2026-07-28 mode to the
// HTTP fixture as the principal of tok. manual turns the SDK's automatic
// multi round trip off, so that the test answers input requests itself.
func (f *fixture) modernClient(tok string, elicit func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error), manual bool) (*mcp.ClientSession, *wireLog) {
	t := f.t
	t.Helper()
	opts := &mcp.ClientOptions{ElicitationHandler: elicit}
	if manual {
		opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "connhost-test", Version: "0"}, opts)
	wl := &wireLog{next: http.DefaultTransport, tok: tok}
	tr := &mcp.StreamableClientTransport{Endpoint: f.srv.URL + "/mcp", HTTPClient: &http.Client{Transport: wl}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: modern})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	require.Equal(t, modern, cs.InitializeResult().ProtocolVersion, "the server serves 2026-07-28 over HTTP")
	return cs, wl
}

// rawCall sends one tools/call and returns its result or error as
// answered (no automatic multi round trip).
func rawCall(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp := *p
	cp.Meta = maps.Clone(p.Meta)
	return cs.CallTool(ctx, &cp)
}

// TestModernGatedPayment: a 2026-07-28 client completes a gated payment
// over /mcp without initialize or a session: the call answers with an
// input request, rita (an approver) accepts it in her client, the client
// sends the call again with the answer and the requestState, and the
// payment is made once at the provider. The decision is rita's, and the
// ledger records the state's nonce with it.
func TestModernGatedPayment(t *testing.T) {
	f := newFixture(t, overHTTP)
	accept := &approvalHandler{action: "accept"}
	cs, wl := f.modernClient(tokenRita, accept.handle, false)
	before := charges()
	res, out := callTool(t, cs, "payments.create_payment", payment, ids("s-modern", "c1"))
	require.False(t, res.IsError, text(res))
	require.Equal(t, "succeeded", out.Status)
	require.Equal(t, 1, accept.count(), "asked once, through an input request")
	require.Equal(t, before+1, charges())

	wl.mu.Lock()
	require.NotContains(t, wl.methods, "initialize")
	require.Empty(t, wl.sessions, "no Mcp-Session-Id")
	for _, v := range wl.versions {
		require.Equal(t, modern, v)
	}
	wl.mu.Unlock()

	rec, _, err := f.ex.Get(context.Background(), out.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, "rita", rec.Approval.By)
	require.NotEmpty(t, rec.Approval.StateNonce, "the decision consumed the request state")
	approved := decisionEvent(t, f.events(out.ExecutionID), "approved")
	require.Equal(t, "rita", approved.Actor)

	// The same ids under a new JSON-RPC request id (what a client does
	// after a broken stream): the same execution, its recorded outcome.
	_, again := callTool(t, cs, "payments.create_payment", payment, ids("s-modern", "c1"))
	require.Equal(t, out.ExecutionID, again.ExecutionID)
	require.True(t, again.Recorded)
	require.Equal(t, before+1, charges())
}

// inputRound makes a gated call and returns its input request's state:
// the first round of the multi round trip, nothing decided.
func inputRound(t testing.TB, cs *mcp.ClientSession, p *mcp.CallToolParams) string {
	t.Helper()
	res, err := rawCall(t, cs, p)
	require.NoError(t, err)
	require.True(t, res.NeedsInput(), "an input request: %s", text(res))
	require.Contains(t, res.InputRequests, "connhost_approval")
	require.NotEmpty(t, res.RequestState)
	return res.RequestState
}

// answer is p answered with action through state.
func answer(p *mcp.CallToolParams, state, action string) *mcp.CallToolParams {
	cp := *p
	cp.RequestState = state
	cp.InputResponses = mcp.InputResponseMap{"connhost_approval": &mcp.ElicitResult{Action: action}}
	return &cp
}

// TestModernReplayedStateApprovesNothing: the answer to an input request
// decides once. Sent again with the same requestState (a replay: a client
// retrying, or whoever copied the request), accept or decline, before or
// after the call ran, it decides nothing and does nothing: the answer is
// the call's recorded outcome and says the state was used.
func TestModernReplayedStateApprovesNothing(t *testing.T) {
	f := newFixture(t, overHTTP)
	cs, _ := f.modernClient(tokenRita, (&approvalHandler{action: "accept"}).handle, true)
	before := charges()

	pay := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: ids("s-replay", "c1")}
	state := inputRound(t, cs, pay)
	res, err := rawCall(t, cs, answer(pay, state, "accept"))
	require.NoError(t, err)
	out := structured(t, res)
	require.Equal(t, "succeeded", out.Status, text(res))
	require.Equal(t, before+1, charges())

	for _, action := range []string{"accept", "decline"} {
		res, err = rawCall(t, cs, answer(pay, state, action))
		require.NoError(t, err)
		again := structured(t, res)
		require.Equal(t, "succeeded", again.Status, text(res))
		require.True(t, again.Recorded)
		require.Contains(t, text(res), "this requestState was used already")
		require.Equal(t, before+1, charges(), "a replayed %s did nothing", action)
	}

	// Declined, then replayed as accepted: still rejected, never charged.
	refund := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: ids("s-replay", "c2")}
	state = inputRound(t, cs, refund)
	res, err = rawCall(t, cs, answer(refund, state, "decline"))
	require.NoError(t, err)
	require.Equal(t, "rejected", structured(t, res).Status)
	res, err = rawCall(t, cs, answer(refund, state, "accept"))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Equal(t, "rejected", structured(t, res).Status)
	require.Contains(t, text(res), "this requestState was used already")
	require.Equal(t, before+1, charges())
	evs := f.events(structured(t, res).ExecutionID)
	require.Equal(t, "rejected", evs[len(evs)-1].Decision, "nothing was recorded after the rejection")
}

// TestModernForeignStateRefused: a requestState that the server did not
// issue for this call and this principal decides nothing: altered,
// presented with another call's ids, presented by another approver, or
// made up. Each is a JSON-RPC invalid params error; the call it names
// still waits for its approval and nothing is charged.
func TestModernForeignStateRefused(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{principals: []httpapi.Principal{
		{Name: "vera", Roles: []httpapi.Role{httpapi.RoleRuntime, httpapi.RoleApprover}, Token: "tok-vera"},
	}})
	rita, _ := f.modernClient(tokenRita, (&approvalHandler{action: "accept"}).handle, true)
	vera, _ := f.modernClient("tok-vera", (&approvalHandler{action: "accept"}).handle, true)
	before := charges()

	a := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: ids("s-foreign", "a")}
	b := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: ids("s-foreign", "b")}
	stateA := inputRound(t, rita, a)
	inputRound(t, rita, b)

	altered := []byte(stateA)
	altered[len(altered)/3] ^= 1
	for _, tt := range []struct {
		name string
		cs   *mcp.ClientSession
		p    *mcp.CallToolParams
		want string
	}{
		{"altered", rita, answer(a, string(altered), "accept"), "requestState"},
		{"another call's", rita, answer(b, stateA, "accept"), "issued for another call"},
		{"another approver's", vera, answer(a, stateA, "accept"), "does not verify with the key of this principal"},
		{"made up", rita, answer(a, "eyJhIjoiYXBfeCJ9.AAAA", "accept"), "requestState"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rawCall(t, tt.cs, tt.p)
			var rpcErr *jsonrpc.Error
			require.True(t, errors.As(err, &rpcErr), "a JSON-RPC error, got %v", err)
			require.Equal(t, int64(jsonrpc.CodeInvalidParams), rpcErr.Code)
			require.Contains(t, rpcErr.Message, tt.want)
			require.Contains(t, rpcErr.Message, "nothing was done or decided")
		})
	}
	for _, p := range []*mcp.CallToolParams{a, b} {
		rec, err := f.ex.Ledger().Get(context.Background(), executionOf(p))
		require.NoError(t, err)
		require.Equal(t, "awaiting_approval", string(rec.State), "nothing decided %s", p.Meta)
	}
	require.Equal(t, before, charges())

	// The state still answers its own call, once.
	res, err := rawCall(t, rita, answer(a, stateA, "accept"))
	require.NoError(t, err)
	require.Equal(t, "succeeded", structured(t, res).Status, text(res))
	require.Equal(t, before+1, charges())
}

// TestModernStateSurvivesRestart: the input request is answered after
// the server restarted (a new process with a new random key, the same
// ledger and principals): the state verifies with the key derived from
// rita's token, the call runs once. Used, it is refused as used by the
// next process too.
func TestModernStateSurvivesRestart(t *testing.T) {
	f := newFixture(t, overHTTP)
	cs, _ := f.modernClient(tokenRita, (&approvalHandler{action: "accept"}).handle, true)
	before := charges()
	pay := &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: ids("s-restart", "c1")}
	state := inputRound(t, cs, pay)

	f.restart()
	cs, _ = f.modernClient(tokenRita, (&approvalHandler{action: "accept"}).handle, true)
	res, err := rawCall(t, cs, answer(pay, state, "accept"))
	require.NoError(t, err)
	require.Equal(t, "succeeded", structured(t, res).Status, text(res))
	require.Equal(t, before+1, charges())

	f.restart()
	cs, _ = f.modernClient(tokenRita, (&approvalHandler{action: "accept"}).handle, true)
	res, err = rawCall(t, cs, answer(pay, state, "accept"))
	require.NoError(t, err)
	require.True(t, structured(t, res).Recorded)
	require.Contains(t, text(res), "this requestState was used already")
	require.Equal(t, before+1, charges())
}

// TestModernAndLegacyTogether: a 2025-11-25 client keeps its stateful
// session (initialize, Mcp-Session-Id, elicitation/create during the
// call) beside 2026-07-28 clients on the same /mcp.
func TestModernAndLegacyTogether(t *testing.T) {
	f := newFixture(t, overHTTP)
	accept := &approvalHandler{action: "accept"}
	old := f.client(clientOpts{approver: true, version: legacy, client: &mcp.ClientOptions{ElicitationHandler: accept.handle}})
	require.Equal(t, legacy, old.InitializeResult().ProtocolVersion)
	require.NotEmpty(t, old.ID(), "a stateful session")
	res, out := callTool(t, old, "gated.echo", map[string]any{"msg": "old"}, ids("s-both", "c1"))
	require.Equal(t, "succeeded", out.Status, text(res))

	cs, _ := f.modernClient(tokenRita, accept.handle, false)
	// The modern client finds the execution the legacy one made.
	_, again := callTool(t, cs, "gated.echo", map[string]any{"msg": "old"}, ids("s-both", "c1"))
	require.Equal(t, out.ExecutionID, again.ExecutionID)
	require.True(t, again.Recorded)
	res, out = callTool(t, cs, "gated.echo", map[string]any{"msg": "new"}, ids("s-both", "c2"))
	require.Equal(t, "succeeded", out.Status, text(res))
	require.Equal(t, 2, accept.count())
	require.True(t, strings.HasPrefix(out.ExecutionID, "ex_"))
}

func executionOf(p *mcp.CallToolParams) string {
	return ledger.ExecutionID(ledger.DefaultNamespace, p.Meta[mcpserver.MetaSessionID].(string), p.Meta[mcpserver.MetaToolCallID].(string))
}

// TestModernPerRequestIdentityIsItsOwnSession: a stateless request without
// ids has no connection to group its calls by; each such call is a
// session of its own, not one session of the whole process, where one
// client's call was held as another client's duplicate and one's
// recovery_required fenced every client.
func TestModernPerRequestIdentityIsItsOwnSession(t *testing.T) {
	f := newFixture(t, overHTTP)
	cs, _ := f.modernClient(tokenRuntime, nil, false)
	other, _ := f.modernClient(tokenRuntime, nil, false)
	_, a := callTool(t, cs, "noop_echo", map[string]any{"msg": "same"}, nil)
	_, b := callTool(t, other, "noop_echo", map[string]any{"msg": "same"}, nil)
	require.Equal(t, "succeeded", a.Status)
	require.Equal(t, "succeeded", b.Status)
	require.Equal(t, mcpserver.IdentityPerRequest, a.Identity)
	require.NotEqual(t, a.SessionID, b.SessionID, "two stateless requests share no session")
	require.True(t, strings.HasPrefix(a.SessionID, "mcp:request-"), a.SessionID)
}
