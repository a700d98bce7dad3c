package mcpserver_test

import (
	"context"
	"maps"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/crash"
)

// TestKilledMidCall: connhost mcp is SIGKILLed in the middle of an
// approved payment, after Stripe charged and before the outcome was
// recorded. The client sees its connection die; it starts connhost mcp
// again and sends the same call (same _meta ids): the restarted process
// finds the dispatched attempt, re-sends it with the same idempotency key,
// Stripe replays its answer, and the call succeeds with exactly one charge.
func TestKilledMidCall(t *testing.T) {
	f := newFixture(t, overStdio)
	before := charges()
	meta := ids("s-kill", "call_1")
	accept := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}
	cs := f.client(clientOpts{approver: true, env: []string{crash.EnvVar + "=" + crash.AfterPluginReturn},
		client: &mcp.ClientOptions{ElicitationHandler: accept}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "payments.create_payment", Arguments: payment, Meta: maps.Clone(meta)})
	require.Error(t, err, "the process died in the middle of the call")
	_ = cs.Close() // waits for the process
	ps := f.cmd.ProcessState
	require.NotNil(t, ps, "connhost mcp has exited")
	ws, ok := ps.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "connhost mcp died by SIGKILL: %v", ps)
	require.Equal(t, before+1, charges(), "Stripe charged before the kill")

	cs = f.client(clientOpts{approver: true, client: &mcp.ClientOptions{ElicitationHandler: accept}})
	res, out := callTool(t, cs, "payments.create_payment", payment, meta)
	require.False(t, res.IsError, text(res))
	require.Equal(t, "succeeded", out.Status)
	require.True(t, strings.HasPrefix(out.Receipt, "pi_"))
	require.Equal(t, before+1, charges(), "exactly one charge")
	_, again := callTool(t, cs, "payments.create_payment", payment, meta)
	require.Equal(t, out.Receipt, again.Receipt)
	require.Equal(t, before+1, charges())
	require.NoError(t, cs.Close())
	recovered := false
	for _, ev := range f.events(out.ExecutionID) {
		recovered = recovered || ev.Decision == "recover_retry"
	}
	require.True(t, recovered, "the restart re-dispatched the attempt with its key")
}
