package wasmrt

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// Resolver resolves host names for the http capability. *net.Resolver
// implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to addr, which the http capability always
// passes as a literal "ip:port" it has already checked.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configures a [Runtime]. The zero value is usable: call
// EnsureDefaults (NewRuntime does) to fill in the defaults.
type Options struct {
	// CacheDir is the directory of wazero's on-disk compilation cache,
	// shared by every connector of the runtime, and by every process
	// given the same directory (see cache.go). It is created (owner only)
	// if missing. A directory that cannot be created or written, or that
	// others may write to, is not used: modules are compiled in memory and
	// the Logger is told why. The default value is "" (an in-memory cache
	// that lives as long as the runtime); DefaultCacheDir is the
	// directory the executor uses unless told otherwise.
	CacheDir string
	// Logger receives the runtime's records and the guests' log calls. The
	// default value is slog.Default().
	Logger *slog.Logger
	// Config returns the configuration value of a key for a connector; the
	// config_get host function serves it for keys the manifest declares.
	// Values are never logged. The default value is a function that finds
	// nothing.
	Config func(connector, key string) (string, bool)
	// NamespaceConfig, when set, returns a namespace's own value of a key
	// for a connector: config_get serves it, over Config's, to the calls
	// of that namespace (CallRequest.Namespace). Values are read at every
	// config_get, never kept in an instance, so an instance serves calls
	// of any namespace. The default value (nil) gives every namespace
	// Config's values.
	NamespaceConfig func(namespace, connector, key string) (string, bool)
	// HTTPTimeout bounds one HTTP request of a guest; the call's deadline
	// bounds it too. The default value is 30s.
	HTTPTimeout time.Duration
	// MaxHTTPRequestBytes caps the body of a guest's HTTP request. The
	// default value is 1 MiB.
	MaxHTTPRequestBytes int64
	// MaxHTTPResponseBytes caps the body of a response handed to a guest;
	// larger responses are reported as abi.HTTPTooLarge. The default value
	// is 1 MiB.
	MaxHTTPResponseBytes int64
	// InstantiateTimeout bounds creating one instance (instantiate and
	// _initialize); a connector's Limits.Timeout applies instead when it is
	// larger. It is separate from the call deadline so that replacing a
	// discarded instance does not eat into the next call's budget. The
	// default value is 10s.
	InstantiateTimeout time.Duration
	// Resolver resolves host names for the http capability (tests inject
	// one to simulate DNS rebinding). The default value is
	// net.DefaultResolver.
	Resolver Resolver
	// Dial opens connections for the http capability, always to a checked
	// literal address. The default value is a net.Dialer with a 10s timeout
	// whose ControlContext re-checks the address connected to.
	Dial DialFunc
	// TLSClientConfig is the TLS configuration of the http capability
	// (tests set RootCAs). The default value is nil: system roots.
	TLSClientConfig *tls.Config
	// Observer receives the runtime's measurements (guest log records
	// dropped over a connector's limits). The default value discards them.
	Observer Observer
}

// EnsureDefaults replaces zero fields by their documented defaults.
func (o *Options) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Config == nil {
		o.Config = func(string, string) (string, bool) { return "", false }
	}
	if o.HTTPTimeout == 0 {
		o.HTTPTimeout = 30 * time.Second
	}
	if o.InstantiateTimeout == 0 {
		o.InstantiateTimeout = 10 * time.Second
	}
	if o.MaxHTTPRequestBytes == 0 {
		o.MaxHTTPRequestBytes = 1 << 20
	}
	if o.MaxHTTPResponseBytes == 0 {
		o.MaxHTTPResponseBytes = 1 << 20
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
}

// Validate reports every problem of the options at once.
func (o *Options) Validate() error {
	var errs []error
	if o.HTTPTimeout < 0 {
		errs = append(errs, fmt.Errorf("host: Options.HTTPTimeout %v is negative", o.HTTPTimeout))
	}
	if o.InstantiateTimeout < 0 {
		errs = append(errs, fmt.Errorf("host: Options.InstantiateTimeout %v is negative", o.InstantiateTimeout))
	}
	if o.MaxHTTPRequestBytes < 0 {
		errs = append(errs, fmt.Errorf("host: Options.MaxHTTPRequestBytes %d is negative", o.MaxHTTPRequestBytes))
	}
	if o.MaxHTTPResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("host: Options.MaxHTTPResponseBytes %d is negative", o.MaxHTTPResponseBytes))
	}
	if o.MaxHTTPRequestBytes > 1<<30 || o.MaxHTTPResponseBytes > 1<<30 {
		errs = append(errs, errors.New("wasmrt: Options HTTP body caps must not exceed 1 GiB"))
	}
	return errors.Join(errs...)
}

// Runtime compiles and runs connector modules. It owns one compilation
// cache shared by all its connectors. It is safe for concurrent use; Close
// releases every connector it loaded and every instance they created.
type Runtime struct {
	opts  Options
	cache wazero.CompilationCache
	// cacheDir is the directory of cache, or "" when it is in memory.
	cacheDir string
	// memCache is the in-memory cache of connectors the on-disk one
	// failed (see Load); nil until then.
	memCache wazero.CompilationCache

	mu     sync.Mutex
	conns  map[*Connector]struct{}
	closed bool
}

// NewRuntime returns a runtime configured by opts (defaults filled in).
func New(ctx context.Context, opts Options) (*Runtime, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	cache, dir := openCache(opts.CacheDir, opts.Logger)
	return &Runtime{opts: opts, cache: cache, cacheDir: dir, conns: map[*Connector]struct{}{}}, nil
}

// Close closes every connector the runtime loaded (instances still busy in
// a call are closed when the call returns) and the compilation cache.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	conns := make([]*Connector, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	var errs []error
	for _, c := range conns {
		errs = append(errs, c.Close(ctx))
	}
	errs = append(errs, r.cache.Close(ctx))
	r.mu.Lock()
	mem := r.memCache
	r.mu.Unlock()
	if mem != nil {
		errs = append(errs, mem.Close(ctx))
	}
	return errors.Join(errs...)
}

// LoadOptions are the per-connector options of [Runtime.Load].
type LoadOptions struct {
	// ModulePath is the resolved path of the connector's .wasm file.
	ModulePath string
	// AllowUnpinned lets a manifest without a pinned sha256 load (for
	// development). The default value is false: unpinned modules are
	// refused with ErrUnpinned.
	AllowUnpinned bool
}

// Default limits, used where a manifest leaves a limit at zero.
const (
	DefaultMemoryMiB    = 64
	DefaultTimeout      = 15 * time.Second
	DefaultMaxOutputKiB = 256
	DefaultInstances    = 4
	DefaultLogKiB       = 64
	DefaultLogRecords   = 256
)

// effectiveLimits returns l with zero fields replaced by the defaults.
func effectiveLimits(l manifests.Limits) manifests.Limits {
	if l.MemoryMiB == 0 {
		l.MemoryMiB = DefaultMemoryMiB
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxOutputKiB == 0 {
		l.MaxOutputKiB = DefaultMaxOutputKiB
	}
	if l.Instances == 0 {
		l.Instances = DefaultInstances
	}
	if l.LogKiB == 0 {
		l.LogKiB = DefaultLogKiB
	}
	if l.LogRecords == 0 {
		l.LogRecords = DefaultLogRecords
	}
	return l
}

// wasm value types, for export signature checks.
const (
	wasmI32 = api.ValueTypeI32
	wasmI64 = api.ValueTypeI64
)

type signature struct{ params, results []api.ValueType }

var exportSignatures = map[string]signature{
	abi.ExportInitialize:     {},
	abi.ExportABIVersion:     {nil, []api.ValueType{wasmI32}},
	abi.ExportAlloc:          {[]api.ValueType{wasmI32}, []api.ValueType{wasmI32}},
	abi.ExportDescribe:       {nil, []api.ValueType{wasmI64}},
	abi.ExportExecute:        {[]api.ValueType{wasmI32, wasmI32, wasmI32, wasmI32}, []api.ValueType{wasmI64}},
	abi.ExportExecuteWithKey: {[]api.ValueType{wasmI32, wasmI32, wasmI32, wasmI32, wasmI32, wasmI32}, []api.ValueType{wasmI64}},
	abi.ExportReconcile:      {[]api.ValueType{wasmI32, wasmI32, wasmI32, wasmI32, wasmI32, wasmI32}, []api.ValueType{wasmI64}},
}

// maxDescribeBytes bounds the description a module may return.
const maxDescribeBytes = 1 << 20

// Load verifies, compiles and describes the connector m, whose module is at
// opts.ModulePath, and returns it with one warm instance in its pool.
//
// It refuses a module whose sha256 differs from the pinned digest
// (*DigestMismatchError), an unpinned module unless opts.AllowUnpinned
// (ErrUnpinned), an ABI version other than abi.Version (ErrABIVersion), a
// module lacking an export the ABI or the manifest's recovery policies need
// (ErrMissingExport), and a manifest operation the module does not
// implement (ErrMissingOperation). Every error names the connector.
func (r *Runtime) Load(ctx context.Context, m *manifests.Manifest, opts LoadOptions) (_ *Connector, err error) {
	if m == nil {
		return nil, errors.New("wasmrt: load: nil manifest")
	}
	name := m.Connector.Name
	wrap := func(err error) error { return fmt.Errorf("connector[%s]: %w", name, err) }
	if name == "" {
		return nil, errors.New("wasmrt: load: manifest has no connector name")
	}
	if m.Connector.ABI != 0 && m.Connector.ABI != abi.Version {
		return nil, wrap(fmt.Errorf("%w: manifest declares abi %d, host speaks abi %d", ErrABIVersion, m.Connector.ABI, abi.Version))
	}
	limits := effectiveLimits(m.Limits)
	if err := checkLimits(limits); err != nil {
		return nil, wrap(err)
	}
	code, err := os.ReadFile(opts.ModulePath)
	if err != nil {
		return nil, wrap(fmt.Errorf("host: read module: %w", err))
	}
	sum := sha256.Sum256(code)
	digest := hex.EncodeToString(sum[:])
	switch pinned := m.Connector.SHA256; {
	case pinned != "" && !strings.EqualFold(pinned, digest):
		return nil, &DigestMismatchError{Connector: name, Module: opts.ModulePath, Pinned: pinned, Actual: digest}
	case pinned == "" && !opts.AllowUnpinned:
		return nil, wrap(fmt.Errorf("%w: module %s has sha256 %s; pin it in the manifest or allow unpinned modules", ErrUnpinned, opts.ModulePath, digest))
	}
	hc, err := newHTTPCap(name, m.Capabilities.HTTP, &r.opts)
	if err != nil {
		return nil, wrap(err)
	}

	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, wrap(ErrConnectorClosed)
	}

	c := &Connector{
		rt:       r,
		m:        m,
		name:     name,
		limits:   limits,
		digest:   digest,
		http:     hc,
		log:      r.opts.Logger.With(slog.String("connector", name)),
		configOK: make(map[string]bool, len(m.Capabilities.Config)),
		maxOut:   uint32(limits.MaxOutputKiB) * 1024,
	}
	for _, k := range m.Capabilities.Config {
		c.configOK[k] = true
	}
	cfg := wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(limits.MemoryMiB) * 16)
	defer func() {
		if err != nil {
			if c.wrt != nil {
				_ = c.wrt.Close(context.WithoutCancel(ctx))
			}
			hc.close()
		}
	}()
	c.wrt, c.compiled, err = compile(ctx, cfg, r.cache, opts.ModulePath, code)
	if err != nil && r.cacheDir != "" {
		// The on-disk cache failed this module (an entry that does not
		// read back, a write refused): compile it without the cache. If
		// that fails too, the module is at fault, and its error is the
		// one reported.
		var merr error
		if c.wrt, c.compiled, merr = compile(ctx, cfg, r.memoryCache(), opts.ModulePath, code); merr == nil {
			c.log.Warn("the compilation cache failed this module; it was compiled without it (remove the cache directory to clear a damaged entry)",
				"cache_dir", r.cacheDir, "module", opts.ModulePath, "error", err.Error())
		}
		err = merr
	}
	if err != nil {
		return nil, wrap(err)
	}
	// Say which import is wrong and what the host offers, where
	// instantiation would only say "module[env] not instantiated".
	if probs := importProblems(c.wrt, c.compiled); len(probs) > 0 {
		errs := make([]error, len(probs))
		for i, p := range probs {
			errs[i] = fmt.Errorf("%w: %s", ErrBadModule, p.Problem)
		}
		return nil, wrap(errors.Join(errs...))
	}
	exports := c.compiled.ExportedFunctions()
	if err := checkExports(exports, abi.ExportInitialize, abi.ExportABIVersion); err != nil {
		return nil, wrap(err)
	}

	// The describing instance: run _initialize, check the version, describe.
	inst, err := c.newInstance(ctx)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: instantiate: %v", ErrBadModule, err))
	}
	keep := false
	defer func() {
		if !keep {
			inst.close()
		}
	}()
	ictx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	v, err := inst.callNoArgs(ictx, abi.ExportABIVersion)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: %s: %v", ErrBadModule, abi.ExportABIVersion, err))
	}
	if got := int32(uint32(v)); got != abi.Version {
		return nil, wrap(fmt.Errorf("%w: module speaks abi %d, host speaks abi %d", ErrABIVersion, got, abi.Version))
	}
	if err := checkExports(exports, abi.ExportAlloc, abi.ExportDescribe); err != nil {
		return nil, wrap(err)
	}
	packed, err := inst.callNoArgs(ictx, abi.ExportDescribe)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: %s: %v", ErrBadModule, abi.ExportDescribe, err))
	}
	ptr, n := abi.UnpackPtrLen(packed)
	if n > maxDescribeBytes {
		return nil, wrap(fmt.Errorf("%w: description of %d bytes exceeds %d", ErrBadModule, n, maxDescribeBytes))
	}
	raw, ok := inst.mem.Read(ptr, n)
	if !ok {
		return nil, wrap(fmt.Errorf("%w: description at [%d, +%d) outside guest memory", ErrBadModule, ptr, n))
	}
	desc, err := abi.DecodeDescription(raw)
	if err != nil {
		return nil, wrap(fmt.Errorf("%w: %v", ErrBadModule, err))
	}
	if desc.ABI != abi.Version {
		return nil, wrap(fmt.Errorf("%w: module describes itself as abi %d, host speaks abi %d", ErrABIVersion, desc.ABI, abi.Version))
	}
	c.desc = desc
	ops, err := crossCheck(name, m, desc, exports)
	if err != nil {
		return nil, err
	}
	c.ops = ops
	inst.bindExports()
	c.pool.init(limits.Instances, c.newInstance)
	c.pool.seed(inst)
	keep = true

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.pool.close()
		return nil, wrap(ErrConnectorClosed)
	}
	r.conns[c] = struct{}{}
	return c, nil
}

func checkLimits(l manifests.Limits) error {
	var errs []error
	if l.MemoryMiB < 1 || l.MemoryMiB > 4096 {
		errs = append(errs, fmt.Errorf("host: limits.memory_mib %d outside [1, 4096]", l.MemoryMiB))
	}
	if l.Timeout < 0 {
		errs = append(errs, fmt.Errorf("host: limits.timeout %v is negative", l.Timeout))
	}
	if l.MaxOutputKiB < 1 || l.MaxOutputKiB > 1<<20 {
		errs = append(errs, fmt.Errorf("host: limits.max_output_kib %d outside [1, 1048576]", l.MaxOutputKiB))
	}
	if l.Instances < 1 || l.Instances > 1024 {
		errs = append(errs, fmt.Errorf("host: limits.instances %d outside [1, 1024]", l.Instances))
	}
	if l.LogKiB < 1 || l.LogKiB > 1<<20 {
		errs = append(errs, fmt.Errorf("host: limits.log_kib %d outside [1, 1048576]", l.LogKiB))
	}
	if l.LogRecords < 1 || l.LogRecords > 1<<20 {
		errs = append(errs, fmt.Errorf("host: limits.log_records %d outside [1, 1048576]", l.LogRecords))
	}
	return errors.Join(errs...)
}

// checkExports verifies that the named exports exist with the ABI's
// signatures.
func checkExports(exports map[string]api.FunctionDefinition, names ...string) error {
	var errs []error
	for _, name := range names {
		def, ok := exports[name]
		if !ok {
			errs = append(errs, missingExport(name))
			continue
		}
		want := exportSignatures[name]
		if !sameTypes(def.ParamTypes(), want.params) || !sameTypes(def.ResultTypes(), want.results) {
			errs = append(errs, fmt.Errorf("%w: export %s has signature %v -> %v, want %v -> %v",
				ErrBadModule, name, typeNames(def.ParamTypes()), typeNames(def.ResultTypes()), typeNames(want.params), typeNames(want.results)))
		}
	}
	return errors.Join(errs...)
}

func sameTypes(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func typeNames(ts []api.ValueType) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = api.ValueTypeName(t)
	}
	return s
}

// opEntry is what Call needs to know about one operation.
type opEntry struct {
	info abi.OperationInfo
}

// crossCheck compares the manifest with the module's description and its
// wasm exports. It reports every problem at once.
func crossCheck(name string, m *manifests.Manifest, d abi.Description, exports map[string]api.FunctionDefinition) (map[string]opEntry, error) {
	var errs []error
	ops := make(map[string]opEntry, len(m.Operations))
	var have []string
	for _, op := range d.Operations {
		have = append(have, op.Name)
	}
	needExport := map[string][]string{}
	for _, op := range m.Operations {
		if op == nil {
			continue
		}
		info, ok := d.Operation(op.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("connector[%s] op[%s]: %w (module implements %s)", name, op.Name, ErrMissingOperation, strings.Join(have, ", ")))
			continue
		}
		switch op.Recovery {
		case manifests.PolicyIdempotentRetry:
			if !info.ExecuteWithKey {
				errs = append(errs, fmt.Errorf("connector[%s] op[%s]: %w: recovery %q requires %s, which the module does not implement for this operation",
					name, op.Name, ErrMissingExport, op.Recovery, abi.ExportExecuteWithKey))
			}
		case manifests.PolicyReconcile:
			if !info.Reconcile {
				errs = append(errs, fmt.Errorf("connector[%s] op[%s]: %w: recovery %q requires %s, which the module does not implement for this operation",
					name, op.Name, ErrMissingExport, op.Recovery, abi.ExportReconcile))
			}
		}
		if info.Execute {
			needExport[abi.ExportExecute] = append(needExport[abi.ExportExecute], op.Name)
		}
		if info.ExecuteWithKey {
			needExport[abi.ExportExecuteWithKey] = append(needExport[abi.ExportExecuteWithKey], op.Name)
		}
		if info.Reconcile {
			needExport[abi.ExportReconcile] = append(needExport[abi.ExportReconcile], op.Name)
		}
		ops[op.Name] = opEntry{info: info}
	}
	for _, export := range []string{abi.ExportExecute, abi.ExportExecuteWithKey, abi.ExportReconcile} {
		if users := needExport[export]; len(users) > 0 {
			if err := checkExports(exports, export); err != nil {
				errs = append(errs, fmt.Errorf("connector[%s] op[%s]: %w", name, strings.Join(users, ","), err))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ops, nil
}

// Connector is a loaded connector: its module compiled once, and a bounded
// pool of instances (at most Limits.Instances, created lazily), one call per
// instance at a time. It is safe for concurrent use. Close releases every
// instance it created.
type Connector struct {
	rt       *Runtime
	m        *manifests.Manifest
	name     string
	limits   manifests.Limits
	digest   string
	desc     abi.Description
	ops      map[string]opEntry
	http     *httpCap
	log      *slog.Logger
	configOK map[string]bool
	maxOut   uint32

	wrt      wazero.Runtime
	compiled wazero.CompiledModule
	pool     pool

	closeOnce sync.Once
	closeErr  error
}

// Name returns the connector's name from its manifest.
func (c *Connector) Name() string { return c.name }

// Manifest returns the manifest the connector was loaded with. The caller
// must not modify it.
func (c *Connector) Manifest() *manifests.Manifest { return c.m }

// Description returns what the module said about itself at load.
func (c *Connector) Description() abi.Description { return c.desc }

// ModuleDigest returns the hex sha256 of the module bytes that were loaded.
func (c *Connector) ModuleDigest() string { return c.digest }

// Limits returns the effective limits (the manifest's, with defaults for
// zero fields).
func (c *Connector) Limits() manifests.Limits { return c.limits }

// Stats returns a snapshot of the connector's instance pool.
func (c *Connector) Stats() PoolStats { return c.pool.stats() }

// Prewarm creates instances until n are ready (idle or busy), at most
// limits.instances, each under InstantiateTimeout like any other, so that
// a burst of calls does not pay for instantiation. It is safe to call
// concurrently with calls; it returns the first error.
func (c *Connector) Prewarm(ctx context.Context, n int) error { return c.pool.warm(ctx, n) }

// Close closes the connector's idle instances, its wazero runtime and its
// HTTP connections. Calls in flight fail; later calls return ErrConnectorClosed.
func (c *Connector) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.pool.close()
		c.http.close()
		c.closeErr = c.wrt.Close(ctx)
		c.rt.mu.Lock()
		delete(c.rt.conns, c)
		c.rt.mu.Unlock()
	})
	return c.closeErr
}

// Observer receives the runtime's measurements. Implementations must be
// safe for concurrent use and fast: they run on the call path. The
// executor's host.Observer is one.
type Observer interface {
	// GuestLogDropped reports, once per guest invocation that logged
	// beyond its connector's limits.log_records or limits.log_kib, the
	// records dropped and the message bytes that did not reach the log
	// (of dropped records and of cut ones).
	GuestLogDropped(connector string, records, bytes int64)
}

type nopObserver struct{}

func (nopObserver) GuestLogDropped(string, int64, int64) {}
