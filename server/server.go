package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/server/console"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/mcpserver"
	"github.com/connhost/connhost/server/notify"
	"github.com/connhost/connhost/server/tooldefs"
	"github.com/connhost/connhost/server/waiting"
)

// Options configure New.
type Options struct {
	// Config is the server's configuration: its credentials, limits,
	// [mcp], [notify] and, unless Executor is given, what the executor is
	// opened on (see OpenExecutor). New validates it (Config.Validate).
	// The default value (nil) is an empty config: loopback only, no
	// credentials, the paths' defaults.
	Config *Config
	// Executor is an executor the caller opened (host.Open) and owns: the
	// server serves it and never closes it. The default value (nil) makes
	// New open one with Open, and Shutdown close it.
	Executor *host.Executor
	// Open opens the executor when Executor is nil, with o's Logger and
	// Observer (what waits for a human is announced as it starts to wait,
	// and /metrics counts the executor's work, through that observer).
	// The default value is OpenExecutor on Config.
	Open func(ctx context.Context, o ExecutorOptions) (*host.Executor, error)
	// Logger receives the server's logs: one record per request, what
	// starts to wait for a human, the executor's. The default value is
	// slog.Default().
	Logger *slog.Logger
	// Anonymous is the principal of every request when Config has no
	// credentials (httpapi.Options.Anonymous). The default value is the
	// runtime-only httpapi.LoopbackRuntime with Config's [limits]; connhost
	// dev passes httpapi.DevLoopback.
	Anonymous *httpapi.Principal
	// Dev marks connhost dev: the console says so on every page, and an
	// MCP call without ids runs (with a warning) unless [mcp] says
	// otherwise. The default value is false.
	Dev bool
	// Channels are told what starts to wait for a human, besides
	// [notify]'s webhook (connhost dev's Mailpit). The default value is
	// none.
	Channels []notify.Channel
	// Ready, when set, is called by Serve with the base URL it serves at,
	// once it listens and has logged who may decide what and the
	// "serving the HTTP API" line, before the first request is answered.
	// The default value is nil.
	Ready func(url string)
}

// Server serves an executor's HTTP API, its MCP endpoint (/mcp) and its
// console (/ui/) behind one authentication, and runs what a server runs
// beside its requests: the executor's background pass (retries that come
// due, approvals that expire), the log of what starts to wait for a human
// and its notifications. Its methods are safe for concurrent use.
type Server struct {
	cfg    *Config
	ex     *host.Executor
	owned  bool
	logger *slog.Logger
	ann    *waiting.Announcer
	certs  *certReloader
	chans  []notify.Channel
	ready  func(url string)
	api    httpapi.Options
	mcp    *mcpserver.Server

	mu      sync.Mutex
	handler http.Handler
	running bool
	stop    context.CancelFunc
	done    chan struct{}
	servers map[*http.Server]bool
	closed  bool
	// stopTelemetry exports the spans still queued and stops tracing.
	stopTelemetry func()
}

// New returns a server of opts.Executor, or of the executor it opens from
// opts.Config. It serves nothing until Serve, or until the caller serves
// Handler itself; Shutdown releases it. A config with a [telemetry]
// endpoint starts exporting traces (StartTelemetry) before the executor
// opens, so that its recovery pass is traced; Shutdown flushes them.
func New(ctx context.Context, opts Options) (*Server, error) {
	cfg := opts.Config
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	stopTelemetry := func() {}
	if cfg.Telemetry.Endpoint != "" {
		// Before the executor opens: the recovery pass of Open is traced.
		stop, traced, err := StartTelemetry(ctx, cfg.Telemetry, logger)
		if err != nil {
			return nil, err
		}
		stopTelemetry, logger = stop, traced
	}
	s, err := newServer(ctx, opts, cfg, logger)
	if err != nil {
		stopTelemetry()
		return nil, err
	}
	s.stopTelemetry = stopTelemetry
	return s, nil
}

// newServer is New once tracing is set up, logging to logger.
func newServer(ctx context.Context, opts Options, cfg *Config, logger *slog.Logger) (*Server, error) {
	principals := cfg.Credentials()
	anon := opts.Anonymous
	if anon == nil {
		anon = cfg.Anonymous()
	}
	api := httpapi.Options{Principals: principals, Anonymous: anon, Logger: logger, Build: buildinfo.Read()}
	// Failed tokens and sign-ins are counted per client; behind a proxy
	// the client is the one the proxy names.
	api.Throttle = httpapi.NewThrottle(httpapi.ThrottleOptions{Logger: logger, ForwardedFor: cfg.Server.BehindTLSProxy})
	api.EnsureDefaults()
	if err := api.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	api.Registry = reg
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Browsers reach the server over https when it terminates TLS, when a
	// proxy does, or when the URL humans are given says so: the console's
	// cookies are then Secure and every answer carries HSTS.
	api.Secure = cfg.Server.TLSCert != "" || cfg.Server.BehindTLSProxy || strings.HasPrefix(cfg.Server.PublicURL, "https://")
	if cfg.Server.PublicURL != "" {
		api.URLs = []string{cfg.Server.PublicURL}
	}
	s := &Server{cfg: cfg, ex: opts.Executor, logger: logger, ann: waiting.NewAnnouncer(logger), chans: opts.Channels, ready: opts.Ready, servers: map[*http.Server]bool{}}
	if cfg.Server.TLSCert != "" {
		certs, err := newCertReloader(cfg.Server.TLSCert, cfg.Server.TLSKey)
		if err != nil {
			return nil, err
		}
		s.certs = certs
	}
	if s.ex == nil {
		// What waits for a human is logged as it starts to wait, woken
		// by the executor's transitions, which /metrics counts too.
		o := ExecutorOptions{Logger: logger, Observer: s.ann.Observer(httpapi.NewObserver(reg))}
		c := *cfg
		c.EnsureDefaults()
		open := opts.Open
		if open == nil {
			open = func(ctx context.Context, o ExecutorOptions) (*host.Executor, error) { return OpenExecutor(ctx, &c, o) }
		}
		start := time.Now()
		ex, err := open(ctx, o)
		if err != nil {
			return nil, err
		}
		s.ex, s.owned = ex, true
		if l, _, fleet := ex.NodeLease(); fleet {
			logger.Info("executor open", "data", c.Server.Data, "ledger", RedactDSN(c.Server.Ledger), "node", l.Node, "epoch", l.Epoch,
				"connectors", len(ex.Manifests()), "took", time.Since(start).Round(time.Millisecond))
		} else {
			logger.Info("executor open", "data", c.Server.Data, "connectors", len(ex.Manifests()), "took", time.Since(start).Round(time.Millisecond))
		}
	}
	fail := func(err error) (*Server, error) {
		if s.owned {
			_ = s.ex.Close(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	if _, err := tooldefs.NamesOf(s.ex.Manifests()); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	mo := cfg.MCPOptions(opts.Dev)
	mo.Approver = ""                     // over HTTP the principal approves
	mo.ConsoleURL = cfg.Server.PublicURL // else the listen URL, once Serve knows it
	mo.Logger, mo.MaxBodyBytes, mo.Version = logger, api.MaxBodyBytes, api.Build.Short()
	mcpSrv, err := mcpserver.New(s.ex, mo)
	if err != nil {
		return fail(err)
	}
	api.MCP = mcpSrv.HTTPHandler()
	s.mcp = mcpSrv
	ui, err := console.New(console.Options{Executor: s.ex, Principals: principals, Anonymous: api.Anonymous,
		Dev: opts.Dev, Secure: api.Secure, Throttle: api.Throttle, Audit: s.audit, Logger: logger,
		OIDC: cfg.ConsoleOIDC()})
	if err != nil {
		return fail(err)
	}
	api.Console = ui
	s.api = api
	return s, nil
}

// Executor returns the executor the server serves.
func (s *Server) Executor() *host.Executor { return s.ex }

// audit is the console's audit of the connectors: the report `connhost
// audit` makes of them, their modules probed as it probes them.
func (s *Server) audit(ctx context.Context) audit.Report {
	c := *s.cfg
	c.EnsureDefaults()
	cache := c.Server.CacheDir
	if cache == "" {
		cache, _ = host.DefaultCacheDir()
	}
	p := audit.NewProber(ctx, c.Server.Modules, cache)
	defer p.Close()
	return audit.Audit(s.ex.Manifests(), audit.Options{Facts: p.Facts})
}

// Handler returns the server's HTTP handler: the HTTP API (GET
// /openapi.json describes it), /mcp, /metrics and the console at /ui/,
// behind the config's credentials, for a caller that serves it from its
// own http.Server (and runs Run beside it). The
// server proof signs the config's public_url, and the URL of the
// listener of a Serve called before the first Handler.
func (s *Server) Handler() http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handler == nil {
		h, err := httpapi.New(s.ex, s.api)
		if err != nil {
			// New checked what httpapi.New checks.
			s.logger.Error("server: the HTTP API cannot be served", "err", err)
			h = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "connhost: the HTTP API cannot be served (see the server's log)", http.StatusInternalServerError)
			})
		}
		// The request's span, when tracing is on; health checks and
		// scrapes only when their caller traces them.
		s.handler = telemetry.Handler(h, "/healthz", "/metrics")
	}
	return s.handler
}

// Run does what a server does beside its requests until ctx ends or
// Shutdown is called: the executor's background pass every second
// (host.Executor.Run: retries that come due, approvals that expire), the
// log of what starts to wait for a human, and its notifications
// ([notify]'s webhook, Options.Channels) with console links under the
// config's public_url. Serve runs it; a caller that serves Handler from
// its own http.Server runs it beside. It returns at once, with nil, if it
// runs already.
func (s *Server) Run(ctx context.Context) error {
	done, err := s.start(ctx, s.cfg.Server.PublicURL)
	if err != nil || done == nil {
		return err
	}
	<-done
	return nil
}

// start starts what Run runs, with console links under base; done is
// closed when it has stopped (nil: it runs already, or the server is shut
// down).
func (s *Server) start(ctx context.Context, base string) (done chan struct{}, err error) {
	s.mu.Lock()
	if s.running || s.closed {
		s.mu.Unlock()
		return nil, nil
	}
	ctx, stop := context.WithCancel(ctx)
	done = make(chan struct{})
	s.running, s.stop, s.done = true, stop, done
	s.mu.Unlock()
	if base != "" && s.mcp != nil {
		s.mcp.SetConsoleURL(base) // the console links of URL-mode elicitation
	}
	if err := s.notify(ctx, base); err != nil {
		stop()
		close(done)
		return nil, err
	}
	s.ann.Start(ctx, s.ex.Ledger())
	go func() {
		defer close(done)
		s.ex.Run(ctx, time.Second)
	}()
	return done, nil
}

// notify tells what starts to wait (the Announcer's OnWait) to [notify]'s
// webhook and to Options.Channels, with console links under base.
func (s *Server) notify(ctx context.Context, base string) error {
	chans := s.chans
	if n := s.cfg.Notify; n.WebhookURL != "" {
		wh, err := notify.NewWebhook(notify.WebhookOptions{URL: n.WebhookURL, Key: n.Key, AllowHosts: n.AllowHosts})
		if err != nil {
			return err
		}
		chans = append([]notify.Channel{wh}, chans...)
		s.logger.Info("notifications: a signed webhook for each call that starts to wait", "webhook", redactURL(n.WebhookURL), "console", base+"/ui/")
	}
	if len(chans) == 0 {
		return nil
	}
	nt, err := notify.New(notify.Options{Logger: s.logger, Registry: s.api.Registry, PublicURL: base}, chans...)
	if err != nil {
		return err
	}
	nt.Start(ctx)
	s.ann.OnWait = func(w waiting.Wait) { nt.Notify(notify.FromWait(w, base)) }
	return nil
}

// Serve serves Handler on ln (over TLS with [server] tls_cert and
// tls_key), and runs what Run runs, until ctx ends, Shutdown is called,
// or the executor stops taking work (another live process serves under
// this node id on a shared ledger). When ctx ends it stops accepting and
// lets the requests under way finish (up to 30s), then returns nil; after
// Shutdown it returns nil; else the error that stopped it. It refuses a
// listener that CheckListen refuses.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.cfg.CheckListen(ln.Addr().String(), nil); err != nil {
		return err
	}
	scheme := "http"
	if s.certs != nil {
		ln, scheme = tls.NewListener(ln, s.certs.config()), "https"
	}
	listenURL := URL(scheme, ln.Addr())
	base := s.cfg.Server.PublicURL
	if base == "" {
		base = listenURL
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("server: shut down")
	}
	// The server proof signs the URLs the server is reached at: the
	// public one and the listener's.
	if s.handler == nil && !containsString(s.api.URLs, listenURL) {
		s.api.URLs = append(s.api.URLs, listenURL)
	}
	s.mu.Unlock()
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	s.servers[srv] = true
	s.mu.Unlock()
	if _, err := s.start(ctx, base); err != nil {
		s.mu.Lock()
		delete(s.servers, srv)
		s.mu.Unlock()
		return err
	}
	logAuthority(s.logger, s.api)
	logScopes(s.logger, s.api.Principals)
	s.logger.Info("serving the HTTP API", "url", listenURL, "mcp", listenURL+"/mcp", "console", listenURL+console.Prefix,
		"auth", len(s.api.Principals) > 0, "principals", principalNames(s.api.Principals), "tls", scheme == "https")
	if s.ready != nil {
		s.ready(listenURL)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var fatal error
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	case <-s.ex.Fatal():
		// Another live process serves under this node id: it keeps it.
		fatal = fmt.Errorf("serve: %w", s.ex.Health())
		s.logger.Error("stopping", "err", fatal)
	}
	s.logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return errors.Join(fatal, fmt.Errorf("shutdown: %w", err))
	}
	return fatal
}

// ReloadTLS reads [server] tls_cert and tls_key again (connhost serve
// does on SIGHUP) and logs the outcome; a pair that does not load leaves
// the one in use in place. Without TLS it does nothing.
func (s *Server) ReloadTLS() {
	if s.certs != nil {
		s.certs.logReload(s.logger)
	}
}

// Shutdown stops what Serve serves (letting the requests under way finish
// until ctx ends) and what Run runs, and closes the executor New opened
// (not one the caller gave). The server cannot be used again.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	servers := s.servers
	stop, done := s.stop, s.done
	s.mu.Unlock()
	var errs []error
	for srv := range servers {
		if err := srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	if stop != nil {
		stop()
		<-done
	}
	if s.owned {
		if err := s.ex.Close(context.WithoutCancel(ctx)); err != nil {
			errs = append(errs, fmt.Errorf("close executor: %w", err))
		}
	}
	s.stopTelemetry()
	return errors.Join(errs...)
}

// URL is the base URL a client on this machine uses for a listener on
// addr: an unspecified address (":8420", "0.0.0.0") is reached on
// loopback.
func URL(scheme string, addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + "://" + addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if ip.To4() != nil {
			host = "127.0.0.1"
		} else {
			host = "::1"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
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
