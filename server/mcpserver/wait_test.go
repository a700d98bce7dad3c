package mcpserver_test

import (
	"context"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
)

// io.connhost/wait: a tools/call held open until a reviewer decides out
// of band, over /mcp in both protocol generations, as a runtime that may
// not approve (nobody is asked in the client).

// waitVersions are the protocol revisions the wait tests run in over HTTP.
var waitVersions = []string{modern, legacy}

// heldCall starts a gated payment with ids and io.connhost/wait and a
// progress token; decide is called with the approval once the server
// reports (by its first progress notification) that it holds the call.
// It returns the call's answer.
func heldCall(t *testing.T, f *fixture, version, session string, decide func(ap *ledger.Approval, digest string)) (*mcp.CallToolResult, mcpserver.Result) {
	t.Helper()
	held := make(chan struct{}, 1)
	cs := f.client(clientOpts{version: version, client: &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case held <- struct{}{}:
			default:
			}
		},
	}})
	meta := ids(session, "c1")
	meta[mcpserver.MetaWait] = 600
	meta["progressToken"] = "p-" + session
	type answer struct {
		res *mcp.CallToolResult
		out mcpserver.Result
	}
	done := make(chan answer, 1)
	go func() {
		res, out := callTool(t, cs, "payments.create_payment", payment, maps.Clone(meta))
		done <- answer{res, out}
	}()
	select {
	case <-held:
	case a := <-done:
		t.Fatalf("answered before it was held: %s", text(a.res))
	}
	rec, err := f.ex.Ledger().Get(context.Background(), ledger.ExecutionID(ledger.DefaultNamespace, session, "c1"))
	require.NoError(t, err)
	require.Equal(t, ledger.StateAwaitingApproval, rec.State)
	decide(rec.Approval, rec.ArgsDigest)
	a := <-done
	return a.res, a.out
}

// TestWaitApproved: a reviewer approves while the call is held: the same
// tools/call answers succeeded, one charge.
func TestWaitApproved(t *testing.T) {
	for _, v := range waitVersions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, overHTTP)
			before := charges()
			res, out := heldCall(t, f, v, "s-wait-ok-"+v, func(ap *ledger.Approval, digest string) {
				go func() {
					_, err := f.ex.Approve(context.Background(), ap.ID, host.Decision{By: "olga", ArgsDigest: digest})
					if err != nil {
						t.Errorf("approve: %v", err)
					}
				}()
			})
			require.False(t, res.IsError, text(res))
			require.Equal(t, "succeeded", out.Status)
			require.False(t, out.Recorded, "run in the held request")
			require.Equal(t, before+1, charges())
		})
	}
}

// TestWaitRejected: a reviewer rejects while the call is held: the same
// tools/call answers rejected, nothing is charged.
func TestWaitRejected(t *testing.T) {
	for _, v := range waitVersions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, overHTTP)
			before := charges()
			res, out := heldCall(t, f, v, "s-wait-no-"+v, func(ap *ledger.Approval, _ string) {
				go func() {
					if _, err := f.ex.Reject(context.Background(), ap.ID, host.Decision{By: "olga", Reason: "no"}); err != nil {
						t.Errorf("reject: %v", err)
					}
				}()
			})
			require.True(t, res.IsError, text(res))
			require.Equal(t, "rejected", out.Status)
			require.Equal(t, before, charges())
		})
	}
}

// TestWaitUndecided: a wait that ends before anyone decides answers
// awaiting_approval, as a call without it does.
func TestWaitUndecided(t *testing.T) {
	f := newFixture(t, overHTTP)
	cs := f.client(clientOpts{})
	meta := ids("s-wait-later", "c1")
	meta[mcpserver.MetaWait] = 0.3
	res, out := callTool(t, cs, "payments.create_payment", payment, meta)
	require.False(t, res.IsError, text(res))
	require.Equal(t, "awaiting_approval", out.Status)
}

// TestSettleAndWaitRefuseBadValues: settle and wait are read strictly; a
// value of another type, a negative wait, or settle without the call's
// ids is refused, naming the key, and nothing is recorded.
func TestSettleAndWaitRefuseBadValues(t *testing.T) {
	f := newFixture(t, overHTTP, fixtureOpts{mcp: func(o *mcpserver.Options) { o.PerRequest = mcpserver.PerRequestAllow }})
	cs := f.client(clientOpts{})
	with := func(kv ...any) mcp.Meta {
		m := ids("s-bad", "c1")
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tt := range []struct {
		name string
		meta mcp.Meta
		want string
	}{
		{"settle a string", with(mcpserver.MetaSettle, "true"), `"io.connhost/settle" must be a boolean, got a string`},
		{"settle a number", with(mcpserver.MetaSettle, 1), `"io.connhost/settle" must be a boolean, got a number`},
		{"settle without ids", mcp.Meta{mcpserver.MetaSettle: true}, `"io.connhost/settle" needs the call's ids`},
		{"wait a string", with(mcpserver.MetaWait, "60s"), `"io.connhost/wait" must be a number of seconds, got a string`},
		{"wait a boolean", with(mcpserver.MetaWait, true), `"io.connhost/wait" must be a number of seconds, got a boolean`},
		{"wait negative", with(mcpserver.MetaWait, -1), `"io.connhost/wait" must be a number of seconds of at least 0, got -1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, out := callTool(t, cs, "payments.create_payment", payment, tt.meta)
			require.True(t, res.IsError)
			require.Equal(t, httpapi.CodeBadRequest, out.Code)
			require.Contains(t, text(res), tt.want)
		})
	}
	recs, err := f.ex.Ledger().List(context.Background(), ledger.Filter{})
	require.NoError(t, err)
	require.Empty(t, recs, "nothing was recorded")
}

// TestModernBrokenStreamResent: a 2026-07-28 client's stream breaks while
// its call is held for a reviewer (the HTTP request ends; the
// specification has the client re-send the request under a new JSON-RPC
// id). The break cancels nothing: the execution still waits, the re-send
// finds it by its _meta ids and is held in turn, and once approved the
// payment is made once.
func TestModernBrokenStreamResent(t *testing.T) {
	f := newFixture(t, overHTTP)
	before := charges()
	call := func() map[string]any {
		p := payCall("s-broken", "c1")
		meta := p["_meta"].(map[string]any)
		meta[mcpserver.MetaWait] = 600
		meta["progressToken"] = "p1"
		return p
	}
	// The first request: read its stream up to the first progress
	// notification (the call is held), then break it.
	ctx, cancel := context.WithCancel(context.Background())
	resp := f.modernStream(ctx, tokenRuntime, "tools/call", call())
	require.True(t, waitForEvent(resp, "notifications/progress"), "the call was held")
	cancel()
	resp.Body.Close()
	id := ledger.ExecutionID(ledger.DefaultNamespace, "s-broken", "c1")
	f.log.waitFor(t, "the request of a held call ended")
	require.NotContains(t, f.log.String(), "cancelled by the client")
	rec, err := f.ex.Ledger().Get(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, ledger.StateAwaitingApproval, rec.State, "a broken stream cancels nothing")

	// The re-send, under a new JSON-RPC id: held again; approved.
	go func() {
		resp := f.modernStream(context.Background(), tokenRuntime, "tools/call", call())
		defer resp.Body.Close()
		if waitForEvent(resp, "notifications/progress") {
			_, _ = f.ex.Approve(context.Background(), rec.Approval.ID, host.Decision{By: "olga", ArgsDigest: rec.ArgsDigest})
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	require.Eventually(t, func() bool {
		r, err := f.ex.Ledger().Get(context.Background(), id)
		return err == nil && r.State == ledger.StateSucceeded
	}, time.Minute, 50*time.Millisecond)
	require.Equal(t, before+1, charges())
	// The answer the client reads on a later re-send is the recorded one.
	again := f.modernRPC(tokenRuntime, "tools/call", payCall("s-broken", "c1"), false)
	require.Contains(t, string(again.Result), `"recorded":true`)
	require.Equal(t, before+1, charges())
}

// TestSettle: io.connhost/settle drives the recorded execution of the
// call's ids without ever running a call connhost never saw. A succeeded
// call answers its recorded outcome (no second charge); an unknown one is
// recorded cancelled, and the original request arriving after it is
// answered cancelled (no charge); a call waiting for its approval and
// settled with io.connhost/wait runs in that request once approved.
func TestSettle(t *testing.T) {
	for _, v := range waitVersions {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t, overHTTP)
			cs := f.client(clientOpts{version: v})
			settle := func(session, call string) mcp.Meta {
				m := ids(session, call)
				m[mcpserver.MetaSettle] = true
				return m
			}
			before := charges()

			// A call that ran: settled, its recorded outcome.
			_, first := callTool(t, cs, "payments.create_payment", payment, ids("s-settle-"+v, "ran"))
			require.Equal(t, "awaiting_approval", first.Status)
			_, err := f.ex.Approve(context.Background(), first.Approval.ID, host.Decision{By: "olga", ArgsDigest: first.Approval.ArgsDigest})
			require.NoError(t, err)
			_, ran := callTool(t, cs, "payments.create_payment", payment, ids("s-settle-"+v, "ran"))
			require.Equal(t, "succeeded", ran.Status)
			require.Equal(t, before+1, charges())
			res, settled := callTool(t, cs, "payments.create_payment", payment, settle("s-settle-"+v, "ran"))
			require.Equal(t, "succeeded", settled.Status, text(res))
			require.True(t, settled.Recorded)
			require.Equal(t, ran.ExecutionID, settled.ExecutionID)
			require.Equal(t, before+1, charges(), "settling charges nothing")

			// A call connhost never saw: recorded cancelled, never run,
			// and the original arriving late is answered cancelled.
			res, never := callTool(t, cs, "payments.create_payment", payment, settle("s-settle-"+v, "lost"))
			require.True(t, res.IsError, text(res))
			require.Equal(t, "cancelled", never.Status)
			require.Contains(t, text(res), "did not run")
			res, late := callTool(t, cs, "payments.create_payment", payment, ids("s-settle-"+v, "lost"))
			require.True(t, res.IsError, text(res))
			require.Equal(t, "cancelled", late.Status)
			require.Equal(t, never.ExecutionID, late.ExecutionID)
			require.Equal(t, before+1, charges(), "the late original ran nothing")

			// Other arguments under settled ids are an intent mismatch.
			other := maps.Clone(payment)
			other["amount"] = 501
			res, mismatch := callTool(t, cs, "payments.create_payment", other, settle("s-settle-"+v, "ran"))
			require.True(t, res.IsError)
			require.Equal(t, httpapi.CodeIntentMismatch, mismatch.Code)

			// A call waiting for its approval, settled with a wait: held,
			// approved from elsewhere, run in the same request.
			_, waiting := callTool(t, cs, "payments.create_payment", payment, ids("s-settle-"+v, "gated"))
			require.Equal(t, "awaiting_approval", waiting.Status)
			go func() {
				_, err := f.ex.Approve(context.Background(), waiting.Approval.ID, host.Decision{By: "olga", ArgsDigest: waiting.Approval.ArgsDigest})
				if err != nil {
					t.Errorf("approve: %v", err)
				}
			}()
			m := settle("s-settle-"+v, "gated")
			m[mcpserver.MetaWait] = 600
			res, done := callTool(t, cs, "payments.create_payment", payment, m)
			require.Equal(t, "succeeded", done.Status, text(res))
			require.Equal(t, waiting.ExecutionID, done.ExecutionID)
			require.Equal(t, before+2, charges())
		})
	}
}
