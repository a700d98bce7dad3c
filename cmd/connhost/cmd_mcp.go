package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/connhost/connhost/internal/httpapi"
	"github.com/connhost/connhost/internal/mcpserver"
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

Every operation of every manifest is a tool named "connector.operation".
connhost's guarantees are keyed on (session, tool-call id), and MCP's
tools/call carries neither, so a runtime passes its ids in the request's
_meta:

  "io.connhost/session_id"    the session (string)
  "io.connhost/tool_call_id"  the model's tool-call id (string)
  "io.connhost/namespace"     optional (string)
  "io.connhost/resumed"       optional (boolean): replayed from older history

Sending a call again with the same ids returns the recorded outcome
instead of acting twice. Without them, the ids are made up for the request
alone: the audit trail and the result say so, and a retry after a
disconnect is a new call.

A gated call answers awaiting_approval. With [mcp] approver = "NAME" in the
config, a client that supports elicitation instead shows the user the exact
call (operation, arguments, digest, expiry) and records the answer as
NAME's approval or rejection. A client's notifications/cancelled cancels
the execution (as connhost cancel); a progress token gets a notification
per retry.

In a desktop client's MCP configuration:

  {"mcpServers": {"connhost": {"command": "connhost",
    "args": ["mcp", "--data", "/home/me/.connhost", "--config", "/home/me/connhost.toml"]}}}`,
		Example: `  connhost mcp --data ~/.connhost --manifests ./manifests --modules ./build --config connhost.toml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			approver := ""
			var cfg *Config
			if a.g.config != "" {
				var err error
				if cfg, err = loadConfig(a.g.config, os.LookupEnv); err != nil {
					return err
				}
				a.applyServerConfig(cmd, cfg)
				approver = cfg.MCP.Approver
			}
			ctx := cmd.Context()
			logger := a.logger()
			ex, err := a.open(ctx, openOptions{logger: logger})
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
			go ex.Run(runCtx, time.Second)
			srv, err := mcpserver.New(ex, mcpserver.Options{Approver: approver, Logger: logger})
			if err != nil {
				return err
			}
			if approver == "" {
				logger.Warn("approvals in the client are off: gated calls answer awaiting_approval (set [mcp] approver in the config to ask the client's user)")
			}
			logger.Info("serving MCP on stdio", "data", a.g.data, "connectors", len(ex.Manifests()), "approver", approver)
			err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(a.stdin), Writer: nopWriteCloser{a.stdout}})
			if err != nil && ctx.Err() != nil {
				return nil // SIGINT or SIGTERM
			}
			return err
		},
	}
}

// nopWriteCloser keeps the transport from closing the process's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
