package server

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
	"github.com/connhost/connhost/server/notify"
)

// Config is a connhost.toml file:
//
//	[server]
//	listen = "127.0.0.1:8420"   # default; non-loopback needs a token
//	token_env = "CONNHOST_TOKEN" # the runtime's token; or token = "…" (prefer the env form)
//	data = "./.connhost"         # optional, like --data (a relative path is relative to this file's directory, as are the others here)
//	manifests = "./manifests"    # optional, like --manifests
//	modules = "./build"          # optional, like --modules
//	ledger_env = "CONNHOST_LEDGER" # optional, like --ledger: a shared ledger on PostgreSQL; or ledger = "postgres://…"
//	node = "node-1"              # optional, like --node: this node's id in the fleet (default: the host name)
//	lease_ttl = "15s"            # optional, like serve --lease-ttl
//	witness = "/var/lib/connhost-state/ledger.witness"  # optional, like --witness: where a restore of data (or of the database) does not reach
//	cache_dir = "/var/cache/connhost"  # optional, like --cache-dir: compiled modules (default: connhost/wazero in the user's cache directory)
//	consumed_dir = "/mnt/fleet/connhost-consumed"  # optional: the journal of consumed approvals every node shares (default: <data>.consumed, this node's own)
//	require_signoff = true       # run only connectors signed off as they are (connhost audit --sign)
//	tls_cert = "/etc/connhost/tls/cert.pem"  # optional, with tls_key: serve HTTPS, reloaded on SIGHUP
//	tls_key = "/etc/connhost/tls/key.pem"
//	behind_tls_proxy = false     # true: a TLS-terminating proxy is in front (a non-loopback listen without TLS is refused otherwise)
//	public_url = "https://connhost.example.com"  # optional: the base of console links (default: the listen address's URL)
//	instance_wait = "5s"         # how long a call waits for a connector instance before 503 connector_busy (default 5s)
//
//	namespaces = ["default"]     # optional: the runtime token's namespaces (see below)
//
//	[limits]                     # every principal's limits; the defaults:
//	max_pending_approvals = 1000 # executions awaiting approval in its namespaces (0: no limit)
//	max_argument_bytes = 262144  # arguments of one call (0: no limit)
//	calls_per_second = 0         # its calls' average rate (0: no limit)
//	burst = 0                    # calls at once beyond the rate (0: calls_per_second rounded up)
//
//	[[principals]]               # one per person or service; repeatable
//	name = "rita"                # recorded as the reviewer of her decisions
//	roles = ["approver"]         # runtime, approver, operator
//	token_env = "CONNHOST_TOKEN_RITA"  # or token = "…"
//	namespaces = ["tenant-a"]    # the namespaces it acts in; ["*"]: every namespace
//	max_pending_approvals = 100  # optional: any key of [limits], for this principal
//	oidc_subject = "248289761001"  # optional: the [oidc] provider's "sub" that signs in as rita
//
//	[mcp]
//	approver = "rita"            # connhost mcp (stdio): approvals in the client's dialog, recorded as rita
//	allow_per_request_identity = false  # run side-effecting calls that carry no ids (default: refuse them)
//	approval_wait = "10m"        # hold a gated call without ids open this long for a reviewer
//	allow_origins = ["http://localhost:6274"]  # browser origins besides the server's own that may use /mcp
//
//	[notify]                     # tell humans what starts to wait for them
//	webhook_url = "https://hooks.example.com/connhost"  # a signed POST per call awaiting approval or needing an operator
//	secret_env = "CONNHOST_WEBHOOK_SECRET"  # its signing secret, "whsec_…" (Standard Webhooks)
//	allow_hosts = ["hooks.example.com"]     # the hosts webhook_url may name (loopback needs none)
//
//	[oidc]                       # console sign-in with the team's OpenID provider (see OIDCConfig)
//	issuer = "https://login.example.com/"
//	client_id = "connhost-console"
//	client_secret_env = "CONNHOST_OIDC_SECRET"
//
//	[telemetry]                  # OpenTelemetry traces (off without it; see TelemetryConfig)
//	endpoint = "http://127.0.0.1:4318"  # OTLP/HTTP receiver
//	headers_env = { authorization = "OTLP_AUTH" }  # export headers, values from the environment
//
//	[connectors.payments]
//	base_url = "https://api.stripe.com"
//	api_key_env = "STRIPE_SECRET_KEY"  # the value of api_key comes from $STRIPE_SECRET_KEY
//	allow_http = ["http://127.0.0.1:12111"]  # operator override, see below
//
//	[namespaces.tenant-a.connectors.payments]  # a namespace's own values
//	api_key_env = "STRIPE_SECRET_KEY_TENANT_A"
//
// A key "K_env" in a connector table names the environment variable that
// holds the value of config key K. Keys must be declared in the
// connector's manifest (capabilities.config). Unknown keys are errors with
// file:line. Secret values are never printed or logged: Config's String
// method and its JSON form redact them.
//
// allow_http is reserved: it is not a config value handed to the
// connector but an operator override of the manifest's capabilities.http.
// Unlike the other keys it is a list of origins, each "scheme://host:port"
// (http or https, explicit port, no path); every command that opens the
// executor appends them to the connector's allowlist and logs a warning
// naming the connector and the origins. It exists so that a deployment (or
// connhost crashtest) can point a connector at a provider on another origin
// — a sandbox on a loopback port, a regional endpoint — without editing the
// reviewed manifest. The default value is empty: the manifest's list only.
//
// Authority over the API is split by role (see httpapi.Role): [server]'s
// token is the runtime's, which may execute, cancel, recover and read but
// never approve, reject or resolve; it acts as the principal "runtime".
// Each [[principals]] entry adds a credential with a name and roles:
// "approver" approves, rejects and resolves; "operator" resolves, cancels
// and recovers; "runtime" is another runtime credential. A decision is
// recorded under the name of the principal whose token made it. Names
// match httpapi.PrincipalNameRE and are unique ("runtime" is taken when
// [server] has a token; "loopback" and "dev-loopback" are reserved for the
// servers without credentials). Every principal needs a non-empty token of
// its own: a token shared by two principals, or with [server], is an
// error, because the audit trail could not tell them apart. serve refuses
// a token shorter than 32 characters on a non-loopback listen, and warns
// about one on loopback. Without an
// approver, serve answers approve and reject with 403
// approval_not_configured. Without any token serve listens only on
// loopback and acts for the runtime-only principal "loopback".
//
// Namespaces keep tenants apart. A principal with namespaces acts in those
// only: its calls run in the first unless they name another of them (a
// body naming any other is refused, 403 namespace_forbidden), and it
// lists, reads, cancels, approves, rejects and resolves only their
// executions; one of another namespace answers as an unknown id. Once any
// principal has namespaces, every [[principals]] entry must say its own
// (["*"] is every namespace: an unscoped reviewer or operator is an
// explicit choice), and [server]'s token acts in "default" unless [server]
// namespaces says otherwise. A config where no principal has namespaces
// works as before: every principal reaches every namespace.
//
// Limits bound each principal (the anonymous loopback principal of serve
// too): [limits] sets them for all, the same keys in a [[principals]]
// entry for one. A new approval-gated call is refused (429
// too_many_pending_approvals) while the principal's namespaces hold
// max_pending_approvals executions awaiting approval (every namespace's,
// for an unscoped principal); a call whose arguments exceed
// max_argument_bytes is refused (413 arguments_too_large); calls beyond
// calls_per_second (bursts of burst) are refused with 429 rate_limited
// and Retry-After. Nothing is recorded for a refused call.
//
// A [namespaces.<ns>.connectors.<name>] table gives the calls of namespace
// ns values of their own, over those of [connectors.<name>] (the same keys
// and K_env forms, not allow_http); [connectors.<name>] still needs every
// key the manifest requires.
type Config struct {
	Path       string
	Server     ServerConfig
	Principals []PrincipalConfig
	MCP        MCPConfig
	Notify     NotifyConfig
	Telemetry  TelemetryConfig
	// OIDC is the [oidc] table (see OIDCConfig).
	OIDC       OIDCConfig
	Connectors map[string]map[string]configValue
	// AllowHTTP holds each connector's allow_http origins.
	AllowHTTP map[string][]string
	// Limits is the [limits] table: every principal's limits.
	Limits LimitsConfig
	// NamespaceConnectors holds the [namespaces.<ns>.connectors.<name>]
	// tables: namespace → connector → key → value.
	NamespaceConnectors map[string]map[string]map[string]configValue

	// lines are the lines of the file's keys ("server.listen"), for
	// Validate's errors.
	lines map[string]int
}

// LimitsConfig is the [limits] table, and the same keys in a
// [[principals]] entry (a field of an entry is nil where [limits]
// applies).
type LimitsConfig struct {
	// MaxPendingApprovals is max_pending_approvals. The default value is
	// DefaultMaxPendingApprovals; 0 means no limit.
	MaxPendingApprovals *int
	// MaxArgumentBytes is max_argument_bytes. The default value is
	// DefaultMaxArgumentBytes; 0 means no limit.
	MaxArgumentBytes *int
	// CallsPerSecond is calls_per_second. The default value is 0: no
	// limit.
	CallsPerSecond *float64
	// Burst is burst. The default value is 0: CallsPerSecond rounded up.
	Burst *int
}

// The default limits of every principal.
const (
	DefaultMaxPendingApprovals = 1000
	DefaultMaxArgumentBytes    = 256 << 10
)

// limitKeys are the keys of [limits], also allowed in [[principals]].
var limitKeys = []string{"max_pending_approvals", "max_argument_bytes", "calls_per_second", "burst"}

// over returns l with o's set fields over it.
func (l LimitsConfig) over(o LimitsConfig) LimitsConfig {
	if o.MaxPendingApprovals != nil {
		l.MaxPendingApprovals = o.MaxPendingApprovals
	}
	if o.MaxArgumentBytes != nil {
		l.MaxArgumentBytes = o.MaxArgumentBytes
	}
	if o.CallsPerSecond != nil {
		l.CallsPerSecond = o.CallsPerSecond
	}
	if o.Burst != nil {
		l.Burst = o.Burst
	}
	return l
}

// limits returns the API's limits of l, with the defaults where l says
// nothing.
func (l LimitsConfig) limits() httpapi.Limits {
	out := httpapi.Limits{MaxPendingApprovals: DefaultMaxPendingApprovals, MaxArgumentBytes: DefaultMaxArgumentBytes}
	if l.MaxPendingApprovals != nil {
		out.MaxPendingApprovals = *l.MaxPendingApprovals
	}
	if l.MaxArgumentBytes != nil {
		out.MaxArgumentBytes = *l.MaxArgumentBytes
	}
	if l.CallsPerSecond != nil {
		out.CallsPerSecond = *l.CallsPerSecond
	}
	if l.Burst != nil {
		out.Burst = *l.Burst
	}
	return out
}

// setLimit reads limit key k (one of limitKeys) into l; problems are
// reported through bad.
func setLimit(l *LimitsConfig, key, k string, v any, bad func(key, format string, args ...any)) {
	num := func() (float64, bool) {
		switch n := v.(type) {
		case int64:
			return float64(n), true
		case float64:
			return n, !math.IsNaN(n) && !math.IsInf(n, 0)
		}
		return 0, false
	}
	n, ok := num()
	switch {
	case !ok || n < 0:
		bad(key, "%s must be a number, 0 or more", k)
		return
	case k != "calls_per_second" && (n != math.Trunc(n) || n > math.MaxInt32):
		bad(key, "%s must be a whole number, 0 or more", k)
		return
	}
	i := int(n)
	switch k {
	case "max_pending_approvals":
		l.MaxPendingApprovals = &i
	case "max_argument_bytes":
		l.MaxArgumentBytes = &i
	case "calls_per_second":
		l.CallsPerSecond = &n
	case "burst":
		l.Burst = &i
	}
}

// everyNamespace is the namespaces entry of a principal that reaches every
// namespace.
const everyNamespace = "*"

// namespaceList reads a namespaces value: distinct valid namespaces, or
// ["*"] alone. Problems are reported through bad.
func namespaceList(key string, v any, bad func(key, format string, args ...any)) []string {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		bad(key, "namespaces must be a non-empty list of namespaces, or [%q] for every namespace", everyNamespace)
		return nil
	}
	var out []string
	for i, e := range list {
		ns, ok := e.(string)
		switch {
		case !ok:
			bad(key, "namespaces[%d] must be a string", i)
			continue
		case ns == everyNamespace && len(list) > 1:
			bad(key, "namespaces [%q] means every namespace: list it alone", everyNamespace)
			continue
		case ns != everyNamespace && host.NamespaceProblem(ns) != "":
			bad(key, "namespaces[%d] %q %s", i, ns, host.NamespaceProblem(ns))
			continue
		case slices.Contains(out, ns):
			bad(key, "namespace %q listed twice", ns)
			continue
		}
		out = append(out, ns)
	}
	return out
}

// scoped returns the API's form of a namespaces value: nil for every
// namespace.
func scoped(nss []string) []string {
	if len(nss) == 1 && nss[0] == everyNamespace {
		return nil
	}
	return slices.Clone(nss)
}

// allowHTTPKey is the reserved connector key of the allowlist override.
const allowHTTPKey = "allow_http"

// The defaults of [server]'s paths and listen address: a config without
// them runs in the working directory, as the CLI's flags do.
const (
	// DefaultListen is the default address of serve and dev: loopback
	// only.
	DefaultListen = "127.0.0.1:8420"
	// DefaultData is the default data directory (the ledger).
	DefaultData = "./.connhost"
	// DefaultManifests is the default directory of manifests.
	DefaultManifests = "./manifests"
	// DefaultModules is the default directory of built modules.
	DefaultModules = "./build"
)

// EnsureDefaults fills [server]'s empty listen address and paths with
// their default values (DefaultListen, DefaultData, DefaultManifests,
// DefaultModules).
func (c *Config) EnsureDefaults() {
	for _, f := range []struct {
		p   *string
		def string
	}{
		{&c.Server.Listen, DefaultListen}, {&c.Server.Data, DefaultData},
		{&c.Server.Manifests, DefaultManifests}, {&c.Server.Modules, DefaultModules},
	} {
		if *f.p == "" {
			*f.p = f.def
		}
	}
}

// ServerConfig is the [server] table.
type ServerConfig struct {
	// Listen (listen) is the address serve listens on. The default value
	// is DefaultListen, loopback only.
	Listen string
	// Token is the runtime's bearer token (token, or the variable
	// token_env names): the principal "runtime". The default value is
	// none.
	Token string
	// Data (data) is the data directory: the Pebble ledger and the
	// compilation cache. The default value is DefaultData.
	Data string
	// Manifests (manifests) is the directory of the connectors'
	// manifests. The default value is DefaultManifests.
	Manifests string
	// Modules (modules) is the directory of their built modules. The
	// default value is DefaultModules.
	Modules string
	// Ledger is the connection string of a shared ledger on PostgreSQL
	// (ledger, or the variable ledger_env names); LedgerEnv that
	// variable. It may hold a password: it is never printed.
	Ledger    string
	LedgerEnv string
	// Node and LeaseTTL: this node's id in the fleet and its lease TTL.
	Node     string
	LeaseTTL time.Duration
	// Witness is the ledger's witness file (witness, like --witness):
	// the default is the data directory's path plus ".witness".
	Witness string
	// CacheDir is where compiled connector modules are kept (cache_dir,
	// like --cache-dir, host.Options.CacheDir). The default is
	// host.DefaultCacheDir(): one directory for the machine's user.
	CacheDir string
	// ConsumedDir is the journal of consumed approvals on a shared ledger
	// (consumed_dir, host.Options.ConsumedDir): a directory every node of
	// the fleet shares, which the database's credentials do not reach.
	// The default is the witness's path with ".witness" replaced by
	// ".consumed": this node's own, which refuses only its own repeats.
	ConsumedDir string
	// RequireSignoff refuses to run a connector whose manifest or module
	// changed since a reviewer signed it off (connhost audit --sign), or
	// that has no sign-off. The default value is false.
	RequireSignoff bool
	// Namespaces are the namespaces of the runtime's token (["*"]: every
	// namespace). The default value (nil) is every namespace when no
	// principal has namespaces, else ["default"].
	Namespaces []string
	// TLSCert and TLSKey (tls_cert, tls_key) are the PEM files of the
	// server's certificate chain and key: with them serve speaks HTTPS,
	// and reads them again on SIGHUP. The default value is none: HTTP.
	TLSCert, TLSKey string
	// BehindTLSProxy (behind_tls_proxy = true) says a TLS-terminating
	// proxy sits in front: serve then listens on a non-loopback address
	// without TLS of its own. The default value is false: such a listen
	// is refused.
	BehindTLSProxy bool
	// PublicURL (public_url) is the URL humans reach the server at, the
	// base of the console links in notifications. The default value is
	// the listen address's URL.
	PublicURL string
	// InstanceWait (instance_wait) is how long a call waits for one of
	// its connector's instances, shared fairly between namespaces, before
	// it is answered 503 connector_busy with nothing dispatched (see
	// host.Options.InstanceWait). The default value (0) is
	// host.DefaultInstanceWait, 5s.
	InstanceWait time.Duration
	// tokenLine is where the token came from, for errors.
	tokenLine int
}

// NotifyConfig is the [notify] table: where what starts to wait for a
// human is told (see server/notify).
//
// webhook_url receives a signed POST (Standard Webhooks: webhook-id,
// webhook-timestamp, webhook-signature) per call that starts to await
// approval or needs an operator, and per session fenced. Its host must be
// loopback or listed in allow_hosts, and off loopback it must be https.
// secret_env names the variable holding the signing secret ("whsec_" and
// the base64 of 24 to 64 random bytes); it is required with webhook_url.
// The default value of each is none: no webhook.
type NotifyConfig struct {
	WebhookURL string
	// SecretEnv names the variable of the secret; Key is its HMAC key.
	SecretEnv  string
	Key        []byte
	AllowHosts []string
}

// MCPConfig is the [mcp] table: settings of `connhost mcp` (stdio).
//
// approver names the user of the MCP client that launched connhost mcp:
// with it, a gated call is shown to that user in the client's dialog
// (elicitation) and the answer is recorded as that name's approval or
// rejection. The launching user owns the data directory and the process,
// so the name is configuration, not a credential. Without it (the
// default), stdio never approves: a gated call answers awaiting_approval.
// Over HTTP (/mcp) the authenticated principal decides instead, and only
// with role approver; approver is not used there.
//
// allow_per_request_identity lets a side-effecting tools/call that
// carries no stable identity (no _meta ids: see connhost mcp --help) run
// with an identity of its request only, every such result saying that a
// retry would not be recognised. The default value is false: serve, and
// connhost mcp with a config, refuse such calls with identity_required
// (dev and connhost mcp without a config run them with a warning).
//
// approval_wait is how long a gated call without a stable identity is
// held open for a reviewer's decision before it answers
// awaiting_approval. The default value is 10 minutes
// (mcpserver.DefaultApprovalWait).
//
// allow_origins lists browser origins ("scheme://host:port") besides the
// server's own whose pages may use /mcp; other cross-origin requests get
// 403. The default value is none.
type MCPConfig struct {
	Approver        string
	AllowPerRequest bool
	ApprovalWait    time.Duration
	AllowOrigins    []string
}

// PrincipalConfig is one [[principals]] entry.
type PrincipalConfig struct {
	Name  string
	Roles []httpapi.Role
	Token string
	// AllowSelfApproval (allow_self_approval = true) admits roles runtime
	// and approver together: the principal may approve the calls it makes
	// (an MCP client over /mcp that approves in its own dialog needs
	// both). Without it such a principal is refused. The default value is
	// false.
	AllowSelfApproval bool
	// Namespaces are the namespaces it acts in (["*"]: every namespace);
	// nil when the entry names none, which only a config without
	// namespaces allows.
	Namespaces []string
	// Limits are the entry's own limits, over [limits].
	Limits LimitsConfig
	// OIDCSubject (oidc_subject) is the subject ("sub") the [oidc]
	// provider names this principal by: that identity signs in to the
	// console as it. The default value ("") is none.
	OIDCSubject string
}

// runtimePrincipal is the name of [server]'s token.
const runtimePrincipal = "runtime"

// reservedNames are the identities of servers without credentials.
var reservedNames = []string{httpapi.LoopbackRuntime.Name, httpapi.DevLoopback.Name}

// Credentials returns the API's credentials: [server]'s token as the
// principal "runtime" (role runtime), then every [[principals]] entry,
// each with its namespaces and limits.
func (c *Config) Credentials() []httpapi.Principal {
	var out []httpapi.Principal
	if c.Server.Token != "" {
		out = append(out, httpapi.Principal{Name: runtimePrincipal, Roles: []httpapi.Role{httpapi.RoleRuntime}, Token: c.Server.Token,
			Namespaces: c.serverNamespaces(), Limits: c.Limits.limits()})
	}
	for _, p := range c.Principals {
		out = append(out, httpapi.Principal{Name: p.Name, Roles: slices.Clone(p.Roles), Token: p.Token,
			Namespaces: scoped(p.Namespaces), Limits: c.Limits.over(p.Limits).limits()})
	}
	return out
}

// Anonymous returns the principal of serve without credentials: the
// runtime-only loopback principal, with [limits].
func (c *Config) Anonymous() *httpapi.Principal {
	p := httpapi.LoopbackRuntime
	p.Limits = c.Limits.limits()
	return &p
}

// usesNamespaces reports whether some principal is bound to namespaces.
func (c *Config) usesNamespaces() bool {
	return c.Server.Namespaces != nil || slices.ContainsFunc(c.Principals, func(p PrincipalConfig) bool { return p.Namespaces != nil })
}

// serverNamespaces returns the namespaces of [server]'s token (see
// ServerConfig.Namespaces).
func (c *Config) serverNamespaces() []string {
	switch {
	case c.Server.Namespaces != nil:
		return scoped(c.Server.Namespaces)
	case c.usesNamespaces():
		return []string{ledger.DefaultNamespace}
	}
	return nil
}

// NamespaceConfig returns host.Options.NamespaceConfig of the
// [namespaces.<ns>.connectors.<name>] tables (nil without any).
func (c *Config) NamespaceConfig() map[string]func(connector, key string) (string, bool) {
	if len(c.NamespaceConnectors) == 0 {
		return nil
	}
	out := make(map[string]func(connector, key string) (string, bool), len(c.NamespaceConnectors))
	for ns, conns := range c.NamespaceConnectors {
		out[ns] = func(connector, key string) (string, bool) {
			v, ok := conns[connector][key]
			return v.value, ok
		}
	}
	return out
}

type configValue struct {
	value string
	env   string // the variable the value came from, if any
	line  int
}

// String describes the configuration without any value of a connector key
// or any token.
func (c *Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config %s: listen %s, token set: %t", c.Path, c.Server.Listen, c.Server.Token != "")
	switch {
	case c.Server.LedgerEnv != "":
		fmt.Fprintf(&b, ", ledger from $%s", c.Server.LedgerEnv)
	case c.Server.Ledger != "":
		fmt.Fprintf(&b, ", ledger %s", RedactDSN(c.Server.Ledger))
	}
	if c.Server.Node != "" {
		fmt.Fprintf(&b, ", node %s", c.Server.Node)
	}
	for _, p := range c.Principals {
		roles := make([]string, len(p.Roles))
		for i, r := range p.Roles {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, ", principal %s [%s]", p.Name, strings.Join(roles, " "))
		if p.Namespaces != nil {
			fmt.Fprintf(&b, " in [%s]", strings.Join(p.Namespaces, " "))
		}
	}
	names := make([]string, 0, len(c.Connectors))
	for n := range c.Connectors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		keys := make([]string, 0, len(c.Connectors[n]))
		for k := range c.Connectors[n] {
			keys = append(keys, k)
		}
		if len(c.AllowHTTP[n]) > 0 {
			keys = append(keys, allowHTTPKey)
		}
		sort.Strings(keys)
		fmt.Fprintf(&b, ", %s: [%s]", n, strings.Join(keys, " "))
	}
	for _, ns := range slices.Sorted(maps.Keys(c.NamespaceConnectors)) {
		for _, n := range slices.Sorted(maps.Keys(c.NamespaceConnectors[ns])) {
			fmt.Fprintf(&b, ", %s/%s: [%s]", ns, n, strings.Join(slices.Sorted(maps.Keys(c.NamespaceConnectors[ns][n])), " "))
		}
	}
	return b.String()
}

// MarshalJSON redacts: only key names are shown.
func (c *Config) MarshalJSON() ([]byte, error) { return []byte(fmt.Sprintf("%q", c.String())), nil }

// Lookup is host.Options.Config: the value of a [connectors.<name>] key.
func (c *Config) Lookup(connector, key string) (string, bool) {
	v, ok := c.Connectors[connector][key]
	return v.value, ok
}

// lineIndex finds the line of "table.key" in TOML text, through the
// scanner the manifests use (manifests.KeyLines: it knows multi-line
// strings and arrays, where a regular expression takes their lines for
// keys). The n-th entry of an array of tables ([[name]], counted from 0)
// is the table "name.n", and a table is also found at its first line
// that names it or a table inside it (a dotted header [a.b] places a, an
// array's first entry the array).
func lineIndex(data []byte) map[string]int {
	idx := map[string]int{}
	set := func(p string, n int) {
		if m, ok := idx[p]; !ok || n < m {
			idx[p] = n
		}
	}
	for p, n := range manifests.KeyLines(data) {
		p = strings.ReplaceAll(p, "#", ".")
		for {
			set(p, n)
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	return idx
}

// ErrInvalidConfig is wrapped by every refusal of a config: a file that
// does not parse, a problem Validate reports, a connector key no manifest
// declares (CheckConnectors), a listen address CheckListen refuses.
var ErrInvalidConfig = errors.New("server: invalid config")

// configError is a refusal of a config: its problems, one per line, each
// with its file and line where it has one.
type configError struct{ errs []error }

// invalid returns the refusal of errs (ErrInvalidConfig with them).
func invalid(errs ...error) error { return &configError{errs: errs} }

func (e *configError) Error() string { return errors.Join(e.errs...).Error() }

// Unwrap returns the problems and ErrInvalidConfig.
func (e *configError) Unwrap() []error { return append(slices.Clone(e.errs), ErrInvalidConfig) }

// LoadConfig reads and validates a connhost.toml; env looks variables up
// (os.LookupEnv). It reports every problem at once, each with file:line.
// A file that does not exist is an error wrapping fs.ErrNotExist.
func LoadConfig(path string, env func(string) (string, bool)) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return ParseConfig(path, data, env)
}

// ParseConfig parses and validates the connhost.toml text data read from
// path (which the errors name, and against whose directory relative paths
// of [server] are resolved); env looks variables up (os.LookupEnv). It
// reports every problem at once, each with file:line, and never quotes a
// value (the file may hold secrets).
func ParseConfig(path string, data []byte, env func(string) (string, bool)) (*Config, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			// The parser quotes what it found, and the line may hold a
			// secret: show where, and the message without its quotes.
			return nil, invalid(fmt.Errorf("%s:%d: %s (offending text not shown: this file may hold secrets)",
				path, pe.Position.Line, redactQuoted(pe.Message)))
		}
		return nil, invalid(fmt.Errorf("%s: %w", path, err))
	}
	lines := lineIndex(data)
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", path, lines[key], fmt.Sprintf(format, args...)))
	}
	c := &Config{Path: path, Connectors: map[string]map[string]configValue{}, AllowHTTP: map[string][]string{}}
	str := func(key string, v any) string {
		s, ok := v.(string)
		if !ok {
			bad(key, "%s must be a string", key)
		}
		return s
	}
	// table is a top-level section that must be a table ([name]).
	table := func(top string, v any) (map[string]any, bool) {
		t, ok := v.(map[string]any)
		if !ok {
			bad(top, "%s must be a table", top)
		}
		return t, ok
	}
	for top, v := range raw {
		switch top {
		case "server":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			var tokenEnv string
			for k, v := range t {
				key := "server." + k
				switch k {
				case "listen":
					c.Server.Listen = str(key, v)
				case "token":
					c.Server.Token = str(key, v)
					c.Server.tokenLine = lines[key]
				case "token_env":
					tokenEnv = str(key, v)
				case "data":
					c.Server.Data = str(key, v)
				case "manifests":
					c.Server.Manifests = str(key, v)
				case "modules":
					c.Server.Modules = str(key, v)
				case "ledger":
					c.Server.Ledger = str(key, v)
				case "ledger_env":
					c.Server.LedgerEnv = str(key, v)
				case "node":
					c.Server.Node = str(key, v)
				case "witness":
					c.Server.Witness = str(key, v)
				case "consumed_dir":
					c.Server.ConsumedDir = str(key, v)
				case "cache_dir":
					c.Server.CacheDir = str(key, v)
				case "lease_ttl":
					d, err := time.ParseDuration(str(key, v))
					if err != nil || d <= 0 {
						bad(key, "lease_ttl must be a positive duration such as \"15s\"")
					}
					c.Server.LeaseTTL = d
				case "instance_wait":
					d, err := time.ParseDuration(str(key, v))
					if err != nil || d <= 0 {
						bad(key, "instance_wait must be a positive duration such as \"5s\"")
					}
					c.Server.InstanceWait = d
				case "require_signoff":
					b, ok := v.(bool)
					if !ok {
						bad(key, "%s must be true or false", key)
					}
					c.Server.RequireSignoff = b
				case "namespaces":
					c.Server.Namespaces = namespaceList(key, v, bad)
				case "tls_cert":
					c.Server.TLSCert = str(key, v)
				case "tls_key":
					c.Server.TLSKey = str(key, v)
				case "behind_tls_proxy":
					b, ok := v.(bool)
					if !ok {
						bad(key, "%s must be true or false", key)
					}
					c.Server.BehindTLSProxy = b
				case "public_url":
					c.Server.PublicURL = strings.TrimRight(str(key, v), "/")
					if u, err := url.Parse(c.Server.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
						bad(key, "public_url must be an http or https URL such as \"https://connhost.example.com\" (no credentials, query or fragment)")
					}
				default:
					bad(key, "unknown key %s in [server] (known: listen, token, token_env, data, manifests, modules, ledger, ledger_env, node, lease_ttl, witness, cache_dir, consumed_dir, require_signoff, namespaces, tls_cert, tls_key, behind_tls_proxy, public_url, instance_wait)", k)
				}
			}
			if c.Server.LedgerEnv != "" {
				if c.Server.Ledger != "" {
					bad("server.ledger_env", "set ledger or ledger_env, not both")
				} else if val, msg := envValue(env, c.Server.LedgerEnv); msg != "" {
					bad("server.ledger_env", "environment variable %s (ledger_env) %s", c.Server.LedgerEnv, msg)
				} else {
					c.Server.Ledger = val
				}
			}
			c.Server.resolvePaths(filepath.Dir(path))
			if tokenEnv != "" {
				if c.Server.Token != "" {
					bad("server.token_env", "set token or token_env, not both")
				} else if val, msg := envValue(env, tokenEnv); msg != "" {
					bad("server.token_env", "environment variable %s (token_env) %s", tokenEnv, msg)
				} else {
					c.Server.Token, c.Server.tokenLine = val, lines["server.token_env"]
				}
			}
		case "principals":
			list, ok := tableList(v)
			if !ok {
				bad(top, "principals must be an array of tables ([[principals]])")
				continue
			}
			for i, t := range list {
				c.Principals = append(c.Principals, parsePrincipal(fmt.Sprintf("principals.%d", i), t, env, lines, bad))
			}
		case "connectors":
			t, ok := v.(map[string]any)
			if !ok {
				bad(top, "connectors must be a table of tables ([connectors.<name>])")
				continue
			}
			c.Connectors = connectorTables("", t, env, lines, bad, func(name, key string, v any) {
				c.AllowHTTP[name] = originList(key, v, bad)
			})
		case "limits":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			for k, v := range t {
				key := "limits." + k
				if !slices.Contains(limitKeys, k) {
					bad(key, "unknown key %s in [limits] (known: %s)", k, strings.Join(limitKeys, ", "))
					continue
				}
				setLimit(&c.Limits, key, k, v, bad)
			}
		case "namespaces":
			t, ok := v.(map[string]any)
			if !ok {
				bad(top, "namespaces must be a table of tables ([namespaces.<ns>.connectors.<name>])")
				continue
			}
			c.NamespaceConnectors = map[string]map[string]map[string]configValue{}
			for ns, v := range t {
				tbl := "namespaces." + ns
				if msg := host.NamespaceProblem(ns); msg != "" {
					bad(tbl, "namespace %q %s", ns, msg)
					continue
				}
				nt, ok := v.(map[string]any)
				if !ok {
					bad(tbl, "%s must be a table ([%s.connectors.<name>])", tbl, tbl)
					continue
				}
				for k, v := range nt {
					if k != "connectors" {
						bad(tbl+"."+k, "unknown key %s in [%s] (known: connectors)", k, tbl)
						continue
					}
					ct, ok := v.(map[string]any)
					if !ok {
						bad(tbl+".connectors", "%s.connectors must be a table of tables ([%s.connectors.<name>])", tbl, tbl)
						continue
					}
					c.NamespaceConnectors[ns] = connectorTables(tbl+".", ct, env, lines, bad, func(name, key string, _ any) {
						bad(key, "allow_http extends a connector's allowlist for every namespace: set it in [connectors.%s]", name)
					})
				}
			}
		case "notify":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			c.Notify = parseNotify(t, env, bad)
		case "oidc":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			c.OIDC = parseOIDC(t, env, bad)
		case "telemetry":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			c.Telemetry = parseTelemetry(t, env, bad)
		case "mcp":
			t, ok := table(top, v)
			if !ok {
				continue
			}
			for k, v := range t {
				key := "mcp." + k
				switch k {
				case "approver":
					c.MCP.Approver = str(key, v)
					switch {
					case !httpapi.PrincipalNameRE.MatchString(c.MCP.Approver):
						bad(key, "mcp approver %q: use letters, digits and . _ @ - (at most 64, starting with a letter or digit)", c.MCP.Approver)
					case slices.Contains(reservedNames, c.MCP.Approver):
						bad(key, "mcp approver %q is reserved for servers without credentials", c.MCP.Approver)
					}
				case "allow_per_request_identity":
					b, ok := v.(bool)
					if !ok {
						bad(key, "%s must be true or false", key)
					}
					c.MCP.AllowPerRequest = b
				case "approval_wait":
					d, err := time.ParseDuration(str(key, v))
					if err != nil || d <= 0 {
						bad(key, "approval_wait must be a positive duration such as \"10m\"")
					}
					c.MCP.ApprovalWait = d
				case "allow_origins":
					list, ok := v.([]any)
					if !ok {
						bad(key, "%s must be a list of browser origins such as \"https://app.example.com\"", key)
						continue
					}
					for i, e := range list {
						o, _ := e.(string)
						if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil || o == "" {
							bad(key, "%s[%d] %v: want a browser origin, \"scheme://host\" or \"scheme://host:port\", as the Origin header sends it", key, i, e)
							continue
						}
						c.MCP.AllowOrigins = append(c.MCP.AllowOrigins, o)
					}
				default:
					bad(key, "unknown key %s in [mcp] (known: approver, allow_per_request_identity, approval_wait, allow_origins)", k)
				}
			}
		default:
			bad(top, "unknown table or key %q (known: [server], [[principals]], [limits], [mcp], [notify], [telemetry], [oidc], [connectors.<name>], [namespaces.<ns>.connectors.<name>])", top)
		}
	}
	c.lines = lines
	c.validate(bad)
	if len(errs) > 0 {
		sortErrs(errs)
		return nil, invalid(errs...)
	}
	return c, nil
}

// Validate reports every problem of the config at once, each with the
// file and line it comes from (for a config parsed from a file), among
// them: tls_cert without tls_key, a TLS proxy and a certificate both, two
// principals with one name or one token (or the runtime's), a principal
// with roles runtime and approver without allow_self_approval, and
// principals without namespaces beside principals with them. ParseConfig
// and LoadConfig return only configs it accepts; New validates the config
// it is given.
func (c *Config) Validate() error {
	var errs []error
	c.validate(func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s:%d: %s", c.Path, c.lines[key], fmt.Sprintf(format, args...)))
	})
	if len(errs) > 0 {
		sortErrs(errs)
		return invalid(errs...)
	}
	return nil
}

// validate reports the problems Validate reports through bad.
func (c *Config) validate(bad func(key, format string, args ...any)) {
	if (c.Server.TLSCert == "") != (c.Server.TLSKey == "") {
		k := "server.tls_cert"
		if c.Server.TLSCert == "" {
			k = "server.tls_key"
		}
		bad(k, "set tls_cert and tls_key together (the certificate chain and its key, PEM files)")
	}
	if c.Server.TLSCert != "" && c.Server.BehindTLSProxy {
		bad("server.behind_tls_proxy", "behind_tls_proxy says a proxy terminates TLS, tls_cert says serve does: set one")
	}
	c.checkPrincipals(c.lines, bad)
	c.checkSelfApproval(c.lines, bad)
	c.checkNamespaces(bad)
	c.checkOIDC(bad)
}

// parseNotify reads the [notify] table t.
func parseNotify(t map[string]any, env func(string) (string, bool), bad func(key, format string, args ...any)) NotifyConfig {
	var n NotifyConfig
	for k, v := range t {
		key := "notify." + k
		switch k {
		case "webhook_url":
			n.WebhookURL, _ = v.(string)
			if n.WebhookURL == "" {
				bad(key, "webhook_url must be a URL string")
			}
		case "secret_env":
			n.SecretEnv, _ = v.(string)
			if n.SecretEnv == "" {
				bad(key, "secret_env must name an environment variable")
			}
		case "allow_hosts":
			list, ok := v.([]any)
			if !ok {
				bad(key, "allow_hosts must be a list of host names such as \"hooks.example.com\"")
				continue
			}
			for i, e := range list {
				h, _ := e.(string)
				if h == "" || strings.ContainsAny(h, "/:@ ") && net.ParseIP(h) == nil {
					bad(key, "allow_hosts[%d] %v: want a host name or IP address, without scheme, port or path", i, e)
					continue
				}
				n.AllowHosts = append(n.AllowHosts, h)
			}
		default:
			bad(key, "unknown key %s in [notify] (known: webhook_url, secret_env, allow_hosts)", k)
		}
	}
	switch {
	case n.WebhookURL == "" && n.SecretEnv != "":
		bad("notify.secret_env", "secret_env without webhook_url: set the webhook's URL")
	case n.WebhookURL == "":
	case n.SecretEnv == "":
		bad("notify.webhook_url", "a webhook needs its signing secret: set secret_env to the variable that holds it (make one with: echo whsec_$(openssl rand -base64 32))")
	default:
		if _, err := notify.CheckWebhookURL(n.WebhookURL, n.AllowHosts); err != nil {
			bad("notify.webhook_url", "%s", strings.TrimPrefix(err.Error(), "notify: "))
		}
		if val, msg := envValue(env, n.SecretEnv); msg != "" {
			bad("notify.secret_env", "environment variable %s (secret_env) %s", n.SecretEnv, msg)
		} else if key, err := notify.ParseSecret(val); err != nil {
			bad("notify.secret_env", "environment variable %s (secret_env): %s", n.SecretEnv, strings.TrimPrefix(err.Error(), "notify: "))
		} else {
			n.Key = key
		}
	}
	return n
}

// connectorTables reads the connector tables t (of [connectors], or of
// [namespaces.<ns>.connectors] with prefix "namespaces.<ns>."): each key K
// is a value, K_env names the variable that holds it; allow_http goes to
// allowHTTP.
func connectorTables(prefix string, t map[string]any, env func(string) (string, bool), lines map[string]int,
	bad func(key, format string, args ...any), allowHTTP func(name, key string, v any)) map[string]map[string]configValue {
	out := map[string]map[string]configValue{}
	for name, v := range t {
		tbl := prefix + "connectors." + name
		kv, ok := v.(map[string]any)
		if !ok {
			bad(tbl, "%s must be a table", tbl)
			continue
		}
		vals := map[string]configValue{}
		for k, v := range kv {
			key := tbl + "." + k
			if k == allowHTTPKey {
				allowHTTP(name, key, v)
				continue
			}
			s, ok := v.(string)
			if !ok {
				bad(key, "%s must be a string", key)
			}
			if base, ok := strings.CutSuffix(k, "_env"); ok && base != "" {
				if _, dup := kv[base]; dup {
					bad(key, "set %s or %s, not both", base, k)
					continue
				}
				val, msg := envValue(env, s)
				if msg != "" {
					bad(key, "environment variable %s (%s) %s", s, k, msg)
					continue
				}
				vals[base] = configValue{value: val, env: s, line: lines[key]}
				continue
			}
			vals[k] = configValue{value: s, line: lines[key]}
		}
		out[name] = vals
	}
	return out
}

// checkNamespaces reports [[principals]] entries without namespaces in a
// config where some principal has them.
func (c *Config) checkNamespaces(bad func(key, format string, args ...any)) {
	if !c.usesNamespaces() {
		return
	}
	var bound []string
	for _, p := range c.Principals {
		if p.Namespaces != nil {
			bound = append(bound, p.Name)
		}
	}
	if c.Server.Namespaces != nil {
		bound = append(bound, "[server]'s token")
	}
	verb := "are"
	if len(bound) == 1 {
		verb = "is"
	}
	for i, p := range c.Principals {
		if p.Namespaces == nil {
			bad(fmt.Sprintf("principals.%d", i), "principal %s has no namespaces, while %s %s bound to namespaces: give it namespaces = [\"<namespace>\", …], or [%q] to let it reach every namespace",
				p.Name, strings.Join(bound, ", "), verb, everyNamespace)
		}
	}
}

// parsePrincipal reads the [[principals]] entry tbl ("principals.<n>").
// Problems are reported through bad; the entry is returned as far as it
// could be read.
func parsePrincipal(tbl string, t map[string]any, env func(string) (string, bool), lines map[string]int,
	bad func(key, format string, args ...any)) PrincipalConfig {
	var p PrincipalConfig
	var tokenEnv string
	for k, v := range t {
		key := tbl + "." + k
		switch k {
		case "name":
			if s, ok := v.(string); ok {
				p.Name = s
			} else {
				bad(key, "principal name must be a string")
			}
		case "roles":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				bad(key, "principal roles must be a non-empty list (of %s)", roleList())
				continue
			}
			for _, e := range list {
				r, ok := e.(string)
				switch {
				case !ok || !slices.Contains(httpapi.Roles, httpapi.Role(r)):
					bad(key, "unknown role %v (known: %s)", e, roleList())
				case slices.Contains(p.Roles, httpapi.Role(r)):
					bad(key, "role %s listed twice", r)
				default:
					p.Roles = append(p.Roles, httpapi.Role(r))
				}
			}
		case "token":
			if s, ok := v.(string); ok {
				p.Token = s
				if s == "" {
					bad(key, "principal token is empty")
				}
			} else {
				bad(key, "principal token must be a string")
			}
		case "token_env":
			if s, ok := v.(string); ok {
				tokenEnv = s
			} else {
				bad(key, "principal token_env must be a string")
			}
		case "allow_self_approval":
			if b, ok := v.(bool); ok {
				p.AllowSelfApproval = b
			} else {
				bad(key, "principal allow_self_approval must be true or false")
			}
		case "namespaces":
			p.Namespaces = namespaceList(key, v, bad)
		case "oidc_subject":
			if s, ok := v.(string); ok && s != "" {
				p.OIDCSubject = s
			} else {
				bad(key, "principal oidc_subject must be a non-empty string (the provider's \"sub\" for this principal)")
			}
		default:
			if slices.Contains(limitKeys, k) {
				setLimit(&p.Limits, key, k, v, bad)
				continue
			}
			bad(key, "unknown key %s in [[principals]] (known: name, roles, token, token_env, allow_self_approval, namespaces, oidc_subject, %s)", k, strings.Join(limitKeys, ", "))
		}
	}
	at := tbl
	if _, ok := t["name"]; ok {
		at = tbl + ".name"
	}
	switch {
	case p.Name == "":
		bad(at, "principal without a name")
	case !httpapi.PrincipalNameRE.MatchString(p.Name):
		bad(at, "principal name %q: use letters, digits and . _ @ - (at most 64, starting with a letter or digit)", p.Name)
	case slices.Contains(reservedNames, p.Name):
		bad(at, "principal name %q is reserved for servers without credentials", p.Name)
	}
	if _, ok := t["roles"]; !ok {
		bad(tbl, "principal %s has no roles (give roles = [\"approver\"], or operator, runtime)", p.Name)
	}
	switch {
	case tokenEnv != "" && p.Token != "":
		bad(tbl+".token_env", "set token or token_env, not both")
	case tokenEnv != "":
		val, msg := envValue(env, tokenEnv)
		if msg != "" {
			bad(tbl+".token_env", "environment variable %s (token_env of principal %s) %s", tokenEnv, p.Name, msg)
		}
		p.Token = val
	case p.Token == "" && t["token"] == nil:
		bad(tbl, "principal %s has no token (give token_env = \"VAR\")", p.Name)
	}
	return p
}

// tableList returns an array of tables, as [[name]] or as an inline
// array of inline tables.
func tableList(v any) ([]map[string]any, bool) {
	switch v := v.(type) {
	case []map[string]any:
		return v, true
	case []any:
		out := make([]map[string]any, len(v))
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// checkPrincipals reports names used twice and tokens shared by two
// principals or with [server] (never showing a token).
func (c *Config) checkPrincipals(lines map[string]int, bad func(key, format string, args ...any)) {
	names := map[string]int{}
	tokens := map[string]string{}
	if c.Server.Token != "" {
		names[runtimePrincipal] = -1
		tokens[c.Server.Token] = "[server]"
	}
	for i, p := range c.Principals {
		tbl := fmt.Sprintf("principals.%d", i)
		if p.Name != "" {
			if j, dup := names[p.Name]; dup {
				first := "[server]'s token (the runtime)"
				if j >= 0 {
					first = fmt.Sprintf("principal %d", j+1)
				}
				bad(tbl+".name", "principal name %q is already used by %s", p.Name, first)
			} else {
				names[p.Name] = i
			}
		}
		if p.Token != "" {
			key := tbl + ".token"
			if _, ok := lines[key]; !ok {
				key = tbl + ".token_env"
			}
			if other, dup := tokens[p.Token]; dup {
				if other == "[server]" {
					bad(key, "principal %s has the runtime's token ([server]): each principal's credential must differ from the runtime's", p.Name)
				} else {
					bad(key, "principals %s and %s have the same token: each needs its own", other, p.Name)
				}
			} else {
				tokens[p.Token] = p.Name
			}
		}
	}
}

func roleList() string {
	s := make([]string, len(httpapi.Roles))
	for i, r := range httpapi.Roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// envValue looks up the variable a "_env" key names; msg says why it is
// unusable. An empty value is refused like a missing one: a deployment
// that forgot to export a secret must fail at startup, not send requests
// (or accept API calls) with an empty key.
func envValue(env func(string) (string, bool), name string) (val, msg string) {
	val, ok := env(name)
	switch {
	case !ok:
		return "", "is not set"
	case val == "":
		return "", "is empty"
	}
	return val, ""
}

// originList reads an allow_http value: a list of distinct
// "scheme://host:port" origins. Problems are reported through bad.
func originList(key string, v any, bad func(key, format string, args ...any)) []string {
	list, ok := v.([]any)
	if !ok {
		bad(key, "%s must be a list of origins (\"scheme://host:port\")", key)
		return nil
	}
	var out []string
	for i, e := range list {
		o, ok := e.(string)
		if !ok {
			bad(key, "%s[%d] must be a string", key, i)
			continue
		}
		if msg := checkOrigin(o); msg != "" {
			bad(key, "%s[%d] %q: %s", key, i, o, msg)
			continue
		}
		if slices.Contains(out, o) {
			bad(key, "%s[%d] %q listed twice", key, i, o)
			continue
		}
		out = append(out, o)
	}
	return out
}

// checkOrigin returns "" when o is "scheme://host:port" (http or https, a
// lower-case host name or an IP literal, an explicit port, nothing else),
// else what is wrong: the rule manifests apply to capabilities.http.
func checkOrigin(o string) string {
	if !strings.Contains(o, "://") {
		return `want "scheme://host:port"`
	}
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return "not a URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "scheme must be http or https"
	case u.Opaque != "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawPath != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(o, "?#*"):
		return `want "scheme://host:port" and nothing else`
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port == "" {
		return "explicit port required (e.g. :443)"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return "port must be 1..65535"
	}
	if host == "" || host != strings.ToLower(host) {
		return "host must be a non-empty lower-case name or an IP"
	}
	return ""
}

// ApplyAllowHTTP appends each connector's allow_http origins to its
// manifest's http capability and logs one warning per connector changed.
func (c *Config) ApplyAllowHTTP(ms []*manifests.Manifest, logger *slog.Logger) {
	for _, m := range ms {
		var add []string
		for _, o := range c.AllowHTTP[m.Connector.Name] {
			if !slices.Contains(m.Capabilities.HTTP, o) {
				add = append(add, o)
			}
		}
		if len(add) == 0 {
			continue
		}
		logger.Warn("config allow_http: extending the http capability beyond the manifest",
			"config", c.Path, "connector", m.Connector.Name, "origins", add)
		m.Capabilities.HTTP = append(m.Capabilities.HTTP, add...)
	}
}

// CheckConnectors reports connector tables and keys the manifests do not declare.
func (c *Config) CheckConnectors(ms []*manifests.Manifest) error {
	byName := map[string]*manifests.Manifest{}
	for _, m := range ms {
		byName[m.Connector.Name] = m
	}
	lines := map[string]int{}
	if data, err := os.ReadFile(c.Path); err == nil {
		lines = lineIndex(data)
	}
	var errs []error
	checkTables := func(prefix string, tables map[string]map[string]configValue) {
		for name, vals := range tables {
			m, ok := byName[name]
			if !ok {
				errs = append(errs, fmt.Errorf("%s:%d: no connector %q is loaded", c.Path, lines[prefix+"connectors."+name], name))
				continue
			}
			for k, v := range vals {
				if !slices.Contains(m.Capabilities.Config, k) {
					errs = append(errs, fmt.Errorf("%s:%d: connector %s does not declare config key %q (capabilities.config: %v)", c.Path, v.line, name, k, m.Capabilities.Config))
				}
			}
		}
	}
	checkTables("", c.Connectors)
	for ns, tables := range c.NamespaceConnectors {
		checkTables("namespaces."+ns+".", tables)
	}
	if len(errs) > 0 {
		sortErrs(errs)
		return invalid(errs...)
	}
	return nil
}

func sortErrs(errs []error) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

var quotedOrLongNumber = regexp.MustCompile(`"[^"]*"|'[^']*'|[0-9_]{6,}`)

// redactQuoted replaces quoted text and long digit runs in a parser message
// with "…".
func redactQuoted(msg string) string { return quotedOrLongNumber.ReplaceAllString(msg, "…") }

// resolvePaths makes the table's relative paths (data, manifests, modules,
// witness, cache_dir, consumed_dir, tls_cert, tls_key) relative to dir, the config file's
// directory, so that a config means the same files whatever directory the
// command runs in (a runtime launching connhost mcp from its own).
func (s *ServerConfig) resolvePaths(dir string) {
	for _, p := range []*string{&s.Data, &s.Manifests, &s.Modules, &s.Witness, &s.CacheDir, &s.ConsumedDir, &s.TLSCert, &s.TLSKey} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
