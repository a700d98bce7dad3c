package httpapi

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
)

// TestApprovalView: GET /v1/approvals/{id} answers the view every approval
// surface shows: each argument decoded, escaped where it must be, with
// the text a reviewer reads, to a reviewer and to the runtime alike.
func TestApprovalView(t *testing.T) {
	env := newTestExecutor(t)
	srv := env.serve(t, devOptions())
	c := client{t: t, base: srv.URL}
	res := c.post("/v1/executions", execReq("s1", "c1", "gated.echo", `{"msg":"pay \u202etxt.exe\u0041"}`)).result(t)
	require.Equal(t, host.StatusAwaitingApproval, res.Status)

	var v host.ApprovalView
	r := c.get("/v1/approvals/" + res.Approval.ID)
	require.Equal(t, 200, r.status, string(r.body))
	r.decode(t, &v)
	require.Equal(t, res.Approval.ID, v.ApprovalID)
	require.Equal(t, res.ExecutionID, v.ExecutionID)
	require.Equal(t, res.ArgsDigest, v.ArgsDigest)
	require.Equal(t, "pending", v.Decision)
	require.Equal(t, []host.ArgField{{Path: "msg", Value: `"pay \u202Etxt.exeA"`, Type: "string", Escaped: true}}, v.Fields)
	require.Contains(t, v.Text, "Arguments:\n  msg = \"pay \\u202Etxt.exeA\"\n")
	require.False(t, strings.ContainsRune(string(r.body), '\u202e'), "never the raw character")

	c.get("/v1/approvals/ap_nope").problem(t, CodeNotFound)
}
