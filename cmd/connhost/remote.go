package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

// DefaultTokenEnv is the environment variable the decision commands read
// the caller's bearer token from when they go through a server.
const DefaultTokenEnv = "CONNHOST_APPROVER_TOKEN"

// decisionFlags are the flags of approve, reject, resolve and cancel that
// choose how they reach the ledger.
type decisionFlags struct {
	server   string
	tokenEnv string
	by       string
	// read: the flags of ls, history and recover (registerRead), whose
	// messages ask for any principal's token.
	read bool
}

func (df *decisionFlags) register(c *cobra.Command, byUsage string) {
	f := c.Flags()
	f.StringVar(&df.server, "server", "", "send the decision to the connhost server at this URL (default: $"+ServerEnv+", else the one running on --data, found through its server.json)")
	f.StringVar(&df.tokenEnv, "token-env", DefaultTokenEnv, "environment variable holding your principal's bearer token, sent to the server")
	f.StringVar(&df.by, "by", "", byUsage)
}

// decisionHelp is the part of the decision commands' help that says who
// is recorded and how the ledger is reached.
const decisionHelp = `
Who decides: when a connhost serve or dev process holds the ledger in
--data (it writes server.json there while it runs), the decision goes
through its HTTP API with the bearer token in $CONNHOST_APPROVER_TOKEN (or
the variable --token-env names), and is recorded under that token's
principal; --by, if given, must be that principal's name (dev has no
tokens: it records "dev-loopback" and keeps --by in the reason as a
claim). --server URL sends it to a server explicitly. The token is sent
only to a server that first proves it holds it (POST /v1/auth/proof), and
server.json is followed only when it is yours (mode 0600) and names a live
connhost process listening on its URL's port. When no server runs, the
ledger is opened directly: whoever can open the data directory is the
authority, and the decision is recorded under --by, or "local:<your OS
user name>" without it. A shared ledger (--ledger) is no such authority:
there an approval or rejection made directly needs --by naming an approver
principal of --config, whose token in the config signs it (nodes dispatch
no unsigned approval), and a resolution or cancellation is recorded under
--by only for a principal of --config, else as "db:<database role>".`

// request is one decision sent to a server's API, or (method GET) one
// read a decision needs.
type request struct {
	path string
	body any
	// method is the request's method; the default value is POST.
	method string
	// out, when set, receives the answer instead of a host.Result.
	out any
}

// decide makes a decision through the server that holds the ledger, or
// directly on the ledger when none does.
func (a *app) decide(ctx context.Context, df decisionFlags, verb string, req request,
	direct func(ex *host.Executor, by string) (host.Result, error)) (host.Result, error) {
	if si, discovered, ok := a.findServer(ctx, df); ok {
		return a.remote(ctx, df, si, discovered, req)
	}
	dsn, cfg, err := a.sharedLedger()
	if err != nil {
		return host.Result{}, err
	}
	if dsn != "" && (verb == "approve" || verb == "reject") {
		if err := checkSharedApproval(cfg, verb, df.by, df.tokenEnv); err != nil {
			return host.Result{}, err
		}
	}
	var res host.Result
	err = a.withExecutor(ctx, openOptions{existing: true}, func(ex *host.Executor) error {
		by := df.by
		if db, ok := ex.Ledger().(interface{ Role() string }); ok && verb != "approve" && verb != "reject" {
			// A shared ledger: the connection proves only its role.
			if by = sharedActor(cfg, verb, df.by, db.Role()); by != df.by && df.by != "" {
				fmt.Fprintf(a.stderr, "connhost: note: recorded as %s, the database role: on the shared ledger --by names only a principal of --config (%q is none with a role that may %s)\n", by, df.by, verb)
			}
		}
		if by == "" {
			by = localActor()
		}
		var err error
		res, err = direct(ex, by)
		return withResult(err, res)
	})
	var le *ledgerLockedError
	if errors.As(err, &le) {
		le.Hint = fmt.Sprintf("if it is connhost serve or dev, %s through its API: connhost %s … --server URL (with your token in $%s)", verb, verb, df.tokenEnv)
		if le.Server == nil || !le.Answers {
			le.Hint += ", or wait until it exits"
		}
	}
	return res, err
}

// ServerEnv is the environment variable naming the server the commands
// that can go through one use, when --server is not given.
const ServerEnv = "CONNHOST_SERVER"

// findServer returns the server a command goes through: --server, else
// $CONNHOST_SERVER, else (discovered) the one whose server.json in --data
// names a live connhost process listening on its port. ok is false when
// there is none: the command then opens the ledger itself.
func (a *app) findServer(ctx context.Context, df decisionFlags) (si serverInfo, discovered, ok bool) {
	explicit := df.server
	if explicit == "" {
		explicit = os.Getenv(ServerEnv)
	}
	if explicit != "" {
		return serverInfo{URL: strings.TrimRight(explicit, "/"), Command: "server"}, false, true
	}
	si, err := readServerInfo(a.g.data)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(a.stderr, "connhost: warning: ignoring the discovery file: %v\n", err)
		}
		return serverInfo{}, false, false
	}
	live, why := si.answers(ctx, 5*time.Second)
	if live {
		return si, true, true
	}
	if why != "" {
		// A live pid that is not the server the file names: a reused
		// pid, or a file written to have the CLI talk to another
		// process. Nothing was sent to it.
		fmt.Fprintf(a.stderr, "connhost: warning: ignoring %s: it names %s, but %s (it must be %s)\n",
			filepath.Join(a.g.data, serverInfoFile), si, why, serverProcessChecks)
	}
	return serverInfo{}, false, false
}

// localActor is the identity of a decision made on the ledger directly:
// "local:" and the OS user's name.
func localActor() string {
	name := ""
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	if name == "" {
		name = os.Getenv("USER")
	}
	if name == "" {
		name = "unknown"
	}
	return "local:" + name
}

// remoteProblemError is a problem a server answered.
type remoteProblemError struct {
	Server  string
	Problem *httpapi.Problem
}

func (e *remoteProblemError) Error() string {
	return fmt.Sprintf("%s: %s", e.Server, e.Problem.Detail)
}

// remote sends req to the server si with the token from df.tokenEnv.
// discovered says the server was found through server.json (the messages
// then say it holds the ledger). The token is sent only to a server that
// has first proved it holds it (proveServer).
func (a *app) remote(ctx context.Context, df decisionFlags, si serverInfo, discovered bool, req request) (host.Result, error) {
	token := os.Getenv(df.tokenEnv)
	where := si.URL
	if discovered {
		where = fmt.Sprintf("%s, which holds the ledger in %s,", si, a.g.data)
		if !si.Auth {
			token = "" // it takes none (dev): never hand it one
		}
	}
	if si.Auth && token == "" {
		whose := "an approver's, or an operator's for resolve and cancel"
		if df.read {
			whose = "any principal's may read; a runtime's or an operator's for recover"
		}
		return host.Result{}, fmt.Errorf("%s needs a bearer token: set %s to your principal's token (%s), or name another variable with --token-env",
			where, df.tokenEnv, whose)
	}
	if token != "" {
		auth, err := a.proveServer(ctx, si.URL, where, token, df.tokenEnv)
		if err != nil {
			return host.Result{}, err
		}
		if !auth {
			token = "" // a server without credentials
		}
	}
	method := req.method
	if method == "" {
		method = "POST"
	}
	var body []byte
	if req.body != nil {
		var err error
		if body, err = json.Marshal(req.body); err != nil {
			return host.Result{}, err
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, method, si.URL+req.path, bytes.NewReader(body))
	if err != nil {
		return host.Result{}, fmt.Errorf("request to %s: %w", si.URL, err)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	client, err := cliClient()
	if err != nil {
		return host.Result{}, err
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return host.Result{}, fmt.Errorf("cannot reach the connhost server at %s: %w", si.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return host.Result{}, fmt.Errorf("read the answer of %s: %w", si.URL, err)
	}
	if resp.StatusCode == http.StatusOK && req.out != nil {
		if err := json.Unmarshal(b, req.out); err != nil {
			return host.Result{}, fmt.Errorf("the answer of %s is not what %s answers: %w", si.URL, req.path, err)
		}
		return host.Result{}, nil
	}
	if resp.StatusCode == http.StatusOK {
		var res host.Result
		if err := json.Unmarshal(b, &res); err != nil {
			return host.Result{}, fmt.Errorf("the answer of %s is not a result: %w", si.URL, err)
		}
		return res, nil
	}
	var p httpapi.Problem
	if err := json.Unmarshal(b, &p); err != nil || p.Code == "" {
		return host.Result{}, fmt.Errorf("%s answered %s", si.URL, resp.Status)
	}
	if p.Code == httpapi.CodeUnauthorized {
		if token == "" {
			p.Detail = fmt.Sprintf("%s needs a bearer token: set %s to your principal's token, or name another variable with --token-env", where, df.tokenEnv)
		} else {
			p.Detail = fmt.Sprintf("%s does not accept the token in %s", where, df.tokenEnv)
		}
	}
	return host.Result{}, &remoteProblemError{Server: si.URL, Problem: &p}
}

// proveServer asks the server at base to prove that it holds token
// (POST /v1/auth/proof with a fresh nonce and the token's id, never the
// token) and verifies the answer. It returns auth false for a server
// without credentials, which takes no token; an error when the server
// cannot prove it: then the token must not be sent. where names the
// server in messages, tokenEnv the variable the token came from.
func (a *app) proveServer(ctx context.Context, base, where, token, tokenEnv string) (auth bool, err error) {
	var nb [32]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return false, err
	}
	nonce := hex.EncodeToString(nb[:])
	body, _ := json.Marshal(httpapi.ProofRequest{Nonce: nonce, TokenID: httpapi.TokenID(token), Version: httpapi.ProofVersion})
	hreq, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/auth/proof", bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("request to %s: %w", base, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	client, err := cliClient()
	if err != nil {
		return false, err
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return false, fmt.Errorf("cannot reach the connhost server at %s: %w", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return false, fmt.Errorf("read the answer of %s: %w", base, err)
	}
	const notSent = "the token was not sent"
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusUnauthorized:
		p := httpapi.NewProblem(httpapi.CodeUnauthorized, fmt.Sprintf("%s does not accept the token in %s: none of its principals has it (%s)", where, tokenEnv, notSent))
		return false, &remoteProblemError{Server: base, Problem: p}
	default:
		return false, fmt.Errorf("%s cannot prove that it holds the token in %s (POST /v1/auth/proof answered %s): it is not a connhost server that knows your principal, so %s; check the URL (a connhost server older than this CLI has no such route: upgrade it)", where, tokenEnv, resp.Status, notSent)
	}
	var pr httpapi.ProofResponse
	if err := json.Unmarshal(b, &pr); err != nil {
		return false, fmt.Errorf("%s answered POST /v1/auth/proof with something else than a proof, so %s", where, notSent)
	}
	if !pr.Auth {
		return false, nil
	}
	urls := pr.URLs
	if urls == nil {
		urls = []string{} // version 2 signs the list even when it is empty
	}
	if !httpapi.VerifyServerProof(token, nonce, pr.Principal, urls, pr.Proof) {
		return false, fmt.Errorf("%s answered a proof that does not match the token in %s: it does not hold your principal's token (or it is a connhost server older than this CLI, which signs no URL: upgrade it), so %s; check the URL (or the server.json that named it)", where, tokenEnv, notSent)
	}
	if !httpapi.SameServer(base, urls) {
		// The proof is genuine, but of a server reached elsewhere: what
		// answered at base passed the request on to it.
		return false, fmt.Errorf("%s answered the proof of a connhost server that is reached at %s, not at %s: a process at this URL relayed the request to that server, so %s; send to the server's own URL, or, if %s is how clients reach it (a proxy, another host name), set [server] public_url = %q in its config",
			where, orNone(urls), base, notSent, base, base)
	}
	return true, nil
}

// orNone lists urls, or says there are none.
func orNone(urls []string) string {
	if len(urls) == 0 {
		return "no URL it names"
	}
	return strings.Join(urls, " or ")
}

// deciders are the roles whose name a direct decision on a shared ledger
// may be recorded under, per command: the roles the API requires.
var deciders = map[string][]httpapi.Role{
	"approve": {httpapi.RoleApprover},
	"reject":  {httpapi.RoleApprover},
	"resolve": {httpapi.RoleApprover, httpapi.RoleOperator},
	"cancel":  {httpapi.RoleRuntime, httpapi.RoleOperator},
}

// checkSharedApproval refuses, before anything is opened, an approval or
// rejection made directly on a shared ledger that could not be signed: by
// must be an approver principal of the config, whose token (in the config,
// as on every node) signs it. The database's credentials alone are no
// approval authority: no node dispatches an unsigned approval.
func checkSharedApproval(cfg *server.Config, verb, by, tokenEnv string) error {
	if cfg.PrincipalWith(by, deciders[verb]...) {
		return nil
	}
	who := "without --by"
	if by != "" {
		who = fmt.Sprintf("%q is no principal with role approver in --config", by)
		if cfg == nil {
			who = fmt.Sprintf("without --config, %q is no principal with role approver", by)
		}
	}
	return fmt.Errorf("%s on the shared ledger: %s, so the decision cannot be signed, and nodes dispatch only approvals signed with an approver's token (the database's credentials are no approval authority); %s through a node: connhost %s … --server URL, with your token in $%s",
		verb, who, verb, verb, tokenEnv)
}

// sharedActor is who a resolution or cancellation made directly on a
// shared ledger is recorded as: by when the config names it as a principal
// with a role the API requires for verb, else the database role the
// ledger connects as ("db:<role>"), which is all the connection proves.
func sharedActor(cfg *server.Config, verb, by, role string) string {
	if by != "" && cfg.PrincipalWith(by, deciders[verb]...) {
		return by
	}
	return "db:" + role
}
