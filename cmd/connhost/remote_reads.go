package main

import (
	"context"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// registerRead adds the flags of ls, history and recover that choose how
// they reach the ledger: --server and --token-env, as the decision
// commands have.
func (df *decisionFlags) registerRead(c *cobra.Command) {
	df.read = true
	f := c.Flags()
	f.StringVar(&df.server, "server", "", "read through the connhost server at this URL (default: $"+ServerEnv+", else the one running on --data, found through its server.json)")
	f.StringVar(&df.tokenEnv, "token-env", DefaultTokenEnv, "environment variable holding your principal's bearer token, sent to the server")
}

// readHelp is the part of ls, history and recover's help that says how
// the ledger is reached.
const readHelp = `
While connhost serve or dev holds the ledger in --data (it writes
server.json there), this goes through its HTTP API with the bearer token in
$CONNHOST_APPROVER_TOKEN (or the variable --token-env names; any
principal's token may read, a runtime's or an operator's may recover), sent
only to a server that first proves it holds it; --server URL, or
$CONNHOST_SERVER, names the server explicitly. When no server runs, the
ledger is opened directly. A --data directory that does not exist, or one
that holds no ledger, is an error (exit 2, exit 6), never an empty answer.`

// throughServer sends req to the server the command goes through, if one
// runs (see findServer): ok is false when none does and the caller opens
// the ledger itself.
func (a *app) throughServer(ctx context.Context, df decisionFlags, req request) (ok bool, err error) {
	si, discovered, found := a.findServer(ctx, df)
	if !found {
		return false, nil
	}
	_, err = a.remote(ctx, df, si, discovered, req)
	return true, err
}

// listQuery is the query of GET /v1/executions for ls's flags.
func listQuery(state, session, namespace, after, order string, limit int) string {
	q := url.Values{}
	for k, v := range map[string]string{"state": state, "session_id": session, "namespace": namespace, "after": after, "order": order} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// historyThroughServer reads an execution and its trail through a server,
// and the execution it repeats when it names one (earlier, nil when it
// cannot be read); ok is false when no server runs.
func (a *app) historyThroughServer(ctx context.Context, df decisionFlags, id string) (e httpapi.Execution, earlier *host.Result, ok bool, err error) {
	ok, err = a.throughServer(ctx, df, request{method: "GET", path: "/v1/executions/" + url.PathEscape(id), out: &e})
	if !ok || err != nil {
		return e, nil, ok, err
	}
	if e.DuplicateOf != "" {
		var prev httpapi.Execution
		if _, err := a.throughServer(ctx, df, request{method: "GET", path: "/v1/executions/" + url.PathEscape(e.DuplicateOf), out: &prev}); err == nil {
			earlier = &prev.Result
		}
	}
	return e, earlier, true, nil
}

// recoverThroughServer runs a recovery pass through a server (POST
// /v1/recover); ok is false when no server runs.
func (a *app) recoverThroughServer(ctx context.Context, df decisionFlags) (rep host.RecoveryReport, ok bool, err error) {
	ok, err = a.throughServer(ctx, df, request{path: "/v1/recover", out: &rep})
	return rep, ok, err
}
