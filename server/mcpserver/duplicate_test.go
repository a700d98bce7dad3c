package mcpserver_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/manifests"
)

// ungatedPayments is the shipped payments manifest (its pin, review keys
// and duplicate_window) under the connector name "pay", with
// create_payment's approval turned off, and the guard too unless guard.
func ungatedPayments(t *testing.T, guard bool) *manifests.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(shared.manifests, "payments.toml"))
	require.NoError(t, err)
	data = []byte(strings.Replace(string(data), `name = "payments"`, `name = "pay"`, 1))
	data, err = manifests.SetOperationField(data, "create_payment", "requires_approval", false)
	require.NoError(t, err)
	if !guard {
		// The guard and what it compares.
		data = []byte(strings.Replace(string(data), "duplicate_window = \"10m\"\n", "", 1))
		data = regexp.MustCompile(`(?m)^intent = .*\n`).ReplaceAll(data, nil)
	}
	m, err := manifests.Parse("pay.toml", data)
	require.NoError(t, err)
	m.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), origin(t, shared.stripe))
	return m
}

func payFixture(t *testing.T, guard bool) *fixture {
	return newFixture(t, overHTTP, fixtureOpts{
		extra:  []*manifests.Manifest{ungatedPayments(t, guard)},
		config: map[string]map[string]string{"pay": {"api_key": sandbox.DefaultAPIKey, "base_url": shared.stripe}},
	})
}

func (f *fixture) approveOverHTTP(approvalID, digest string) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+"/v1/approvals/"+approvalID+"/approve", strings.NewReader(fmt.Sprintf(`{"digest":%q}`, digest)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokenApprover)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(f.t, err)
	resp.Body.Close()
	require.Equal(f.t, 200, resp.StatusCode)
}

// TestRetryUnderANewToolCallID: a model or runtime re-issues a payment
// under a new tool-call id (after "An error occurred while running the
// tool. Please try again."). Without the guard that is a second charge at
// Stripe. With it the re-issue is held, the model is told a human must
// decide and not to try other ids, nothing reaches Stripe; approved, it
// runs: exactly one more charge. Another session is not held.
func TestRetryUnderANewToolCallID(t *testing.T) {
	t.Run("unguarded", func(t *testing.T) {
		f := payFixture(t, false)
		cs := f.client(clientOpts{})
		before := charges()
		_, a := callTool(t, cs, "pay.create_payment", payment, ids("s-noguard", "call_1"))
		require.Equal(t, "succeeded", a.Status)
		_, b := callTool(t, cs, "pay.create_payment", payment, ids("s-noguard", "call_2"))
		require.Equal(t, "succeeded", b.Status)
		require.Equal(t, before+2, charges(), "two charges for one intent")
	})

	f := payFixture(t, true)
	cs := f.client(clientOpts{})
	before := charges()
	res, a := callTool(t, cs, "pay.create_payment", payment, ids("s-guard", "call_1"))
	require.Equal(t, "succeeded", a.Status, text(res))
	require.Equal(t, before+1, charges())

	res, b := callTool(t, cs, "pay.create_payment", payment, ids("s-guard", "call_2"))
	require.False(t, res.IsError, text(res))
	require.Equal(t, "awaiting_approval", b.Status)
	require.Equal(t, a.ExecutionID, b.DuplicateOf)
	require.Contains(t, text(res), "Held for a human: this call has the same arguments as execution "+a.ExecutionID)
	require.Contains(t, text(res), "A human must decide")
	require.Contains(t, text(res), "Do not issue this call again with other ids")
	require.Equal(t, before+1, charges(), "zero effects before the approval")

	// The runtime re-issues it yet again: still held, still nothing.
	_, c := callTool(t, cs, "pay.create_payment", payment, ids("s-guard", "call_3"))
	require.Equal(t, "awaiting_approval", c.Status)
	require.Equal(t, a.ExecutionID, c.DuplicateOf)
	require.Equal(t, before+1, charges())

	// A reviewer approves the second; the runtime re-drives it: one charge.
	f.approveOverHTTP(b.Approval.ID, b.Approval.ArgsDigest)
	res, done := callTool(t, cs, "pay.create_payment", payment, ids("s-guard", "call_2"))
	require.Equal(t, "succeeded", done.Status, text(res))
	require.NotEqual(t, a.Receipt, done.Receipt)
	require.Equal(t, before+2, charges(), "exactly one more effect after the approval")

	// The same payment in another session is another intent.
	_, other := callTool(t, cs, "pay.create_payment", payment, ids("s-guard-other", "call_1"))
	require.Equal(t, "succeeded", other.Status)
	require.Equal(t, before+3, charges())

	evs := f.events(b.ExecutionID)
	require.Equal(t, "duplicate_held", evs[0].Decision)
	require.Contains(t, evs[0].Evidence, "possible duplicate of "+a.ExecutionID)
}

// TestDuplicateInTheDialog: the shipped, gated create_payment asks in the
// client's dialog every time; a re-issue's dialog says it may repeat a
// payment that succeeded, before anything else.
func TestDuplicateInTheDialog(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			accept := &approvalHandler{action: "accept"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: accept.handle}})
			before := charges()
			_, a := callTool(t, cs, "payments.create_payment", payment, ids("s-dlg-"+v.name, "c1"))
			require.Equal(t, "succeeded", a.Status)
			require.NotContains(t, accept.asked[0].Message, "DUPLICATE")
			require.NoError(t, cs.Close())

			decline := &approvalHandler{action: "decline"}
			cs = f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
			res, b := callTool(t, cs, "payments.create_payment", payment, ids("s-dlg-"+v.name, "c2"))
			require.Equal(t, "rejected", b.Status, text(res))
			require.Equal(t, a.ExecutionID, b.DuplicateOf)
			msg := decline.asked[0].Message
			require.Contains(t, msg, "POSSIBLE DUPLICATE: this call has the same arguments as execution "+a.ExecutionID+" (succeeded, tool call c1")
			require.Contains(t, msg, "receipt "+a.Receipt)
			require.Less(t, strings.Index(msg, "POSSIBLE DUPLICATE"), strings.Index(msg, "Decide on:"))
			require.Equal(t, before+1, charges())
		})
	}
}
