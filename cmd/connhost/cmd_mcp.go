package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/internal/httpapi"
	"github.com/connhost/connhost/internal/mcpserver"
	"github.com/connhost/connhost/internal/waiting"
)

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp [--config connhost.toml]",
		Short: "Serve the tools over MCP on stdin and stdout (for desktop clients)",
		Long: `mcp opens the ledger in --data, loads the connectors, runs recovery, and
speaks the Model Context Protocol on stdin and stdout until the client
closes stdin (or SIGINT, SIGTERM). Logs go to stderr. It is what an MCP
client launches; connhost serve and dev serve the same tools over streamable
HTTP at /mcp. The config file is the one serve reads ([server] data,
manifests and modules apply; so do the connectors' values).

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
understood as the tool-call id (in the default session of the principal,
unless a session is given). clients/js in the repository has adapters for
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
			var cfg *Config
			if a.g.config != "" {
				var err error
				if cfg, err = loadConfig(a.g.config, os.LookupEnv); err != nil {
					return err
				}
				a.applyServerConfig(cmd, cfg)
			}
			// Without a config (a quick local try) calls without ids
			// run, with a warning; a configured one refuses them unless
			// it allows them.
			mo := mcpOptions(cfg, cfg == nil)
			approver := mo.Approver
			ctx := cmd.Context()
			logger := a.logger()
			if cfg != nil && cfg.Telemetry.Endpoint != "" {
				// Tools/call's _meta traceparent is continued, as over HTTP.
				stop, traced, err := startTelemetry(ctx, cfg.Telemetry, logger)
				if err != nil {
					return err
				}
				defer stop()
				logger = traced
			}
			ann := waiting.NewAnnouncer(logger)
			ex, err := a.open(ctx, openOptions{logger: logger, observer: ann.Observer(nil)})
			if err != nil {
				return lockedError(ctx, a.g.data, err)
			}
			defer func() {
				if err := ex.Close(context.WithoutCancel(ctx)); err != nil {
					logger.Error("close executor", "err", err)
				}
			}()
			if _, _, fleet := ex.NodeLease(); fleet && approver != "" && !cfg.principalWith(approver, httpapi.RoleApprover) {
				// Its approvals could not be signed, and no node would
				// dispatch them.
				return fmt.Errorf("%s: [mcp] approver %q on the shared ledger must be a [[principals]] entry with role approver, whose token signs the approvals given in the client (nodes dispatch no unsigned approval); add it, or remove [mcp] approver",
					a.g.config, approver)
			}
			// Retries come due and approvals expire while the client waits.
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			ann.Start(runCtx, ex.Ledger())
			go ex.Run(runCtx, time.Second)
			mo.Logger, mo.Version = logger, buildinfo.Read().Short()
			srv, err := mcpserver.New(ex, mo)
			if err != nil {
				return err
			}
			if approver == "" {
				logger.Warn("approvals in the client are off: gated calls answer awaiting_approval (set [mcp] approver in the config to ask the client's user)")
			}
			logger.Info("serving MCP on stdio", "data", a.g.data, "connectors", len(ex.Manifests()), "approver", approver, "calls_without_ids", string(mo.PerRequest))
			err = srv.RunStdio(ctx, a.stdin, a.stdout)
			if err != nil && ctx.Err() != nil {
				return nil // SIGINT or SIGTERM
			}
			return err
		},
	}
}
