package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/notify"
)

func (a *app) serveCommand() *cobra.Command {
	var listen string
	var testHooks bool
	var leaseTTL time.Duration
	c := &cobra.Command{
		Use:   "serve --config connhost.toml [--listen 127.0.0.1:8420]",
		Short: "Serve the HTTP API (production)",
		Long: `serve opens the ledger, loads the connectors, runs recovery, and serves
the HTTP API (see server/httpapi/openapi.json; GET /openapi.json on the
server) until SIGINT or SIGTERM, then drains requests and closes the ledger.
MCP clients reach the same tools at /mcp (streamable HTTP; see connhost mcp
--help for the _meta ids a runtime passes). A side-effecting MCP call
without them is refused (identity_required) unless [mcp]
allow_per_request_identity = true; browser pages on other origins get 403
unless [mcp] allow_origins lists them.
Reviewers and operators use the console at /ui/ in a browser (sign in
with a principal's token): the approvals inbox, the recovery queue, the
executions and the connectors, with approve, reject and resolve as the
principal's roles allow.

It listens on loopback by default and refuses a non-loopback address unless
a bearer token is configured, and unless it speaks TLS ([server] tls_cert
and tls_key, PEM files read again on SIGHUP; a pair that does not load
keeps the previous one) or [server] behind_tls_proxy = true says a
TLS-terminating proxy sits in front. The CLI trusts the system's roots
and those in the PEM file $CONNHOST_CA_FILE names.

The config file (TOML) holds the server settings, the credentials and the
connectors' config values; secrets should come from the environment
(token_env, <key>_env) and are never printed or logged:

  [server]
  listen = "127.0.0.1:8420"
  token_env = "CONNHOST_TOKEN"        # the runtime's token (principal "runtime")

  [[principals]]                      # repeatable: one per reviewer
  name = "rita"                       # recorded as the reviewer
  roles = ["approver"]                # runtime, approver, operator, metrics (/metrics only)
  token_env = "CONNHOST_TOKEN_RITA"

  [connectors.payments]
  base_url = "https://api.stripe.com"
  api_key_env = "STRIPE_SECRET_KEY"

Tenants are kept apart by namespaces. A principal with namespaces =
["tenant-a"] runs its calls there, sees, cancels, approves and resolves
only executions of its namespaces (another's id answers 404 as an unknown
one), and is refused (403 namespace_forbidden) a body or listing naming
another, and /metrics, which counts every namespace. Once one principal has namespaces every [[principals]] entry needs
them (["*"]: every namespace), and [server]'s token acts in "default"
unless [server] namespaces says otherwise. A namespace may have connector
values of its own:

  [namespaces.tenant-a.connectors.payments]
  api_key_env = "STRIPE_SECRET_KEY_TENANT_A"

Every principal has limits, set for all in [limits] and per principal by
the same keys in its entry: max_pending_approvals (default 1000; 429
too_many_pending_approvals), max_argument_bytes (default 262144; 413
arguments_too_large), calls_per_second and burst (default 0, no limit; 429
rate_limited with Retry-After). A refused call records nothing.

A fleet of servers shares one ledger on PostgreSQL: give each the same
--ledger (or [server] ledger_env naming a variable that holds the
connection string; it is never printed) and its own --node (default: the
host name). Each node holds a lease it renews; when a node dies, the others
take over its calls once its lease has expired (--lease-ttl), and a node
that cannot renew its lease stops taking work and fails /healthz. Approvals
and resolutions given through any node count for all of them.

The ledger's witness ([server] witness, or --witness; by default the data
directory's path plus ".witness") records what this deployment has
acknowledged of its ledger; keep it where a restore of the data directory,
or of the database, does not reach (another volume). serve refuses (exit 6)
a ledger that is missing, another one, or behind its witness, and on a
shared ledger stops taking work when it finds the database rolled back
while it runs; a backup restored on purpose is accepted with connhost
ledger accept-restore.

Compiled connector modules are kept outside the data directory, in
connhost/wazero in the user's cache directory (or [server] cache_dir, or
--cache-dir), keyed by each module's sha256, the wazero release and the
CPU: a new data directory, node or project on the machine loads them in
milliseconds instead of compiling them for seconds. A cache directory
that cannot be written, or that other users may write to, is not used
(each start compiles, and says why in its log).

Approving is another authority than executing. The runtime's token may
execute, cancel, recover and read, never approve, reject or resolve (403
forbidden_role). An "approver" approves, rejects and resolves; an "operator"
resolves, cancels and recovers. A decision is recorded under the name of the
principal whose token made it. Without an approver, approve and reject
answer 403 approval_not_configured, and the startup log says approvals are
disabled. Without any token, serve answers only loopback requests, which
may execute and read.

While it runs, serve writes server.json (URL and pid) into the data
directory, so that connhost approve, reject, resolve and cancel find it and
go through its API. Unknown keys, and connector keys the manifest does not
declare, are errors reported with file:line. Every key a manifest declares
in capabilities.config and not in config_optional (payments' api_key) must
have a value: serve, exec and every other command that opens the ledger
refuse to start without it, and a configured base_url must be an origin the
connector may reach. Flags given on the command line win over the file.

A connector may reach only the origins its manifest lists; a deployment
adds its own (a local test provider, a regional endpoint) with
allow_http = ["http://127.0.0.1:9090"] in its [connectors.<name>] table,
and every start logs the addition. With require_signoff = true in [server],
serve refuses every connector whose manifest or module changed since a
reviewer signed it off (connhost audit --sign), naming what changed.

Each call that starts to await approval or to need an operator, and each
session it fences, is POSTed to [notify] webhook_url, signed as Standard
Webhooks specifies (webhook-id, webhook-timestamp, webhook-signature
"v1,<base64 HMAC-SHA256>" with the whsec_ secret in the variable
secret_env names), with a link to the console under [server] public_url;
the host must be loopback or listed in [notify] allow_hosts. Deliveries
are retried with backoff and never hold a call up.`,
		Example: `  connhost serve --config docs/connhost.example.toml
  connhost serve --config docs/connhost.example.toml --listen 127.0.0.1:9000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if set := testHooksSet(); len(set) > 0 && !testHooks {
				return cli.Usagef("refusing to start: %s set in the environment: these test hooks kill the process at a crash point or lose the ledger's unsynced writes; unset them, or pass --allow-test-hooks if this is a crash test", strings.Join(set, " and "))
			} else if len(set) > 0 {
				a.logger().Warn("test hooks armed (--allow-test-hooks): this server may kill itself at a crash point or lose unsynced ledger writes", "set", set)
			}
			if a.g.config == "" {
				return cli.Usagef("serve needs --config FILE")
			}
			cfg, err := loadConfig(a.g.config, os.LookupEnv)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("listen") || cfg.Server.Listen == "" {
				cfg.Server.Listen = listen
			}
			if leaseTTL < 0 {
				return cli.Usagef("--lease-ttl must be positive")
			}
			// Refused before anything is opened: a refused start leaves
			// no ledger behind.
			if err := cfg.CheckListen(cfg.Server.Listen, a.logger()); err != nil {
				return err
			}
			return a.serveAPI(cmd.Context(), serveOptions{command: "serve", config: cfg, leaseTTL: leaseTTL})
		},
	}
	c.Flags().StringVar(&listen, "listen", server.DefaultListen, "address to listen on")
	c.Flags().BoolVar(&testHooks, "allow-test-hooks", false, "start even with "+crash.EnvVar+", "+crash.LoseUnsyncedEnv+" or "+crash.ClockOffsetEnv+" set (crash tests only)")
	c.Flags().DurationVar(&leaseTTL, "lease-ttl", 0, "on a shared ledger: other nodes take over this node's calls this long after it dies; it stops taking work if it cannot renew its lease within it (default [server] lease_ttl, else 15s)")
	return c
}

// testHooksSet names the crash-test hooks set in the environment:
// CONNHOST_CRASH_AT kills the process at a crash point,
// CONNHOST_LOSE_UNSYNCED=1 keeps the ledger's unsynced writes from
// surviving it, and CONNHOST_CLOCK_OFFSET runs the executor's clock
// ahead. A production server must run with none.
func testHooksSet() []string {
	var set []string
	for _, v := range []string{crash.EnvVar, crash.LoseUnsyncedEnv, crash.ClockOffsetEnv} {
		if os.Getenv(v) != "" {
			set = append(set, v)
		}
	}
	return set
}

// applyServerConfig takes data, manifests, modules and cache_dir from the
// config file unless they were given as flags (every command, before it
// runs).
func (a *app) applyServerConfig(cmd *cobra.Command, cfg *server.Config) {
	set := func(flag string, dst *string, v string) {
		if v != "" && !cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	set("data", &a.g.data, cfg.Server.Data)
	set("manifests", &a.g.manifests, cfg.Server.Manifests)
	set("modules", &a.g.modules, cfg.Server.Modules)
	set("cache-dir", &a.g.cacheDir, cfg.Server.CacheDir)
}

type serveOptions struct {
	// command is "serve" or "dev" (written into the discovery file).
	command string
	// config is the config served: the file's (dev: or an empty one),
	// with [server] listen set.
	config *server.Config
	// anonymous acts for every request when there are no principals; nil
	// is the config's, the runtime-only httpapi.LoopbackRuntime.
	anonymous *httpapi.Principal
	// configFunc overrides config's connector values (dev hands the
	// sandbox URLs).
	configFunc func(connector, key string) (string, bool)
	// allowUnpinned loads unpinned modules (dev).
	allowUnpinned bool
	// extraOrigins adds origins to a connector's http capability (dev).
	extraOrigins func(m *manifests.Manifest) []string
	// ready is called with the API's base URL once the server listens.
	ready func(url string)
	// leaseTTL is the node's lease TTL on a shared ledger (0: the
	// config's, else the default).
	leaseTTL time.Duration
	// channels are told what starts to wait, besides [notify]'s webhook
	// (dev's Mailpit).
	channels []notify.Channel
}

// serveAPI opens the executor (through a.open, with the flags over the
// config) and serves the API until ctx is done: server.New and Serve,
// with the discovery file, the startup lines and SIGHUP's TLS reload
// around them.
func (a *app) serveAPI(ctx context.Context, so serveOptions) error {
	logger := a.logger()
	cfg, err := a.serverConfig()
	if err != nil {
		return err
	}
	// The file's config as loaded for this command (dev's may name
	// another [notify]), with the flags' paths and ledger over it.
	file := *so.config
	file.Server.Data, file.Server.Manifests, file.Server.Modules = cfg.Server.Data, cfg.Server.Manifests, cfg.Server.Modules
	file.Server.Witness, file.Server.Ledger, file.Server.Node = cfg.Server.Witness, cfg.Server.Ledger, cfg.Server.Node
	// Listen first: a port already taken refuses the start before a
	// ledger is created.
	ln, err := net.Listen("tcp", file.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv, err := server.New(ctx, server.Options{
		Config:    &file,
		Logger:    logger,
		Anonymous: so.anonymous,
		Dev:       so.command == "dev",
		Channels:  so.channels,
		Ready:     so.ready,
		Open: func(ctx context.Context, o server.ExecutorOptions) (*host.Executor, error) {
			return a.open(ctx, openOptions{observer: o.Observer, logger: o.Logger, allowUnpinned: so.allowUnpinned, config: so.configFunc,
				extraOrigins: so.extraOrigins, server: true, leaseTTL: so.leaseTTL})
		},
	})
	if err != nil {
		ln.Close()
		return lockedError(ctx, a.g.data, err)
	}
	defer func() {
		if err := srv.Shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Error("close executor", "err", err)
		}
	}()
	scheme := "http"
	if file.Server.TLSCert != "" {
		scheme = "https"
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					srv.ReloadTLS()
				}
			}
		}()
	}
	url := server.URL(scheme, ln.Addr())
	// The discovery file is written before the startup line, so that
	// whoever waits for that line finds the file.
	principals := file.Credentials()
	removeInfo, err := writeServerInfo(a.g.data, serverInfo{
		URL: url, PID: os.Getpid(), Command: so.command, Auth: len(principals) > 0, Started: time.Now().UTC(),
	})
	if err != nil {
		// The API works without it; only the CLI's way to find it is lost.
		logger.Warn("cannot write the discovery file: connhost approve and resolve will not find this server", "err", err)
	} else {
		defer removeInfo()
	}
	return srv.Serve(ctx, ln)
}

// logger logs to stderr: JSON with --json, text otherwise, from
// --log-level up.
func (a *app) logger() *slog.Logger {
	lvl, err := parseLogLevel(a.g.logLevel)
	if err != nil {
		lvl = slog.LevelInfo // refused before any command runs
	}
	o := &slog.HandlerOptions{Level: lvl}
	if a.g.json {
		return slog.New(slog.NewJSONHandler(a.stderr, o))
	}
	return slog.New(slog.NewTextHandler(a.stderr, o))
}

// loadManifests loads every manifest in --manifests, or the shipped
// connectors' when the command runs on them (a.shipped).
func (a *app) loadManifests() ([]*manifests.Manifest, error) {
	if a.shipped {
		return connhost.Manifests()
	}
	if err := mustExist("--manifests", a.g.manifests); err != nil {
		return nil, err
	}
	ms, err := manifests.LoadDir(a.g.manifests)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no manifests (*.toml) in %s (set --manifests)", a.g.manifests)
	}
	return ms, nil
}
