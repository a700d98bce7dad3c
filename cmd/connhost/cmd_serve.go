package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/internal/console"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/httpapi"
	"github.com/connhost/connhost/internal/mcpserver"
	"github.com/connhost/connhost/internal/notify"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/internal/telemetry/otlp"
	"github.com/connhost/connhost/internal/waiting"
	"github.com/connhost/connhost/manifests"
)

// DefaultListen is the default address of serve and dev: loopback only.
const DefaultListen = "127.0.0.1:8420"

// minTokenLength is the shortest bearer token serve takes without a
// warning, and on a non-loopback listen at all: 32 characters, as 16
// random bytes in hex (openssl rand -hex 32 makes 64).
const minTokenLength = 32

// errShortToken refuses a non-loopback listen with a token shorter than
// minTokenLength.
var errShortToken = errors.New("refusing to listen on a non-loopback address with bearer tokens shorter than 32 characters: whoever reaches the port could guess them (and the server proof lets an impostor test guesses offline); make each one 32 random bytes, e.g. openssl rand -hex 32")

// shortTokens names the principals whose token is shorter than
// minTokenLength, with its length.
func shortTokens(ps []httpapi.Principal) []string {
	var out []string
	for _, p := range ps {
		if n := utf8.RuneCountInString(p.Token); n < minTokenLength {
			out = append(out, fmt.Sprintf("%s (%d characters)", p.Name, n))
		}
	}
	return out
}

// errPublicWithoutToken refuses a non-loopback listen address without a
// bearer token.
var errPublicWithoutToken = errors.New("refusing to listen on a non-loopback address without a bearer token (set [server] token_env, or add [[principals]], in the config)")

// isLoopbackListen reports whether addr ("host:port") binds only loopback
// interfaces. An empty host (":8420") binds every interface.
func isLoopbackListen(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		// A name is only as loopback as what it resolves to.
		addrs, err := net.LookupHost(h)
		if err != nil || len(addrs) == 0 {
			return false
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
				return false
			}
		}
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (a *app) serveCommand() *cobra.Command {
	var listen string
	var testHooks bool
	var leaseTTL time.Duration
	c := &cobra.Command{
		Use:   "serve --config connhost.toml [--listen 127.0.0.1:8420]",
		Short: "Serve the HTTP API (production)",
		Long: `serve opens the ledger, loads the connectors, runs recovery, and serves
the HTTP API (see internal/httpapi/openapi.json; GET /openapi.json on the
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
				return usagef("refusing to start: %s set in the environment: these test hooks kill the process at a crash point or lose the ledger's unsynced writes; unset them, or pass --allow-test-hooks if this is a crash test", strings.Join(set, " and "))
			} else if len(set) > 0 {
				a.logger().Warn("test hooks armed (--allow-test-hooks): this server may kill itself at a crash point or lose unsynced ledger writes", "set", set)
			}
			if a.g.config == "" {
				return usagef("serve needs --config FILE")
			}
			cfg, err := loadConfig(a.g.config, os.LookupEnv)
			if err != nil {
				return err
			}
			a.applyServerConfig(cmd, cfg)
			if cmd.Flags().Changed("listen") || cfg.Server.Listen == "" {
				cfg.Server.Listen = listen
			}
			principals := cfg.principals()
			if !isLoopbackListen(cfg.Server.Listen) && len(principals) == 0 {
				return fmt.Errorf("%w: %s", errPublicWithoutToken, cfg.Server.Listen)
			}
			if !isLoopbackListen(cfg.Server.Listen) && cfg.Server.TLSCert == "" && !cfg.Server.BehindTLSProxy {
				return fmt.Errorf("%w (listen %s)", errPlainPublicListen, cfg.Server.Listen)
			}
			if short := shortTokens(principals); len(short) > 0 {
				if !isLoopbackListen(cfg.Server.Listen) {
					return fmt.Errorf("%w (listen %s): %s", errShortToken, cfg.Server.Listen, strings.Join(short, ", "))
				}
				a.logger().Warn("short bearer tokens: a token under "+strconv.Itoa(minTokenLength)+" characters can be guessed; this server listens on loopback only, where that is allowed (a non-loopback listen refuses to start); make each one 32 random bytes, e.g. openssl rand -hex 32",
					"principals", short)
			}
			if !isLoopbackListen(cfg.Server.Listen) && cfg.Server.PublicURL == "" {
				a.logger().Warn("no [server] public_url: clients check the server's proof against the URL they dial, and the proof names only the listen address; set public_url to the URL clients use, or they will not send their tokens",
					"listen", cfg.Server.Listen)
			}
			if leaseTTL < 0 {
				return usagef("--lease-ttl must be positive")
			}
			return a.serveAPI(cmd.Context(), serveOptions{command: "serve", listen: cfg.Server.Listen, principals: principals,
				anonymous: cfg.anonymous(), config: cfg, leaseTTL: leaseTTL, mcp: mcpOptions(cfg, false)})
		},
	}
	c.Flags().StringVar(&listen, "listen", DefaultListen, "address to listen on")
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

// applyServerConfig takes data, manifests and modules from the config file
// unless they were given as flags.
func (a *app) applyServerConfig(cmd *cobra.Command, cfg *Config) {
	set := func(flag string, dst *string, v string) {
		if v != "" && !cmd.Flags().Changed(flag) {
			*dst = v
		}
	}
	set("data", &a.g.data, cfg.Server.Data)
	set("manifests", &a.g.manifests, cfg.Server.Manifests)
	set("modules", &a.g.modules, cfg.Server.Modules)
}

type serveOptions struct {
	// command is "serve" or "dev" (written into the discovery file).
	command string
	listen  string
	// principals are the API's credentials (see httpapi.Options).
	principals []httpapi.Principal
	// anonymous acts for every request when there are no principals; nil
	// is httpapi's default, the runtime-only httpapi.LoopbackRuntime.
	anonymous *httpapi.Principal
	config    *Config
	// configFunc overrides config (dev hands the sandbox URLs).
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
	// mcp are the options of /mcp's server (see mcpOptions); serveAPI
	// sets the logger and the body cap.
	mcp mcpserver.Options
	// notify is the [notify] table of dev's --config (serve reads
	// config's).
	notify *NotifyConfig
	// mailURL is the Mailpit dev mails what starts to wait to ("":
	// none).
	mailURL string
}

// mcpOptions are the MCP server's options from the config's [mcp] table
// (cfg may be nil). A side-effecting call without a stable identity is
// refused unless the config allows it, or unless lenient (dev, connhost
// mcp without a config), where it runs with a warning.
func mcpOptions(cfg *Config, lenient bool) mcpserver.Options {
	o := mcpserver.Options{PerRequest: mcpserver.PerRequestRefuse}
	if lenient {
		o.PerRequest = mcpserver.PerRequestWarn
	}
	if cfg != nil {
		o.Approver = cfg.MCP.Approver
		o.ApprovalWait = cfg.MCP.ApprovalWait
		o.TrustedOrigins = cfg.MCP.AllowOrigins
		if cfg.MCP.AllowPerRequest {
			o.PerRequest = mcpserver.PerRequestAllow
		}
	}
	return o
}

// serveAPI opens the executor and serves the API until ctx is done.
func (a *app) serveAPI(ctx context.Context, so serveOptions) error {
	logger := a.logger()
	if so.config != nil && so.config.Telemetry.Endpoint != "" {
		// Before the executor opens: the recovery pass of Open is traced.
		stop, traced, err := startTelemetry(ctx, so.config.Telemetry, logger)
		if err != nil {
			return err
		}
		defer stop()
		logger = traced
	}
	apiOpts := httpapi.Options{Principals: so.principals, Anonymous: so.anonymous, Logger: logger, Build: buildinfo.Read()}
	// Failed tokens and sign-ins are counted per client; behind a proxy
	// the client is the one the proxy names.
	apiOpts.Throttle = httpapi.NewThrottle(httpapi.ThrottleOptions{Logger: logger,
		ForwardedFor: so.config != nil && so.config.Server.BehindTLSProxy})
	apiOpts.EnsureDefaults()
	if err := apiOpts.Validate(); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	apiOpts.Registry = reg
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// What waits for a human is logged as it starts to wait, woken by
	// the executor's transitions.
	ann := waiting.NewAnnouncer(logger)
	o := openOptions{observer: ann.Observer(httpapi.NewObserver(reg)), logger: logger, allowUnpinned: so.allowUnpinned, config: so.configFunc, extraOrigins: so.extraOrigins,
		prewarm: true, server: true, leaseTTL: so.leaseTTL}
	if o.config == nil && so.config != nil {
		o.config = so.config.lookup
	}
	if so.config != nil {
		ms, err := a.loadManifests()
		if err != nil {
			return err
		}
		if err := so.config.check(ms); err != nil {
			return err
		}
	}
	start := time.Now()
	ex, err := a.open(ctx, o)
	if err != nil {
		return lockedError(ctx, a.g.data, err)
	}
	defer func() {
		if err := ex.Close(context.WithoutCancel(ctx)); err != nil {
			logger.Error("close executor", "err", err)
		}
	}()
	if l, _, fleet := ex.NodeLease(); fleet {
		dsn, _, _ := a.sharedLedger()
		logger.Info("executor open", "data", a.g.data, "ledger", redactDSN(dsn), "node", l.Node, "epoch", l.Epoch,
			"connectors", len(ex.Manifests()), "took", time.Since(start).Round(time.Millisecond))
	} else {
		logger.Info("executor open", "data", a.g.data, "connectors", len(ex.Manifests()), "took", time.Since(start).Round(time.Millisecond))
	}
	ln, err := net.Listen("tcp", so.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scheme := "http"
	if so.config != nil && so.config.Server.TLSCert != "" {
		certs, err := newCertReloader(so.config.Server.TLSCert, so.config.Server.TLSKey)
		if err != nil {
			ln.Close()
			return err
		}
		ln, scheme = tls.NewListener(ln, certs.config()), "https"
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					certs.logReload(logger)
				}
			}
		}()
	}
	url := scheme + "://" + ln.Addr().String()
	public := publicURL(so.config, scheme, ln.Addr())
	// The server proof signs the URLs the server is reached at: the
	// public one and the listener's (as the discovery file names it).
	listenURL := scheme + strings.TrimPrefix(clientURL(ln.Addr()), "http")
	apiOpts.URLs = []string{listenURL}
	if public != listenURL {
		apiOpts.URLs = []string{public, listenURL}
	}
	// Browsers reach the server over https when it terminates TLS, when a
	// proxy does, or when the URL humans are given says so: the console's
	// cookies are then Secure and every answer carries HSTS.
	apiOpts.Secure = scheme == "https" || strings.HasPrefix(public, "https://") ||
		(so.config != nil && so.config.Server.BehindTLSProxy)
	// What starts to wait is told, besides the log, to the configured
	// webhook and to dev's Mailpit.
	if err := a.startNotifier(ctx, so, ann, reg, logger, public); err != nil {
		ln.Close()
		return err
	}
	ann.Start(ctx, ex.Ledger())
	// Retries come due and approvals expire while no runtime is asking.
	go ex.Run(ctx, time.Second)

	mo := so.mcp
	mo.Approver = "" // over HTTP the principal approves
	mo.Logger, mo.MaxBodyBytes, mo.Version = logger, apiOpts.MaxBodyBytes, apiOpts.Build.Short()
	if mo.PerRequest == "" {
		mo.PerRequest = mcpserver.PerRequestRefuse
	}
	mcpSrv, err := mcpserver.New(ex, mo)
	if err != nil {
		return err
	}
	apiOpts.MCP = mcpSrv.HTTPHandler()
	ui, err := console.New(console.Options{Executor: ex, Principals: so.principals, Anonymous: apiOpts.Anonymous,
		Dev: so.command == "dev", Secure: apiOpts.Secure, Throttle: apiOpts.Throttle, Audit: a.consoleAudit(ex), Logger: logger})
	if err != nil {
		return err
	}
	apiOpts.Console = ui
	handler, err := httpapi.New(ex, apiOpts)
	if err != nil {
		return err
	}
	// The request's span, when tracing is on; health checks and scrapes
	// only when their caller traces them.
	handler = telemetry.Handler(handler, "/healthz", "/metrics")
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	// The discovery file is written before the startup line, so that
	// whoever waits for that line finds the file.
	removeInfo, err := writeServerInfo(a.g.data, serverInfo{
		URL: listenURL, PID: os.Getpid(), Command: so.command, Auth: len(so.principals) > 0, Started: time.Now().UTC(),
	})
	if err != nil {
		// The API works without it; only the CLI's way to find it is lost.
		logger.Warn("cannot write the discovery file: connhost approve and resolve will not find this server", "err", err)
	} else {
		defer removeInfo()
	}
	logAuthority(logger, apiOpts)
	logScopes(logger, so.principals)
	logger.Info("serving the HTTP API", "url", url, "mcp", url+"/mcp", "console", url+console.Prefix, "auth", len(so.principals) > 0, "principals", principalNames(so.principals), "tls", scheme == "https")
	if so.ready != nil {
		so.ready(url)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var fatal error
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	case <-ex.Fatal():
		// Another live process serves under this node id: it keeps it.
		fatal = fmt.Errorf("serve: %w", ex.Health())
		logger.Error("stopping", "err", fatal)
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(fatal, fmt.Errorf("shutdown: %w", err))
	}
	return fatal
}

// startTelemetry exports traces as [telemetry] says (internal/telemetry/otlp)
// and returns what stops it (exporting what is queued) and logger, whose
// records made with a traced context name trace_id and span_id.
func startTelemetry(ctx context.Context, tc TelemetryConfig, logger *slog.Logger) (stop func(), traced *slog.Logger, err error) {
	o := tc.options()
	o.Logger, o.ServiceVersion = logger, buildinfo.Read().Short()
	shutdown, err := otlp.Setup(ctx, o)
	if err != nil {
		return nil, nil, fmt.Errorf("[telemetry]: %w", err)
	}
	logger.Info("telemetry: exporting traces over OTLP/HTTP", "endpoint", o.Endpoint, "sampler", tc.sampler(), "headers", tc.headerNames())
	return func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("telemetry: flushing the last spans failed", "err", err)
		}
	}, slog.New(telemetry.LogHandler(logger.Handler())), nil
}

// consoleAudit returns the audit of ex's connectors for the console's
// Connectors page: the report `connhost audit` makes of them, their
// modules probed as it probes them.
func (a *app) consoleAudit(ex *host.Executor) func(context.Context) audit.Report {
	return func(ctx context.Context) audit.Report {
		p := a.newModuleProber(ctx)
		defer p.close()
		return audit.Audit(ex.Manifests(), audit.Options{Facts: p.facts})
	}
}

// publicURL is the URL humans reach the server at: [server] public_url,
// else the listen address's (loopback for an unspecified one).
func publicURL(cfg *Config, scheme string, addr net.Addr) string {
	if cfg != nil && cfg.Server.PublicURL != "" {
		return cfg.Server.PublicURL
	}
	return scheme + strings.TrimPrefix(clientURL(addr), "http")
}

// startNotifier tells what starts to wait (ann's OnWait) to the webhook of
// [notify] and, in dev, to its Mailpit, with console links under base.
func (a *app) startNotifier(ctx context.Context, so serveOptions, ann *waiting.Announcer, reg prometheus.Registerer, logger *slog.Logger, base string) error {
	var chans []notify.Channel
	if so.notify == nil && so.config != nil {
		so.notify = &so.config.Notify
	}
	if so.notify != nil && so.notify.WebhookURL != "" {
		n := *so.notify
		wh, err := notify.NewWebhook(notify.WebhookOptions{URL: n.WebhookURL, Key: n.Key, AllowHosts: n.AllowHosts})
		if err != nil {
			return err
		}
		chans = append(chans, wh)
		logger.Info("notifications: a signed webhook for each call that starts to wait", "webhook", redactURL(n.WebhookURL), "console", base+"/ui/")
	}
	if so.mailURL != "" {
		chans = append(chans, notify.NewMailpit(so.mailURL, "connhost@localhost", "reviewer@localhost"))
		logger.Info("notifications: an e-mail to the local Mailpit for each call that starts to wait", "mailpit", so.mailURL,
			"to", "reviewer@localhost", "search", "tag:"+notify.MailTag)
	}
	if len(chans) == 0 {
		return nil
	}
	nt, err := notify.New(notify.Options{Logger: logger, Registry: reg, PublicURL: base}, chans...)
	if err != nil {
		return err
	}
	nt.Start(ctx)
	ann.OnWait = func(w waiting.Wait) { nt.Notify(notify.FromWait(w, base)) }
	return nil
}

// redactURL is raw without its query (a receiver's URL may carry a token
// there).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(not shown)"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

// logAuthority logs who may decide what through the API, in the terms an
// operator acts on: dev's open door, and roles no principal holds.
func logAuthority(logger *slog.Logger, o httpapi.Options) {
	has := func(r httpapi.Role) bool {
		if len(o.Principals) == 0 {
			return o.Anonymous.Has(r)
		}
		return slices.ContainsFunc(o.Principals, func(p httpapi.Principal) bool { return p.Has(r) })
	}
	if len(o.Principals) == 0 && o.Anonymous.Has(httpapi.RoleApprover) {
		logger.Warn("no credentials: anyone on this machine can approve, reject and resolve calls through this API",
			"recorded_as", o.Anonymous.Name)
	}
	if !has(httpapi.RoleApprover) {
		logger.Warn("approvals disabled: no principal has role approver, so approve and reject answer 403 approval_not_configured; add a [[principals]] entry with roles = [\"approver\"] to the config")
	}
	for _, p := range o.Principals {
		if selfApprover(p.Roles) {
			logger.Warn("principal may approve the calls it makes itself (allow_self_approval): its approvals are no second pair of eyes",
				"principal", p.Name)
		}
	}
	if len(o.Principals) > 0 && !has(httpapi.RoleRuntime) {
		logger.Warn("no principal has role runtime: executions are refused (set [server] token_env in the config)")
	}
}

// logScopes logs, once any principal is bound to namespaces, where each
// principal acts.
func logScopes(logger *slog.Logger, ps []httpapi.Principal) {
	if !slices.ContainsFunc(ps, func(p httpapi.Principal) bool { return len(p.Namespaces) > 0 }) {
		return
	}
	for _, p := range ps {
		nss := p.Namespaces
		if len(nss) == 0 {
			nss = []string{"* (every namespace)"}
		}
		logger.Info("principal scope", "principal", p.Name, "roles", p.Roles, "namespaces", nss)
	}
}

func principalNames(ps []httpapi.Principal) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names
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
