package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/consumed"
	"github.com/connhost/connhost/internal/lease"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// Options configures an [Executor]. Zero values take the documented
// defaults (see EnsureDefaults).
type Options struct {
	// DataDir holds the ledger (DataDir/ledger). Required unless Ledger is
	// set.
	DataDir string
	// Ledger, when set, is used instead of opening the Pebble ledger in
	// DataDir/ledger. The executor does not close a ledger it was given
	// unless CloseLedger is set. A ledger that implements ledger.Fleet
	// (ledger/pgledger) makes the executor one node of a fleet sharing it
	// (see fleet.go): it needs Node.
	Ledger ledger.Ledger
	// CloseLedger hands Ledger to the executor: Close (and a failed Open)
	// closes it. The default value is false.
	CloseLedger bool
	// Node is this executor's node id on a fleet ledger: unique in the
	// fleet, and the same across restarts of the same node (a restart
	// then takes over its former incarnation's calls at once instead of
	// after LeaseTTL). A second live process started under an id another
	// one holds gives way to it (ErrNodeInUse, Executor.Fatal). Required
	// with a ledger.Fleet, ignored otherwise.
	Node string
	// LeaseTTL is how long the node's lease on a fleet ledger lasts
	// without renewal (it is renewed every LeaseTTL/3): after a crash,
	// other nodes take over its calls that much later; a node that cannot
	// renew within it stops dispatching. The default value is
	// DefaultLeaseTTL (15s).
	LeaseTTL time.Duration
	// LedgerCreate says when Open may create a new, empty ledger in
	// DataDir/ledger (its mark is DataDir/ledger.mark): see
	// ledger.CreateMode. A missing or damaged ledger makes Open fail with
	// a *ledger.DamageError. The default value is ledger.CreateIfNew.
	LedgerCreate ledger.CreateMode
	// WitnessPath is the ledger's witness (see ledger.Options.WitnessPath):
	// a file outside DataDir that holds what this deployment has
	// acknowledged of its ledger, so that Open refuses an older copy of
	// the data directory restored in its place, or a deleted one, with a
	// *ledger.DamageError instead of running again the calls it forgot.
	// Keep it where backups of DataDir are not restored to. It is not used
	// with Ledger (a shared ledger keeps its own).
	// The default value is DataDir + ledger.WitnessSuffix (a sibling of the
	// data directory: "data.witness" beside "data").
	WitnessPath string
	// CacheDir is where compiled connector modules are kept, so that a
	// start compiles only modules never compiled there before (a compile
	// takes seconds per connector; a load from the cache, tens of
	// milliseconds). One directory serves every data directory and
	// process of the machine: entries are keyed by the module's sha256,
	// the wazero release, the architecture and the CPU's features, and
	// written whole (write, then rename), so processes may share it while
	// they run. It is created, for its owner alone, if missing. Its files
	// are native code the process runs: keep it writable by its owner
	// only. A directory that cannot be created or written, or that
	// others may write to, does not stop Open: modules are compiled in
	// memory and the Logger says why. The default value is
	// DefaultCacheDir() (in the user's cache directory), or none (compile
	// in memory, with a warning) where the user has no cache directory.
	CacheDir string
	// Manifests are the connectors to load.
	Manifests []*manifests.Manifest
	// ModuleDir is the directory modules are resolved against. The default
	// value is the directory of each manifest.
	ModuleDir string
	// AllowUnpinned loads modules whose manifest pins no digest. The
	// default value is false: an unpinned module refuses to load.
	AllowUnpinned bool
	// Namespace is used for calls that name none. The default value is
	// ledger.DefaultNamespace.
	Namespace string
	// Config hands config values to connectors (only keys their manifest
	// declares). Every key a manifest declares in capabilities.config and
	// not in config_optional must have a non-empty value, or Open refuses
	// to start (*MissingConfigError). The default value answers nothing.
	Config func(connector, key string) (string, bool)
	// NamespaceConfig gives the calls of a namespace config values of
	// their own (a tenant's API key, its provider account's base_url): a
	// key its function answers overrides Config for the calls of that
	// namespace; calls of other namespaces get Config's. Values are read
	// at every config_get, so one loaded connector serves every
	// namespace. Each namespace's values are checked as Config's are: a
	// required key without a value, or a URL outside the connector's
	// allowlist, makes Open refuse to start. The default value (none)
	// gives every namespace Config's values.
	NamespaceConfig map[string]func(connector, key string) (string, bool)
	// Logger receives the executor's and the connectors' log records. The
	// default value is slog.Default().
	Logger *slog.Logger
	// Now is the clock. The default value is time.Now.
	Now func() time.Time
	// RetryBackoff is the wait before attempt n+1 after attempt n failed
	// retryably. The default value is 200ms·2^(n-1), capped at 30s.
	RetryBackoff func(attempt int) time.Duration
	// InFlightBackoff is the wait before attempt n+1 after attempt n was
	// answered "in progress" (the provider is still processing an earlier
	// request with the execution's key). It is longer than RetryBackoff:
	// the earlier request has to finish before a new one can learn its
	// result. The default value is 2s·2^(n-1), capped at 1m.
	InFlightBackoff func(attempt int) time.Duration
	// KeyRetention is how long providers are trusted to remember an
	// idempotency key (Stripe documents at least 24h). An uncertain
	// idempotent-retry execution older than that is not re-dispatched: the
	// provider may have forgotten the key and would apply the effect again,
	// so it becomes recovery_required. A manifest that declares a shorter
	// [provider] idempotency_retention bounds its own connector's. The
	// default value is 24h.
	KeyRetention time.Duration
	// MaxInlineRetryWait bounds how long Execute waits inline (for a
	// scheduled retry, or for an attempt to settle before its reconcile
	// answer counts) before returning status "pending" with NextAttemptAt;
	// later calls (or Recover, or Run) drive it. The default value is 5s.
	MaxInlineRetryWait time.Duration
	// InstanceWait bounds how long a call waits for one of its
	// connector's instances before it is dispatched. The instances are
	// shared fairly between namespaces (a freed one goes to the waiting
	// call whose namespace holds the fewest), and the wait ends before
	// anything is recorded: beyond it Execute answers a *BusyError
	// (ErrConnectorBusy) having recorded nothing for a new call and left
	// a recorded one as it was, and a recovery pass leaves the call for
	// its next round. So a tenant whose calls hold every instance delays
	// another's by at most this much. The default value is 5s.
	InstanceWait time.Duration
	// Runtime passes extra options to the wasm runtime (HTTP dialing, body
	// caps). CacheDir, Logger, Config, NamespaceConfig and Observer are
	// set from the fields of Options.
	Runtime RuntimeOptions
	// Observer receives metrics events. The default value discards them.
	Observer Observer
	// PrewarmInstances is how many instances of each connector Open has
	// created in the background once it returned (at most the connector's
	// limits.instances), so that the first burst of calls does not wait
	// for instantiation (milliseconds each). A negative value creates none
	// (for one-shot commands). The default value 0 means
	// limits.instances.
	PrewarmInstances int
	// RecoveryProgress, when set, is called during the recovery that Open
	// runs, with the number of pending executions handled so far.
	RecoveryProgress func(done int)
	// ApprovalKeys are the approver principals' keys (ApprovalKey of each
	// one's token), by principal name. Approve and Reject sign a decision
	// whose By has a key. On a shared ledger (a ledger.Fleet) they refuse
	// a decision whose By has none, and a call whose operation requires
	// approval is dispatched only when its approval verifies with the key
	// of the reviewer it names (see signature.go): an approval written
	// into the database by anyone else, or edited there, is not
	// dispatched (an approved call expires, a retry or a recovery becomes
	// recovery_required). Every node of a fleet needs the same keys; a
	// node with none leaves such calls as they are and answers an error. On
	// the Pebble ledger approvals are not verified: whoever can write its
	// files owns the process too. The executor does not modify the map.
	// The default value is none.
	ApprovalKeys map[string][]byte
	// ApprovalNamespaces are the namespaces each reviewer decides in, by
	// principal name: Approve and Reject refuse a decision by a reviewer
	// on a call of another namespace (ErrNamespaceForbidden), whoever
	// calls them (a node's API, or a command on the shared ledger
	// directly), and on a shared ledger an approval by a reviewer of a
	// call outside that reviewer's namespaces does not verify (it is not
	// dispatched, as an unsigned one). A reviewer it does not name, or
	// names with no namespace, decides in every namespace. Every node of
	// a fleet needs the same. The executor does not modify the map. The
	// default value is none: every reviewer decides in every namespace.
	ApprovalNamespaces map[string][]string
	// AllowHTTP adds origins to connectors' allowlists, by connector name:
	// each connector may reach its manifest's capabilities.http and these
	// ("scheme://host:port", http or https, explicit port), so that a
	// deployment can point a connector at a provider on another origin (a
	// sandbox on a loopback port, a regional endpoint) without editing
	// the reviewed manifest. Open logs a warning naming the connector and
	// the origins it adds, and does not modify the manifests it is given.
	// The default value is none: the manifests' lists only.
	AllowHTTP map[string][]string
	// ConsumedDir is the journal of consumed approvals on a shared ledger
	// (see journal.go): a directory outside the database where the node
	// records each dispatch of an approval-gated call before making it,
	// and refuses a dispatch recorded there already (the row was restored
	// or edited in the database after the call ran): that execution
	// becomes recovery_required (decision ledger_damaged). Give every
	// node of a fleet the same directory (a shared filesystem the
	// database's credentials do not reach) and a dispatch one node made
	// is refused on all; a node's own directory refuses only its own
	// repeats. Unused on the Pebble ledger. The default value is the
	// witness's path with ".witness" replaced by ".consumed"
	// ("data.consumed" beside "data"); on a shared ledger one is required.
	ConsumedDir string
}

// DefaultCacheDir is the default Options.CacheDir: connhost/wazero in
// the user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or
// ~/.cache on Linux, ~/Library/Caches on macOS, %LocalAppData% on
// Windows). It is an error where the user has none ($HOME unset).
func DefaultCacheDir() (string, error) { return wasmrt.DefaultCacheDir() }

// DefaultInstanceWait is the default Options.InstanceWait.
const DefaultInstanceWait = 5 * time.Second

// EnsureDefaults fills zero fields with their default values.
func (o *Options) EnsureDefaults() {
	if o.CacheDir == "" {
		o.CacheDir, _ = DefaultCacheDir() // "": Open warns
	}
	if o.WitnessPath == "" && o.DataDir != "" {
		o.WitnessPath = filepath.Clean(o.DataDir) + ledger.WitnessSuffix
	}
	if o.ConsumedDir == "" {
		o.ConsumedDir = defaultConsumedDir(o.WitnessPath)
	}
	if o.Namespace == "" {
		o.Namespace = ledger.DefaultNamespace
	}
	if o.Config == nil {
		o.Config = func(string, string) (string, bool) { return "", false }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RetryBackoff == nil {
		o.RetryBackoff = DefaultRetryBackoff
	}
	if o.InFlightBackoff == nil {
		o.InFlightBackoff = DefaultInFlightBackoff
	}
	if o.KeyRetention == 0 {
		o.KeyRetention = 24 * time.Hour
	}
	if o.MaxInlineRetryWait == 0 {
		o.MaxInlineRetryWait = 5 * time.Second
	}
	if o.InstanceWait == 0 {
		o.InstanceWait = DefaultInstanceWait
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
}

// Validate reports every problem with the options at once, among them
// required config keys without a value (*MissingConfigError) and
// configured URLs outside their connector's allowlist (*ConfigURLError).
func (o *Options) Validate() error {
	var errs []error
	if o.DataDir == "" && o.Ledger == nil {
		errs = append(errs, errors.New("DataDir is required (or a Ledger)"))
	}
	seen := map[string]bool{}
	for _, m := range o.Manifests {
		if m == nil {
			errs = append(errs, errors.New("nil manifest"))
			continue
		}
		if seen[m.Connector.Name] {
			errs = append(errs, fmt.Errorf("connector %q loaded twice", m.Connector.Name))
		}
		seen[m.Connector.Name] = true
	}
	errs = append(errs, allowHTTPProblems(o.Manifests, o.AllowHTTP)...)
	if o.MaxInlineRetryWait < 0 {
		errs = append(errs, errors.New("MaxInlineRetryWait is negative"))
	}
	if o.InstanceWait < 0 {
		errs = append(errs, errors.New("InstanceWait is negative"))
	}
	for name, key := range o.ApprovalKeys {
		if len(key) < 16 {
			errs = append(errs, fmt.Errorf("ApprovalKeys[%q] has %d bytes; use ApprovalKey of the principal's token", name, len(key)))
		}
	}
	_, fleet := o.Ledger.(ledger.Fleet)
	if _, leased := o.Ledger.(interface {
		RegisterNode(context.Context, string, time.Duration) (ledger.Lease, error)
	}); leased && !fleet {
		// Fleet mode is chosen by the type: a shared ledger that lacks a
		// method of ledger.Fleet (one added since it was written) would
		// otherwise run without leases, fencing or owned writes.
		errs = append(errs, fmt.Errorf("Ledger %T registers node leases but does not implement all of ledger.Fleet (CreateOwnedUnfenced and the others), so it cannot run as a fleet ledger", o.Ledger))
	}
	if fleet {
		if o.Node == "" {
			errs = append(errs, errors.New("Node is required on a fleet ledger (each node of the fleet needs its own id)"))
		}
		if o.LeaseTTL < 0 {
			errs = append(errs, errors.New("LeaseTTL is negative"))
		}
		if o.ConsumedDir == "" {
			errs = append(errs, errors.New("ConsumedDir is required on a fleet ledger (or DataDir or WitnessPath, beside which it is kept): without it a row restored in the database would dispatch an approved call again"))
		}
	}
	// The URLs are checked against the allowlists as AllowHTTP extends
	// them.
	ms := withAllowHTTP(o.Manifests, o.AllowHTTP, slog.New(slog.DiscardHandler))
	missing := missingConfig(ms, "", o.Config)
	denied := deniedConfigURLs(ms, "", o.Config)
	for _, ns := range slices.Sorted(maps.Keys(o.NamespaceConfig)) {
		if msg := NamespaceProblem(ns); msg != "" {
			errs = append(errs, fmt.Errorf("NamespaceConfig: namespace %q %s", ns, msg))
			continue
		}
		missing = append(missing, missingConfig(ms, ns, o.configIn(ns))...)
		denied = append(denied, deniedConfigURLs(ms, ns, o.configIn(ns))...)
	}
	if len(missing) > 0 {
		errs = append(errs, &MissingConfigError{Missing: missing})
	}
	if len(denied) > 0 {
		errs = append(errs, &ConfigURLError{Denied: denied})
	}
	if len(errs) > 0 {
		return fmt.Errorf("host: invalid options: %w", errors.Join(errs...))
	}
	return nil
}

// configIn is the config of the calls of namespace ns: its own values
// (NamespaceConfig), then Config's.
func (o *Options) configIn(ns string) func(connector, key string) (string, bool) {
	own := o.NamespaceConfig[ns]
	return func(connector, key string) (string, bool) {
		if own != nil {
			if v, ok := own(connector, key); ok {
				return v, true
			}
		}
		if o.Config == nil {
			return "", false
		}
		return o.Config(connector, key)
	}
}

// DefaultRetryBackoff is 200ms·2^(attempt-1), capped at 30s.
func DefaultRetryBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 8 {
		return 30 * time.Second
	}
	return min(200*time.Millisecond<<(attempt-1), 30*time.Second)
}

// DefaultInFlightBackoff is 2s·2^(attempt-1), capped at 1m.
func DefaultInFlightBackoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > 6 {
		return time.Minute
	}
	return min(2*time.Second<<(attempt-1), time.Minute)
}

// invoker is what the executor needs from a loaded connector; *Connector
// implements it.
type invoker interface {
	Call(ctx context.Context, req wasmrt.CallRequest) (abi.Outcome, error)
	Reserve(ctx context.Context, ns string, wait time.Duration) (*wasmrt.Slot, error)
	Description() abi.Description
	ModuleDigest() string
}

type loaded struct {
	conn invoker
	m    *manifests.Manifest
	ops  map[string]*operation
}

type operation struct {
	m       *manifests.Manifest
	op      *manifests.Operation
	info    abi.OperationInfo
	conn    invoker
	policyV string
}

func (o *operation) tool() string { return o.m.Connector.Name + "." + o.op.Name }

// Executor runs tool calls durably: it records the intent before calling a
// connector and the outcome after, and after a crash it decides from the
// ledger and the declared policy what to do with each uncertain call.
//
// An Executor is safe for concurrent use. Close releases the ledger it
// opened, the runtime and every connector instance.
type Executor struct {
	opts Options
	// base is the ledger given or opened; led is what the executor reads
	// and writes through: on a fleet ledger, bound to the node's lease.
	base       ledger.Ledger
	led        store
	ownsLedger bool
	// shared: base is a ledger.Fleet, which others than this process
	// write, so approvals are signed and verified (signature.go).
	shared  bool
	rt      *wasmrt.Runtime
	conns   map[string]*loaded
	flights flights
	// decided wakes AwaitDecision when this executor records a decision.
	decided   decisions
	closed    chan struct{}
	closeOnce sync.Once
	// warming is the background pre-warm of the pools; Close cancels it
	// and waits for it.
	stopWarming context.CancelFunc
	warming     sync.WaitGroup
	// journal is the journal of consumed approvals on a shared ledger
	// (journal.go); pruned is when it was last pruned.
	journal *consumed.Journal
	pruneMu sync.Mutex
	pruned  time.Time
	// corruptLogged is when each execution whose record does not decode
	// was last logged (recover.go).
	corruptLogged sync.Map
}

// Open opens (or, on a first run, creates) the ledger, loads every
// connector, and runs Recover before returning, so no new work is admitted
// before every uncertain execution has been decided. A ledger that is
// missing, damaged, or behind its mark or its witness is refused with a
// *ledger.DamageError (see ledger.Open) before anything runs.
func Open(ctx context.Context, opts Options) (*Executor, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		if opts.Ledger != nil && opts.CloseLedger {
			_ = opts.Ledger.Close()
		}
		return nil, err
	}
	opts.Manifests = withAllowHTTP(opts.Manifests, opts.AllowHTTP, opts.Logger)
	e := &Executor{opts: opts, base: opts.Ledger, ownsLedger: opts.Ledger != nil && opts.CloseLedger, conns: map[string]*loaded{}, closed: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = e.Close(context.WithoutCancel(ctx))
		}
	}()
	if opts.DataDir != "" {
		// Beside a shared ledger the data directory still holds what the
		// process publishes (a server's discovery file).
		if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("host: create data dir: %w", err)
		}
	}
	if e.base == nil {
		warnOpenDataDir(opts.DataDir, opts.Logger)
		db, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(opts.DataDir, "ledger"), WitnessPath: opts.WitnessPath,
			Now: opts.Now, Logger: opts.Logger, Create: opts.LedgerCreate})
		if err != nil {
			return nil, err
		}
		e.base, e.ownsLedger = db, true
	}
	if fleet, ok := e.base.(ledger.Fleet); ok {
		fo, _ := opts.Observer.(FleetObserver)
		l, err := lease.Open(ctx, fleet, lease.Options{Node: opts.Node, TTL: opts.LeaseTTL, Observer: fo, Logger: opts.Logger})
		if err != nil {
			return nil, err
		}
		e.led, e.shared = l, true
		if e.journal, err = consumed.Open(opts.ConsumedDir); err != nil {
			return nil, fmt.Errorf("host: the journal of consumed approvals: %w", err)
		}
		e.maybePrune()
	} else {
		e.led = solo{e.base}
	}
	ro := opts.Runtime
	ro.CacheDir = opts.CacheDir
	if ro.CacheDir == "" {
		_, err := DefaultCacheDir()
		opts.Logger.Warn("compiled modules are not cached: each start compiles them again (seconds per connector)", "reason", err)
	}
	if old := filepath.Join(opts.DataDir, "cache"); opts.DataDir != "" && filepath.Clean(ro.CacheDir) != old {
		if st, err := os.Stat(old); err == nil && st.IsDir() {
			opts.Logger.Info("compiled modules are cached outside the data directory now; its cache directory is no longer used and may be removed",
				"unused", old, "cache_dir", ro.CacheDir)
		}
	}
	ro.Logger = opts.Logger
	ro.Config = opts.Config
	if len(opts.NamespaceConfig) > 0 {
		ro.NamespaceConfig = func(ns, connector, key string) (string, bool) {
			if own := opts.NamespaceConfig[ns]; own != nil {
				return own(connector, key)
			}
			return "", false
		}
	}
	ro.Observer = opts.Observer
	rt, err := wasmrt.New(ctx, ro)
	if err != nil {
		return nil, err
	}
	e.rt = rt
	for _, m := range opts.Manifests {
		modPath := m.ModulePath(opts.ModuleDir)
		c, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: modPath, AllowUnpinned: opts.AllowUnpinned})
		if err != nil {
			return nil, err
		}
		e.register(m, c)
	}
	// Every pending execution is recovered before Open returns: see
	// RATIONALE.md, "Why does the background pass read what is due, and Open
	// everything?".
	if _, err := e.recover(ctx, opts.RecoveryProgress, false); err != nil {
		return nil, fmt.Errorf("host: recovery on open: %w", err)
	}
	e.prewarm(context.WithoutCancel(ctx))
	ok = true
	return e, nil
}

// prewarm fills each connector's pool in the background (see
// Options.PrewarmInstances).
func (e *Executor) prewarm(ctx context.Context) {
	ctx, e.stopWarming = context.WithCancel(ctx)
	if e.opts.PrewarmInstances < 0 {
		return
	}
	for _, l := range e.conns {
		c, ok := l.conn.(*wasmrt.Connector)
		if !ok {
			continue
		}
		n := c.Limits().Instances
		if e.opts.PrewarmInstances > 0 {
			n = min(n, e.opts.PrewarmInstances)
		}
		e.warming.Go(func() {
			if err := c.Prewarm(ctx, n); err != nil && ctx.Err() == nil {
				e.opts.Logger.Warn("pre-warming a connector's instances failed; calls create them as needed",
					"connector", c.Name(), "error", err)
			}
		})
	}
}

func (e *Executor) register(m *manifests.Manifest, c invoker) {
	l := &loaded{conn: c, m: m, ops: map[string]*operation{}}
	d := c.Description()
	for _, op := range m.Operations {
		info, _ := d.Operation(op.Name)
		l.ops[op.Name] = &operation{m: m, op: op, info: info, conn: c, policyV: op.PolicyVersion()}
	}
	e.conns[m.Connector.Name] = l
}

// Close releases the runtime, the node's lease on a fleet ledger (other
// nodes may then take over its pending calls at once) and, if the executor
// opened it, the ledger.
func (e *Executor) Close(ctx context.Context) error {
	var errs []error
	e.closeOnce.Do(func() {
		close(e.closed)
		if e.stopWarming != nil {
			e.stopWarming()
		}
		e.warming.Wait()
		if e.rt != nil {
			errs = append(errs, e.rt.Close(ctx))
		}
		if e.led != nil {
			errs = append(errs, e.led.Close()) // a fleet node's lease
		}
		if e.ownsLedger && e.base != nil {
			errs = append(errs, e.base.Close())
		}
	})
	return errors.Join(errs...)
}

// Ledger returns the executor's ledger (for history and listings).
func (e *Executor) Ledger() ledger.Ledger { return e.base }

// PoolStats returns a snapshot of a loaded connector's instance pool, for
// metrics.
func (e *Executor) PoolStats(connector string) (PoolStats, bool) {
	l, ok := e.conns[connector]
	if !ok {
		return PoolStats{}, false
	}
	c, ok := l.conn.(*wasmrt.Connector)
	if !ok {
		return PoolStats{}, false
	}
	return PoolStats(c.Stats()), true
}

// PoolStats is a snapshot of a connector's instance pool.
type PoolStats struct {
	// Size is the pool's cap (limits.instances).
	Size int
	// Idle instances wait warm for a call; Busy instances serve one.
	Idle, Busy int
	// Created counts instances ever instantiated; Discarded counts those
	// closed after a trap, timeout or bad output.
	Created, Discarded uint64
}

// RuntimeOptions configures the wasm runtime behind the executor: the
// http capability's timeouts, body caps, resolver, dialer and TLS
// configuration, and instance creation. Options.Runtime holds it.
type RuntimeOptions = wasmrt.Options

// Manifests returns the loaded manifests, sorted by connector name.
func (e *Executor) Manifests() []*manifests.Manifest {
	out := make([]*manifests.Manifest, 0, len(e.conns))
	for _, l := range e.conns {
		out = append(out, l.m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Connector.Name < out[j].Connector.Name })
	return out
}

func (e *Executor) lookup(tool string) (*operation, error) {
	cname, oname, ok := strings.Cut(tool, ".")
	if !ok {
		return nil, &UnknownToolError{Tool: tool, Reason: `a tool is named "connector.operation"`, Available: e.Tools()}
	}
	l, ok := e.conns[cname]
	if !ok {
		return nil, &UnknownToolError{Tool: tool, Reason: fmt.Sprintf("no connector %q is loaded", cname), Available: e.Tools()}
	}
	op, ok := l.ops[oname]
	if !ok {
		return nil, &UnknownToolError{Tool: tool, Reason: fmt.Sprintf("connector %q has no operation %q", cname, oname), Available: e.Tools()}
	}
	return op, nil
}

// Tools returns the names ("connector.operation") of the tools the
// executor offers, sorted.
func (e *Executor) Tools() []string {
	var out []string
	for _, l := range e.conns {
		for name := range l.ops {
			out = append(out, l.m.Connector.Name+"."+name)
		}
	}
	sort.Strings(out)
	return out
}

func (e *Executor) opOf(rec ledger.Record) (*operation, error) {
	return e.lookup(rec.Connector + "." + rec.Operation)
}

// ToolCall is one tool call from an agent runtime.
type ToolCall struct {
	// Namespace scopes sessions (e.g. a tenant). The default value is the
	// executor's namespace.
	Namespace  string `json:"namespace,omitempty"`
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	// Tool is "connector.operation".
	Tool string `json:"tool"`
	// Arguments is the model's JSON object, exactly as the model produced
	// it. It never carries the execution identity.
	Arguments json.RawMessage `json:"arguments"`
	// Resumed marks a call replayed from history that may predate this
	// ledger: with no record in a session the ledger does not know, it
	// becomes recovery_required instead of executing.
	Resumed bool `json:"resumed,omitempty"`
	// Settle marks a call a runtime settles on resume: one its saved
	// state holds without a result, sent again under its original ids
	// before the runtime's next model request. A recorded execution is
	// driven as the same call sent again is (its recorded outcome, an
	// approved call dispatched once, a pending approval, recovery by its
	// policy). With no record it is not run: it is recorded cancelled at
	// attempt 0, since the host never received it and so it never ran,
	// and the original request, should it arrive later, is answered
	// cancelled too. With Resumed also set, the Resumed rule comes first.
	Settle bool `json:"settle,omitempty"`
	// Note, when set, is recorded as the reason of a new execution's first
	// audit event: what the runtime wants the audit trail to say about
	// how the call reached the host (e.g. that its identity was derived
	// per request). It is not part of the identity and is ignored for a
	// call already recorded. The default value records no reason.
	Note string `json:"-"`
}

// Status is what a runtime sees of an execution.
type Status string

// Statuses of a Result.
const (
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusRecoveryRequired Status = "recovery_required"
	StatusRejected         Status = "rejected"
	StatusExpired          Status = "expired"
	StatusAbandoned        Status = "abandoned"
	StatusCancelled        Status = "cancelled"
	// StatusPending: approved but not yet dispatched, dispatched without a
	// recorded outcome yet, or waiting (for a scheduled retry, or for an
	// attempt to settle before a reconcile answer counts; see
	// Result.NextAttemptAt); call Execute again later.
	StatusPending Status = "pending"
)

// Result is one execution as everyone sees it: the answer of Execute,
// Approve, Reject, Resolve and Cancel, and, as JSON, every execution the
// HTTP API and the CLI print (answers, listings, history). ResultOf builds
// it from a ledger record.
//
// Status is what a runtime branches on; State is the ledger state behind
// it, for operators (pending stands for approved, dispatched and
// retry_wait).
type Result struct {
	ExecutionID string `json:"execution_id"`
	ToolCallID  string `json:"tool_call_id"`
	SessionID   string `json:"session_id"`
	Namespace   string `json:"namespace"`
	// Tool is "connector.operation".
	Tool   string       `json:"tool"`
	Status Status       `json:"status"`
	State  ledger.State `json:"state"`
	// Attempt is the number of the current (or last) dispatch, 0 before
	// the first; MaxAttempts caps it.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`

	// Result is the operation's JSON result (succeeded only).
	Result  json.RawMessage `json:"result,omitempty"`
	Receipt string          `json:"receipt,omitempty"`
	Error   string          `json:"error,omitempty"`
	// Source says where the recorded outcome came from: "connector",
	// "reconciled", "operator" or "duplicate" (the outcome of the execution
	// DuplicateOf names); OutcomeKind is its kind ("ok",
	// "permanent_error", "applied", …, see ledger.Outcome). Both are empty
	// while no outcome is recorded.
	Source      string `json:"source,omitempty"`
	OutcomeKind string `json:"outcome_kind,omitempty"`
	// Approval is the approval request and its decision, as the ledger
	// records it.
	Approval   *ledger.Approval   `json:"approval,omitempty"`
	Resolution *ledger.Resolution `json:"resolution,omitempty"`
	// NextAttemptAt is when a pending execution will be driven again.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// Recorded is true when the answer came from the ledger without
	// calling the connector in this request (answers to Execute only).
	Recorded bool `json:"recorded,omitempty"`
	// Uncertain is set while an earlier attempt may have taken effect and
	// nothing has ruled it out (see ledger.Record.Uncertain).
	Uncertain bool `json:"uncertain,omitempty"`
	// CancelRequested records a cooperative cancellation request.
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	UpdatedAt       time.Time `json:"updated_at"`
	// Deadline is when the current attempt's call must have returned.
	Deadline time.Time `json:"deadline,omitzero"`

	// What was asked, under which policy: the arguments exactly as
	// recorded (inline JSON), their canonical digest, the operation's
	// effect and recovery policy, the idempotency key the connector is
	// handed, and the manifest and module the intent was recorded under.
	Args           json.RawMessage `json:"args,omitempty"`
	ArgsDigest     string          `json:"args_digest"`
	Effect         string          `json:"effect"`
	Policy         string          `json:"policy"`
	PolicyVersion  string          `json:"policy_version"`
	IdempotencyKey string          `json:"idempotency_key"`
	ManifestDigest string          `json:"manifest_digest"`
	ModuleDigest   string          `json:"module_digest"`
	// Resumed is set when the runtime flagged the call as resumed from
	// older history.
	Resumed bool `json:"resumed,omitempty"`
	// RequestedBy is the principal that made the call (see
	// ledger.Record.RequestedBy).
	RequestedBy string `json:"requested_by,omitempty"`
	// DuplicateOf names the recent execution of the same session whose
	// arguments this call repeats (the operation's duplicate-intent guard):
	// the call was not dispatched but held for a reviewer (status
	// awaiting_approval) or answered with that execution's outcome
	// (succeeded, Source "duplicate").
	DuplicateOf string `json:"duplicate_of,omitempty"`
	// DuplicateWindow is the operation's duplicate-intent window when the
	// execution was created (in JSON, a duration string such as "10m0s");
	// 0 when not guarded.
	DuplicateWindow Duration `json:"duplicate_window,omitempty"`
}

// Err converts statuses a runtime must branch on into typed errors:
// *ApprovalRequiredError for awaiting_approval, *RecoveryRequiredError for
// recovery_required, nil otherwise.
func (r Result) Err() error {
	switch r.Status {
	case StatusAwaitingApproval:
		e := &ApprovalRequiredError{ExecutionID: r.ExecutionID}
		if r.Approval != nil {
			e.ApprovalID, e.ArgsDigest, e.ExpiresAt = r.Approval.ID, r.Approval.ArgsDigest, r.Approval.ExpiresAt
		}
		return e
	case StatusRecoveryRequired:
		return &RecoveryRequiredError{ExecutionID: r.ExecutionID, ToolCallID: r.ToolCallID, Reason: r.Error}
	}
	return nil
}

// statusOf returns the status a runtime sees of an execution in state s.
func statusOf(s ledger.State) Status {
	switch s {
	case ledger.StateApproved, ledger.StateDispatched, ledger.StateRetryWait:
		return StatusPending
	}
	return Status(s)
}

// ResultOf builds the Result of a record.
func ResultOf(rec ledger.Record) Result {
	r := Result{
		ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, SessionID: rec.SessionID, Namespace: rec.Namespace,
		Tool: rec.Connector + "." + rec.Operation, Status: statusOf(rec.State), State: rec.State,
		Attempt: rec.Attempt, MaxAttempts: rec.MaxAttempts, Resolution: rec.Resolution,
		Uncertain: rec.Uncertain, CancelRequested: rec.CancelRequested,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Deadline: rec.Deadline,
		Args: inlineJSON(rec.Args), ArgsDigest: rec.ArgsDigest, Effect: rec.Effect, Policy: rec.Policy,
		PolicyVersion: rec.PolicyVersion, IdempotencyKey: rec.IdempotencyKey,
		ManifestDigest: rec.ManifestDigest, ModuleDigest: rec.ModuleDigest, Resumed: rec.Resumed, RequestedBy: rec.RequestedBy,
		DuplicateOf: rec.DuplicateOf, DuplicateWindow: Duration(rec.DuplicateWindow),
	}
	if o := rec.Outcome; o != nil {
		r.Receipt, r.Source, r.OutcomeKind = o.Receipt, o.Source, o.Kind
		if rec.State == ledger.StateSucceeded {
			r.Result = inlineJSON(o.Result)
		} else {
			r.Error = o.Error
		}
	}
	if a := rec.Approval; a != nil {
		ap := *a
		r.Approval = &ap
	}
	if rec.State == ledger.StateRetryWait {
		r.NextAttemptAt = rec.NextAttemptAt
	}
	switch {
	case rec.State == ledger.StateRecoveryRequired && r.Error == "":
		r.Error = "outcome unknown; an operator must resolve it"
	case settledWithoutRecord(rec):
		r.Error = NeverReceived
	}
	return r
}

// Duration is a time.Duration that JSON spells as a string, as Go and the
// manifests write durations ("10m0s"), not as a count of nanoseconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("host: a duration is a string such as \"10m0s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("host: %w", err)
	}
	*d = Duration(v)
	return nil
}

// NeverReceived is Result.Error of a call a runtime settled on resume
// that the host had never received (ToolCall.Settle).
const NeverReceived = "the call never reached connhost before the runtime settled it on resume: it did not run, and a request with these ids will not run either"

// settledWithoutRecord reports whether rec is the record of a settled call
// the host had never received: the one record cancelled at attempt 0
// without an approval (a gated call cancelled carries its approval; an
// ungated call is created at attempt 1).
func settledWithoutRecord(rec ledger.Record) bool {
	return rec.State == ledger.StateCancelled && rec.Attempt == 0 && rec.Approval == nil
}

// inlineJSON returns b for inlining as JSON when it is valid JSON, as a
// JSON string otherwise (the ledger keeps the exact bytes it was given),
// and nil when b is empty.
func inlineJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	s, _ := json.Marshal(string(b))
	return s
}

func (e *Executor) now() time.Time { return e.opts.Now().UTC() }

// warnOpenDataDir warns when the data directory lets other users in: the
// ledger and the files connhost writes in it are its owner's alone (0700,
// 0600), but the directory is the deployment's choice (it may be shared
// on purpose), so it is not changed.
func warnOpenDataDir(dir string, logger *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || runtime.GOOS == "windows" || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	logger.Warn("the data directory is open to other users; the ledger in it is not, but restrict it (chmod 700) unless it is shared on purpose",
		"dir", dir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
}
