package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/connhost/connhost/internal/crash"
	engine "github.com/connhost/connhost/internal/crashtest"
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

// PointInFlight names the row in which the provider still processes the
// killed attempt. It is not a crash point: the process is killed from
// outside while the provider holds its request.
const PointInFlight = engine.PointInFlight

// ErrCannotHold is what Holder.Arm returns for an operation whose request
// the provider cannot hold; the in-flight row is then n/a.
var ErrCannotHold = engine.ErrCannotHold

// Points returns the crash points, in the order of a call's life:
// before_intent, after_intent, after_approval, after_dispatch_record,
// after_plugin_return, after_outcome_record, after_reconcile_return.
func Points() []string { return slices.Clone(crash.Points) }

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
	// Probe). Required.
	Provider Provider
	// ProviderName names the provider in every Row. The default value is
	// ProviderURL.
	ProviderName string
	// Args are sample arguments per operation; an operation without an
	// entry asks Provider.Args. The default value is none.
	Args map[string]json.RawMessage
	// Operations are the operations to run. The default value is every
	// operation of the manifest.
	Operations []string
	// Points are the crash points (see Points), and PointInFlight. The
	// default value is every point, plus PointInFlight for external
	// operations.
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
	if _, err := o.Provider.Effects(ctx); err != nil {
		return Report{}, fmt.Errorf("crashtest: the provider does not answer how many effects it holds: %w", err)
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
	if err := writeConfig(cfg, m.Connector.Name, o.values(), origin(o.ProviderURL)); err != nil {
		return Report{}, err
	}
	name := o.ProviderName
	if name == "" {
		name = o.ProviderURL
	}
	eo := engine.Options{
		Binary: o.Binary, Manifest: manifest, Modules: modules, Config: cfg,
		Operations: o.Operations, Points: o.Points, Variants: o.Variants, GatedReads: o.GatedReads,
		WorkDir: work, ProcessTimeout: o.ProcessTimeout, ProviderName: name,
		Effects: o.Provider.Effects,
		Args:    o.args,
		Hold:    o.Provider,
		OnCell:  o.Progress,
	}
	if len(o.Points) > 0 && !slices.Contains(o.Points, PointInFlight) {
		eo.Hold = nil
	}
	if _, err := o.Provider.Exists(ctx, "connhost-crashtest-probe"); !errors.Is(err, ErrUnsupported) {
		eo.Exists = o.Provider.Exists
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
	if o.Provider == nil {
		errs = append(errs, errors.New("crashtest: Options.Provider is required (NewProbe serves the probe contract)"))
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
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return m, errors.Join(errs...)
}

func (o *Options) values() map[string]string {
	v := map[string]string{o.URLKey: o.ProviderURL}
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
// connector's config values and its test provider's origin in allow_http.
func writeConfig(path, connector string, values map[string]string, allow string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "[connectors.%s]\n", connector)
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, strconv.Quote(values[k]))
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
