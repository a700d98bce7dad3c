package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	engine "github.com/connhost/connhost/devkit/crashtest"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// Report is the matrix of one connector: a Row per cell and the totals.
// Report.OK says whether every cell passed; Report.Failed lists the cells
// that did not; Report.WriteTable renders it.
type Report = engine.Report

// Row is the outcome of one cell: the point, operation and approval
// variant, the recovery decision, the effects the provider gained, the
// final status, whether it passed and why not, the provider it ran
// against and the connector's own error.
type Row = engine.Row

// Totals sums a Report.
type Totals = engine.Totals

// Holder makes a provider hold a request it has received, as a provider
// still processing it does (the in-flight row).
type Holder = engine.Holder

// HeldAnswerer is a Holder that tells what the provider answered the
// released request: the in-flight row is then judged by the effects once
// it was answered (see Probe's release), and an effect that appeared
// while the request was held (a re-dispatch's, which the held request
// then meets as a duplicate the provider refuses) is no failure by
// itself. HeldAnswer returns ErrNoHeldAnswer when the provider did not
// tell.
type HeldAnswerer = engine.HeldAnswerer

// ErrNoHeldAnswer is what HeldAnswerer.HeldAnswer returns when the
// provider does not tell what it answered the held request.
var ErrNoHeldAnswer = engine.ErrNoHeldAnswer

// PointInFlight names the row in which the provider still processes the
// killed attempt. It is not a crash point: the process is killed from
// outside while the provider holds its request.
const PointInFlight = engine.PointInFlight

// PointEqualArgs names the row of two different calls with equal
// arguments in one session, without a crash: each must make an effect of
// its own (a key derived from the arguments, or a provider deduplicating
// by an argument, merges them), unless the operation's duplicate_window
// answers the second with the first's outcome. It runs for every external
// operation but a delete (a probe config's removes).
const PointEqualArgs = engine.PointEqualArgs

// PointProviderKey names the row that proves a manifest's [provider]
// claim against the provider, with a probe config (Options.ProbeConfig):
// the request that took a call's effect is sent again as it was (the
// provider must make no second effect) and with the declared key changed
// (it must make one). A row that passes carries the key in
// Row.ProvenKey; connhost crashtest --record-proof writes it where the
// audit reads it.
const PointProviderKey = engine.PointProviderKey

// Rows returns the rows that are no crash point, each asked for in
// Options.Points by its name like a point: PointInFlight, PointEqualArgs,
// the key retention's key_kept and key_expired, which need a provider
// whose clock moves (connhost crashtest --provider payments), and
// PointProviderKey.
func Rows() []string { return slices.Clone(engine.Rows) }

// ErrCannotHold is what Holder.Arm returns for an operation whose request
// the provider cannot hold; the in-flight row is then n/a.
var ErrCannotHold = engine.ErrCannotHold

// Points returns the crash points, in the order of a call's life, which
// is the order a cell of each runs in: before_intent, after_intent,
// after_approval, after_dispatch_record, after_plugin_return,
// after_outcome_record, after_reconcile_return, after_answer. (The
// in-flight row, PointInFlight, is no crash point: the host is killed
// from outside.)
func Points() []string { return slices.Clone(crash.Points) }

// ProbeConfig is a probe config: how the matrix observes a provider that
// answers no probe contract of its own, through its own API and a proxy
// in front of it (see LoadProbeConfig for the format).
type ProbeConfig = engine.ProbeConfig

// ProbeConfigError reports every problem of a probe config with its file
// and line.
type ProbeConfigError = engine.ProbeConfigError

// LoadProbeConfig reads a probe config, by convention
// manifests/<connector>.probe.toml; env looks up the environment
// variables it names ({env.NAME}; nil: the process's environment).
//
// A probe config is TOML with a table per operation:
//
//	[probe]
//	headers = { Authorization = "{env.PB_TOKEN}" }   # with the probe's own requests only
//
//	[operation.create_item]
//	hold    = "POST /api/collections/items/records"     # the request the in-flight row holds
//	args    = '{"name": "crashtest {unique}", "quantity": 1}'
//	receipt = "GET /api/collections/items/records/{receipt}"
//	effects = { count = "GET /api/collections/items/records?perPage=1", json = "totalItems" }
//
//	[operation.delete_item]
//	hold    = "DELETE /api/collections/items/records/{id}"
//	setup   = { request = "POST /api/collections/items/records", body = '{"name": "doomed {unique}", "quantity": 1}' }
//	args    = '{"id": "{setup.id}"}'
//	receipt = "GET /api/collections/items/records/{receipt}"
//	effects = { count = "GET /api/collections/items/records?perPage=1", json = "totalItems", removes = true }
//
// hold is METHOD /path ({name} matches a segment, {name...} the rest);
// effects counts with a GET answering JSON (json: the path of a number,
// or of an array whose length counts; without json the answer itself, a
// bare top-level array) or with answers = "METHOD /path",
// the 2xx answers the proxy saw, except those carrying unless_header
// ("Idempotent-Replayed: true"); removes = true makes each object that
// goes away one effect, the effect of a delete. receipt is a GET with
// {receipt}: 2xx exists, 404 or 410 does not; a succeeded call must name
// an object that exists (for removes, one that is gone), and a succeeded
// call without a receipt fails its cell unless receipt = "none". setup is
// a request before each cell whose JSON answer fills {setup.PATH} in
// args. {unique} is new in each cell, {env.NAME} an environment
// variable. Paths are relative to the provider URL. Every problem is
// reported with its file and line.
func LoadProbeConfig(path string, env func(string) (string, bool)) (*ProbeConfig, error) {
	return engine.LoadProbeConfig(path, env)
}

// Options configures Run.
type Options struct {
	// Binary is a built connhost binary (see BuildConnhost). Required.
	Binary string
	// Manifest is the connector's manifest file. Required. Run never
	// modifies it; an unpinned manifest is pinned to Module in the
	// copies each cell runs.
	Manifest string
	// Module is the connector's built wasm module (see BuildModule).
	// Required. The cells run it even when the manifest pins another
	// digest (their manifest copies are pinned to it): the matrix judges
	// this module against the manifest's policies.
	Module string
	// ProviderURL is where the connector reaches its test provider. It is
	// handed to the connector as the config value URLKey, and its origin
	// is added to the connector's allowlist the way a deployment does
	// (allow_http). Required.
	ProviderURL string
	// URLKey is the config key that takes ProviderURL; the manifest must
	// declare it in capabilities.config. The default value is "base_url".
	URLKey string
	// Config holds the connector's other config values (a test API key).
	// Every key must be declared in the manifest's capabilities.config.
	// The default value is none.
	Config map[string]string
	// Provider answers the matrix's questions about the provider (see
	// Probe). Exactly one of Provider and ProbeConfig is required.
	Provider Provider
	// ProbeConfig observes a provider that answers no probe contract:
	// the matrix serves a proxy in front of ProviderURL, hands the
	// connector the proxy's URL (allowed the way ProviderURL would be),
	// holds and counts requests there, and asks the provider's own API
	// as the config says (see LoadProbeConfig).
	ProbeConfig *ProbeConfig
	// ConfigEnv holds config values taken from the environment: config
	// key → the name of the variable holding its value (a test
	// provider's token). The value is read by the connhost processes
	// themselves (key_env in their connhost.toml), so it is written
	// nowhere. Every key must be declared in the manifest's
	// capabilities.config and every variable set. The default value is
	// none.
	ConfigEnv map[string]string
	// NoPreflight skips the preflight: by default every operation runs
	// once, without a crash, before the first cell, and Run stops with an
	// error naming the connector's own error when one does not succeed
	// (a refused credential fails every cell alike). The default value is
	// false.
	NoPreflight bool
	// ProviderName names the provider in every Row. The default value is
	// ProviderURL.
	ProviderName string
	// Args are sample arguments per operation; an operation without an
	// entry asks Provider.Args. The default value is none.
	Args map[string]json.RawMessage
	// Operations are the operations to run. The default value is every
	// operation of the manifest.
	Operations []string
	// Points are the crash points (see Points), and the rows that are no
	// crash point (see Rows). The default value is every point, plus
	// every row that applies to an operation.
	Points []string
	// Variants are the approval variants of external operations: true runs
	// an operation with requires_approval = true, false without. The
	// default value is both.
	Variants []bool
	// GatedReads also runs read operations gated. The default value is
	// false.
	GatedReads bool
	// WorkDir is where the cells' data directories are created. The
	// default value is a temporary directory, removed when Run returns.
	WorkDir string
	// ProcessTimeout bounds every connhost process. The default value is
	// 2 minutes.
	ProcessTimeout time.Duration
	// Progress, when set, is called after every cell with the number of
	// cells done, the number the run holds, and the cell's row.
	Progress func(done, total int, row Row)
}

// Run runs the matrix and returns its report. An error means the matrix
// could not run (bad options, a provider that does not answer, a connhost
// process that failed for another reason than the injected kill); a cell
// that breaks the declared policy is a failing Row, not an error. Run is
// not safe for concurrent use with another Run against the same provider:
// effects are counted as a before/after difference.
func Run(ctx context.Context, o Options) (Report, error) {
	m, err := o.validate()
	if err != nil {
		return Report{}, err
	}
	providerURL := o.ProviderURL
	eo := engine.Options{
		Binary: o.Binary, Operations: o.Operations, Points: o.Points, Variants: o.Variants, GatedReads: o.GatedReads,
		ProcessTimeout: o.ProcessTimeout, OnCell: o.Progress, Preflight: !o.NoPreflight,
	}
	if o.ProbeConfig != nil {
		probe, err := engine.StartProbe(o.ProbeConfig, o.ProviderURL)
		if err != nil {
			return Report{}, err
		}
		defer probe.Close()
		providerURL = probe.URL()
		eo.Effects, eo.CheckReceipt, eo.Hold, eo.Receipts, eo.Prover = probe.Effects, probe.CheckReceipt, probe, probe, probe
		eo.Removes = func(op string) bool {
			po := o.ProbeConfig.Operations[op]
			return po != nil && po.Effects.Removes
		}
		eo.Args = func(ctx context.Context, op string) (json.RawMessage, error) {
			if a, ok := o.Args[op]; ok {
				return a, nil
			}
			return probe.Args(ctx, op)
		}
		for _, op := range m.Operations {
			if len(o.Operations) > 0 && !slices.Contains(o.Operations, op.Name) {
				continue
			}
			if _, err := eo.Effects(ctx, op.Name); err != nil {
				return Report{}, fmt.Errorf("crashtest: %s: %w", o.ProbeConfig.Path, err)
			}
		}
	} else {
		if _, err := o.Provider.Effects(ctx); err != nil {
			return Report{}, fmt.Errorf("crashtest: the provider does not answer how many effects it holds: %w", err)
		}
		p := o.Provider
		eo.Effects = func(ctx context.Context, _ string) (int, error) { return p.Effects(ctx) }
		eo.Args, eo.Hold = o.args, p
		if _, err := p.Exists(ctx, "connhost-crashtest-probe"); !errors.Is(err, ErrUnsupported) {
			eo.CheckReceipt = func(ctx context.Context, op, receipt string) (string, error) {
				if receipt == "" {
					return op + " succeeded without a receipt, and the provider answers receipts (GET {probe}/receipts/…): a succeeded call names what it made", nil
				}
				ok, err := p.Exists(ctx, receipt)
				if err != nil || ok {
					return "", err
				}
				return fmt.Sprintf("receipt %s names no object at the provider", receipt), nil
			}
		}
	}
	work := o.WorkDir
	if work == "" {
		if work, err = os.MkdirTemp("", "connhost-crashtest-"); err != nil {
			return Report{}, fmt.Errorf("crashtest: %w", err)
		}
		defer os.RemoveAll(work)
	}
	modules := filepath.Join(work, "modules")
	if err := copyFile(o.Module, filepath.Join(modules, m.Connector.Module)); err != nil {
		return Report{}, fmt.Errorf("crashtest: module: %w", err)
	}
	manifest, err := pinnedTo(o.Manifest, m, o.Module, work)
	if err != nil {
		return Report{}, err
	}
	cfg := filepath.Join(work, "connhost.toml")
	if err := writeConfig(cfg, m.Connector.Name, o.values(providerURL), o.ConfigEnv, origin(providerURL)); err != nil {
		return Report{}, err
	}
	eo.ProviderName = o.ProviderName
	if eo.ProviderName == "" {
		eo.ProviderName = o.ProviderURL
	}
	eo.Manifest, eo.Modules, eo.Config, eo.WorkDir = manifest, modules, cfg, work
	if len(o.Points) > 0 && !slices.Contains(o.Points, PointInFlight) {
		eo.Hold = nil
	}
	return engine.Run(ctx, eo)
}

// pinnedTo returns the manifest the cells run: path itself when it pins
// module's digest or nothing (the engine pins unpinned copies), else a
// copy in work pinned to module.
func pinnedTo(path string, m *manifests.Manifest, module, work string) (string, error) {
	digest, err := wasmbuild.FileDigest(module)
	if err != nil {
		return "", fmt.Errorf("crashtest: module: %w", err)
	}
	if m.Connector.SHA256 == "" || m.Connector.SHA256 == digest {
		return path, nil
	}
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("crashtest: %w", err)
	}
	pinned, err := manifests.SetSHA256(src, digest)
	if err != nil {
		return "", fmt.Errorf("crashtest: pin a copy of %s: %w", path, err)
	}
	out := filepath.Join(work, "manifest", filepath.Base(path))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", fmt.Errorf("crashtest: %w", err)
	}
	return out, os.WriteFile(out, pinned, 0o644)
}

// validate reports every problem with o at once, and returns the
// manifest.
func (o *Options) validate() (*manifests.Manifest, error) {
	var errs []error
	for name, v := range map[string]string{"Binary": o.Binary, "Manifest": o.Manifest, "Module": o.Module, "ProviderURL": o.ProviderURL} {
		if v == "" {
			errs = append(errs, fmt.Errorf("crashtest: Options.%s is required", name))
		}
	}
	switch {
	case o.Provider == nil && o.ProbeConfig == nil:
		errs = append(errs, errors.New("crashtest: Options.Provider or Options.ProbeConfig is required (NewProbe asks a provider's probe contract; LoadProbeConfig describes a provider without one)"))
	case o.Provider != nil && o.ProbeConfig != nil:
		errs = append(errs, errors.New("crashtest: Options.Provider and Options.ProbeConfig exclude each other"))
	}
	if o.ProviderURL != "" && origin(o.ProviderURL) == "" {
		errs = append(errs, fmt.Errorf("crashtest: Options.ProviderURL %q is not an absolute http or https URL", o.ProviderURL))
	}
	if o.URLKey == "" {
		o.URLKey = "base_url"
	}
	var m *manifests.Manifest
	if o.Manifest != "" {
		var err error
		if m, err = manifests.Load(o.Manifest); err != nil {
			errs = append(errs, err)
		}
	}
	if m != nil {
		if !slices.Contains(m.Capabilities.Config, o.URLKey) {
			errs = append(errs, fmt.Errorf("crashtest: connector %s declares no config key %q to take the provider URL (capabilities.config: %v); name the key with URLKey",
				m.Connector.Name, o.URLKey, m.Capabilities.Config))
		}
		for k := range o.Config {
			if !slices.Contains(m.Capabilities.Config, k) {
				errs = append(errs, fmt.Errorf("crashtest: connector %s does not declare config key %q (capabilities.config: %v)", m.Connector.Name, k, m.Capabilities.Config))
			}
		}
		for op := range o.Args {
			if _, ok := m.Operation(op); !ok {
				errs = append(errs, fmt.Errorf("crashtest: Args for %q: connector %s has no such operation", op, m.Connector.Name))
			}
		}
		for k, env := range o.ConfigEnv {
			if !slices.Contains(m.Capabilities.Config, k) {
				errs = append(errs, fmt.Errorf("crashtest: connector %s does not declare config key %q (capabilities.config: %v)", m.Connector.Name, k, m.Capabilities.Config))
			}
			if _, ok := o.Config[k]; ok || k == o.URLKey {
				errs = append(errs, fmt.Errorf("crashtest: config key %q is given twice (ConfigEnv and Config, or the URL key)", k))
			}
			if _, ok := os.LookupEnv(env); !ok {
				errs = append(errs, fmt.Errorf("crashtest: config key %q: environment variable %s is not set", k, env))
			}
		}
		if o.ProbeConfig != nil {
			if err := o.ProbeConfig.ForManifest(m, o.Operations, func(op string) bool { _, ok := o.Args[op]; return ok }); err != nil {
				errs = append(errs, err)
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return m, errors.Join(errs...)
}

func (o *Options) values(providerURL string) map[string]string {
	v := map[string]string{o.URLKey: providerURL}
	for k, val := range o.Config {
		v[k] = val
	}
	return v
}

// args is the engine's Args: Options.Args, else the provider's.
func (o *Options) args(ctx context.Context, operation string) (json.RawMessage, error) {
	if a, ok := o.Args[operation]; ok {
		return a, nil
	}
	a, err := o.Provider.Args(ctx, operation)
	if errors.Is(err, ErrUnsupported) {
		return nil, fmt.Errorf("no sample arguments for operation %q: the provider has none (%w); give them in Options.Args (connhost crashtest --args)", operation, err)
	}
	return a, err
}

// origin returns scheme://host:port of an absolute http(s) URL (the port
// made explicit), or "".
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}

// writeConfig writes the connhost.toml every cell runs with: the
// connector's config values, those it takes from the environment (as
// key_env, read by each process), and its test provider's origin in
// allow_http.
func writeConfig(path, connector string, values, env map[string]string, allow string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "[connectors.%s]\n", connector)
	for _, k := range slices.Sorted(maps.Keys(values)) {
		fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(values[k]))
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "%s_env = %s\n", k, strconv.Quote(env[k]))
	}
	fmt.Fprintf(&b, "allow_http = [%s]\n", strconv.Quote(allow))
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("crashtest: %w", err)
	}
	return nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
