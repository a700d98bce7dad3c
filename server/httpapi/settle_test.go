package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// TestExecuteSettle: "settle": true answers a recorded call as the same
// call sent again, and records a call connhost never received as never
// run, so that its original request, arriving later, does not run.
func TestExecuteSettle(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	settled := func(session, id, args string) map[string]any {
		r := execReq(session, id, "noop.echo", args)
		r["settle"] = true
		return r
	}
	ran := c.post("/v1/executions", execReq("s1", "c1", "noop.echo", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusSucceeded, ran.Status)
	got := c.post("/v1/executions", settled("s1", "c1", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusSucceeded, got.Status)
	require.True(t, got.Recorded)

	never := c.post("/v1/executions", settled("s1", "c2", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusCancelled, never.Status)
	require.Equal(t, host.NeverReceived, never.Error)
	late := c.post("/v1/executions", execReq("s1", "c2", "noop.echo", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusCancelled, late.Status)
	require.Zero(t, late.Attempt, "the late original never dispatched")
}

// TestExecuteWait: ?wait= holds a gated call until a reviewer decides;
// approved, it runs in the same request.
func TestExecuteWait(t *testing.T) {
	env := newTestExecutor(t)
	c := client{t: t, base: env.serve(t, devOptions()).URL}
	// decideSoon decides the call's approval once it is recorded, while
	// the request that made it is held.
	decideSoon := func(session, id string, approve bool) {
		apID := ledger.ApprovalID(ledger.ExecutionID("default", session, id))
		go func() {
			ctx := context.Background()
			for {
				time.Sleep(20 * time.Millisecond)
				v, err := env.ex.ApprovalView(ctx, apID)
				if err != nil {
					continue
				}
				if approve {
					_, err = env.ex.Approve(ctx, apID, host.Decision{By: "rita", ArgsDigest: v.ArgsDigest})
				} else {
					_, err = env.ex.Reject(ctx, apID, host.Decision{By: "rita", Reason: "no"})
				}
				if err == nil {
					return
				}
			}
		}()
	}
	decideSoon("s1", "c1", true)
	got := c.post("/v1/executions?wait=30s", execReq("s1", "c1", "gated.echo", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusSucceeded, got.Status, "approved while held: it ran in the same request")
	require.Equal(t, 1, got.Attempt)

	decideSoon("s1", "c2", false)
	got = c.post("/v1/executions?wait=30s", execReq("s1", "c2", "gated.echo", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusRejected, got.Status)

	got = c.post("/v1/executions?wait=100ms", execReq("s1", "c3", "gated.echo", `{"msg":"hi"}`)).result(t)
	require.Equal(t, host.StatusAwaitingApproval, got.Status, "undecided at the end of the wait")

	for _, bad := range []string{"soon", "-1s", "11m"} {
		c.post("/v1/executions?wait="+bad, execReq("s1", "c4", "gated.echo", `{"msg":"hi"}`)).problem(t, CodeBadRequest)
	}
}
