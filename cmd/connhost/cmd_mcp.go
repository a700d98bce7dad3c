package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
	"github.com/connhost/connhost/server/waiting"
)

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp [--config connhost.toml]",
		Short: "Serve the tools over MCP on stdin and stdout (for desktop clients)",
		Long: `mcp speaks the Model Context Protocol on stdin and stdout until the
client closes stdin (or SIGINT, SIGTERM). Logs go to stderr. It is what an
MCP client launches; connhost serve and dev serve the same tools over
streamable HTTP at /mcp. The config file is the one serve reads ([server]
data, manifests and modules apply; so do the connectors' values).

It answers initialize, server/discover and tools/list at once, from the
manifests, while it opens the ledger in --data, loads the connectors and
runs recovery in the background; a tools/call waits for that (up to 30s,
then it answers "starting": send it again). If connhost cannot start (a
secret's environment variable that is not set, a config error, a ledger
held by another process), it keeps serving and every tools/call answers
why (isError, code start_failed), so the client can show the reason; the
exit status is then 1.

Every operation of every manifest is a tool named "connector_operation"
(payments_create_payment; the dotted name works in calls too).
connhost's guarantees are keyed on (session, tool-call id), and MCP's
tools/call carries neither, so a runtime passes its ids in the request's
_meta:

  "io.connhost/session_id"    the session (string)
  "io.connhost/tool_call_id"  the model's tool-call id (string)
  "io.connhost/namespace"     optional (string)
  "io.connhost/resumed"       optional (boolean): replayed from older history

Sending a call again with the same ids returns the recorded outcome
instead of acting twice. Claude Code's own "claudecode/toolUseId" is
understood as the tool-call id; unless a session is given, the call runs
in the session of the Claude Code conversation that launched connhost mcp
(CLAUDE_CODE_SESSION_ID), or else of this process. clients/js in the repository has adapters for
@openai/agents and LangChain/LangGraph that pass the ids. Without ids, the
ids are made up for the request alone, and a retry after a disconnect is a
new call: with a config, a side-effecting call without ids is refused
(identity_required) unless [mcp] allow_per_request_identity = true;
without one it runs, with a warning in the log and the result. A gated
call without ids is held open until a reviewer decides, up to [mcp]
approval_wait (default 10m).

A gated call answers awaiting_approval. With [mcp] approver = "NAME" in the
config, a client that supports elicitation instead shows the user the exact
call (operation, arguments, digest, expiry) and records the answer as
NAME's approval or rejection. A client's notifications/cancelled cancels
the execution (as connhost cancel); a progress token gets a notification
per retry.

In a desktop client's MCP configuration:

  {"mcpServers": {"connhost": {"command": "connhost",
    "args": ["mcp", "--data", "/home/me/.connhost", "--config", "/home/me/connhost.toml"]}}}`,
		Example: `  connhost mcp --data ~/.connhost --manifests ./manifests --modules ./build --config docs/connhost.example.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			logger := a.logger()
			// A client launches connhost mcp and expects an answer within
			// a second (the Vercel AI SDK's probe gives up after one): only
			// the config and the manifests are read before serving, and
			// what fails there is served to the client as the reason no
			// tool runs, not only printed where nobody reads it.
			cfg, startErr := a.loadConfigLenient()
			// Without a config (a quick local try) calls without ids
			// run, with a warning; a configured one refuses them unless
			// it allows them.
			mo := cfg.MCPOptions(a.g.config == "")
			approver := mo.Approver
			if startErr == nil && approver != "" && !cfg.PrincipalWith(approver, httpapi.RoleApprover) {
				if dsn, _, err := a.sharedLedger(); err != nil {
					startErr = err
				} else if dsn != "" {
					// Its approvals could not be signed, and no node
					// would dispatch them.
					startErr = fmt.Errorf("%s: [mcp] approver %q on the shared ledger must be a [[principals]] entry with role approver, whose token signs the approvals given in the client (nodes dispatch no unsigned approval); add it, or remove [mcp] approver",
						a.g.config, approver)
				}
			}
			// The tools are listed even when the start has failed
			// already: the client shows them, and their calls say why.
			ms, err := a.loadManifests()
			if err != nil {
				ms = nil
				if startErr == nil {
					startErr = err
				}
			}
			if startErr == nil && cfg != nil && cfg.Telemetry.Endpoint != "" {
				// A tools/call's _meta traceparent is continued, as over
				// HTTP (the exporter connects on its first export, not
				// now).
				stop, traced, err := server.StartTelemetry(ctx, cfg.Telemetry, logger)
				if err != nil {
					startErr = err
				} else {
					defer stop()
					logger = traced
				}
			}
			mo.Logger, mo.Version = logger, buildinfo.Read().Short()
			// The runtime that launched this process may name its
			// conversation here (Claude Code: CLAUDE_CODE_SESSION_ID).
			mo.StdioEnv = os.LookupEnv
			srv, err := mcpserver.NewStarting(ms, mo)
			if err != nil {
				return errors.Join(startErr, err)
			}

			// The slow part of the start (the ledger, compiling the
			// connectors, recovery) runs while the client is served; a
			// tools/call waits for it. The client leaving ends it.
			startCtx, stopStart := context.WithCancel(ctx)
			defer stopStart()
			ann := waiting.NewAnnouncer(logger)
			var ex *host.Executor
			done := make(chan struct{})
			go func() {
				defer close(done)
				begun := time.Now()
				if startErr == nil {
					var err error
					if ex, err = a.open(startCtx, openOptions{logger: logger, observer: ann.Observer(nil)}); err != nil {
						startErr = lockedError(startCtx, a.g.data, err)
					}
				}
				if startErr != nil {
					if startCtx.Err() != nil {
						// The client left during the start: whatever the
						// start then failed with (wazero's "module closed"
						// wraps no context error) is that, not a failure.
						startErr = fmt.Errorf("%w: %v", context.Canceled, startErr)
					} else {
						logger.Error("connhost could not start: every tools/call answers why until it is fixed and connhost mcp restarted", "err", startErr)
					}
					srv.Started(nil, startErr)
					return
				}
				// Retries come due and approvals expire while the client
				// waits.
				ann.Start(startCtx, ex.Ledger())
				go ex.Run(startCtx, time.Second)
				srv.Started(ex, nil)
				logger.Info("connhost started", "data", a.g.data, "connectors", len(ex.Manifests()), "took", time.Since(begun).Round(time.Millisecond))
			}()
			if approver == "" {
				logger.Warn("approvals in the client are off: gated calls answer awaiting_approval (set [mcp] approver in the config to ask the client's user)")
			}
			logger.Info("serving MCP on stdio", "data", a.g.data, "tools_from", a.g.manifests, "approver", approver, "calls_without_ids", string(mo.PerRequest))
			err = srv.RunStdio(ctx, a.stdin, a.stdout)
			stopStart()
			select {
			case <-done:
			case <-time.After(mcpStartGrace):
				// A connector's compilation does not stop when asked:
				// leave now rather than hold the ledger (and a core) for
				// a client that has gone; what the start had begun is
				// taken up by the next one, as after a crash.
				logger.Warn("the client has gone while connhost was still starting; exiting without waiting for the start to end")
				return nil
			}
			if ex != nil {
				if cerr := ex.Close(context.WithoutCancel(ctx)); cerr != nil {
					logger.Error("close executor", "err", cerr)
				}
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return nil // SIGINT or SIGTERM
			case err == nil && startErr != nil && !errors.Is(startErr, context.Canceled):
				// The client has gone; the exit status still says the
				// start failed.
				return startErr
			}
			return err
		},
	}
}

// mcpStartGrace is how long connhost mcp, once its client has gone,
// waits for a start still under way to end.
const mcpStartGrace = 2 * time.Second

// loadConfigLenient loads --config for connhost mcp, and for every
// command's [server] paths (nil without one). A
// config whose only problems are environment variables that are unset or
// empty (the stdio transports of many runtimes pass a bare environment)
// still yields its paths and [mcp] table, so that the tools can be
// listed; err then says what is missing, and nothing runs with it.
func (a *app) loadConfigLenient() (*server.Config, error) {
	if a.g.config == "" {
		return nil, nil
	}
	cfg, err := loadConfig(a.g.config, os.LookupEnv)
	if err == nil {
		return cfg, nil
	}
	lenient, lerr := loadConfig(a.g.config, func(name string) (string, bool) {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			return v, true
		}
		return "unset", true
	})
	if lerr != nil {
		return nil, err
	}
	return lenient, err
}
