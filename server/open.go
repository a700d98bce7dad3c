package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// ExecutorOptions tune OpenExecutor.
type ExecutorOptions struct {
	// Manifests are the connectors to load. The default value (nil) loads
	// every manifest in the config's [server] manifests directory.
	Manifests []*manifests.Manifest
	// Logger receives the executor's and the connectors' logs. The
	// default value is slog.Default().
	Logger *slog.Logger
	// Warnings receives the warnings about what the config overrides in
	// the manifests (allow_http), which are never silent. The default
	// value is Logger.
	Warnings *slog.Logger
	// Observer receives the executor's metrics events. The default value
	// discards them.
	Observer host.Observer
	// Values, when set, hands the connectors their config values in place
	// of the config's [connectors.*] tables (connhost dev hands its
	// sandbox's URLs), and the tables are then not checked against the
	// manifests. The default value is nil: the config's values.
	Values func(connector, key string) (string, bool)
	// AllowUnpinned loads modules whose manifest pins no digest
	// (host.Options.AllowUnpinned; connhost dev). The default value is
	// false.
	AllowUnpinned bool
	// OneShot opens the executor for one command rather than a server:
	// no instance is created ahead of the first call, and on a shared
	// ledger the node id defaults to "<host>-cli-<pid>" (a command run
	// beside a server on the same machine must not take that server's
	// lease over) instead of the host name. The default value is false: a
	// server.
	OneShot bool
	// Init starts a new, empty ledger in place of a missing or damaged
	// one (the remains and the witness are set aside; --init). The default
	// value is false.
	Init bool
	// RecoveryProgress, when set, is called during the recovery that the
	// open runs (host.Options.RecoveryProgress).
	RecoveryProgress func(done int)
}

// OpenExecutor opens the executor a config describes, as every connhost
// command that runs connectors does: the ledger in [server] data (or the
// shared ledger of [server] ledger, with this node's id, lease TTL and
// journal of consumed approvals), its witness, the connectors of [server]
// manifests with their modules in [server] modules, their values from
// [connectors.*] and [namespaces.*], the allow_http origins added to
// their allowlists, the approver principals' keys and namespaces, and
// with require_signoff only connectors signed off as they are. Opening
// runs recovery. cfg's empty fields take their defaults (see
// Config.EnsureDefaults); cfg is not modified.
func OpenExecutor(ctx context.Context, cfg *Config, o ExecutorOptions) (*host.Executor, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	c := *cfg
	c.EnsureDefaults()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Warnings == nil {
		o.Warnings = o.Logger
	}
	ms := o.Manifests
	if ms == nil {
		var err error
		if ms, err = manifests.LoadDir(c.Server.Manifests); err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			return nil, fmt.Errorf("server: no manifests (*.toml) in %s", c.Server.Manifests)
		}
	}
	values := o.Values
	if values == nil {
		if err := c.CheckConnectors(ms); err != nil {
			return nil, err
		}
		values = c.Lookup
	}
	c.ApplyAllowHTTP(ms, o.Warnings)
	if c.Server.RequireSignoff {
		if err := checkSignoffs(ms, c.Server.Modules); err != nil {
			return nil, err
		}
	}
	create := ledger.CreateIfNew
	if o.Init {
		create = ledger.CreateInit
	}
	prewarm := 0
	if o.OneShot {
		prewarm = -1
	}
	opts := host.Options{
		DataDir:            c.Server.Data,
		CacheDir:           c.Server.CacheDir,
		WitnessPath:        c.WitnessPath(),
		LedgerCreate:       create,
		PrewarmInstances:   prewarm,
		Manifests:          ms,
		ModuleDir:          c.Server.Modules,
		AllowUnpinned:      o.AllowUnpinned,
		Config:             values,
		NamespaceConfig:    c.NamespaceConfig(),
		InstanceWait:       c.Server.InstanceWait,
		Logger:             o.Logger,
		Observer:           o.Observer,
		RecoveryProgress:   o.RecoveryProgress,
		ApprovalKeys:       c.ApprovalKeys(),
		ApprovalNamespaces: c.ApprovalNamespaces(),
	}
	if c.Server.Ledger != "" {
		db, err := OpenSharedLedger(ctx, SharedLedgerOptions{DSN: c.Server.Ledger, Witness: c.WitnessPath(), Init: o.Init, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		opts.Ledger, opts.CloseLedger = db, true
		opts.Node = nodeID(&c, o.OneShot)
		opts.ConsumedDir = c.Server.ConsumedDir
		opts.LeaseTTL = c.Server.LeaseTTL
	}
	if crash.LoseUnsynced() {
		ctx = crash.WithLoseUnsynced(ctx) // a crash test's lossy disk: the executor's ledger only
	}
	if off, err := crash.ClockOffset(); err != nil {
		return nil, err
	} else if off > 0 {
		// A crash test of the key retention: the host a day later.
		opts.Now = func() time.Time { return time.Now().Add(off) }
	}
	var created []string
	if opts.Ledger == nil {
		created = absent(c.Server.Data, filepath.Join(c.Server.Data, "ledger"), filepath.Join(c.Server.Data, "ledger"+ledger.MarkSuffix), opts.WitnessPath)
	}
	ex, err := host.Open(ctx, opts)
	if err != nil {
		// A start refused after the ledger was created (a module that
		// does not load) leaves no new, empty ledger and witness behind:
		// the next start would take them for the deployment's.
		for _, p := range created {
			_ = os.RemoveAll(p)
		}
		return nil, err
	}
	return ex, nil
}

// absent returns the paths that do not exist, leaving out those inside a
// directory it returns.
func absent(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if slices.ContainsFunc(out, func(dir string) bool { return strings.HasPrefix(p, dir+string(filepath.Separator)) }) {
			continue
		}
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			out = append(out, p)
		}
	}
	return out
}

// WitnessPath is the ledger's witness file: [server] witness, else the data
// directory's path plus ".witness" (a sibling of the data directory, so
// that a restored or deleted data directory is seen).
func (c *Config) WitnessPath() string {
	if c.Server.Witness != "" {
		return c.Server.Witness
	}
	data := c.Server.Data
	if data == "" {
		data = DefaultData
	}
	return filepath.Clean(data) + ledger.WitnessSuffix
}
