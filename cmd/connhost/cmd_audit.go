package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

func (a *app) auditCommand() *cobra.Command {
	var strict bool
	var html string
	var diff []string
	c := &cobra.Command{
		Use:   "audit [--strict] [--html FILE] [--diff OLD NEW] <manifest or dir>...",
		Short: "Check manifests against what their modules really do",
		Long: `audit cross-checks each manifest with its module (exports, declared
recovery policies, capabilities) and reports findings. It exits 3 when it
finds problems (with --strict, warnings count too), and 2 when a path it
is given does not exist.`,
		Example: `  connhost audit manifests/
  connhost audit --strict --html report.html manifests/payments.toml
  connhost audit --diff old/payments.toml manifests/payments.toml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(diff) == 0 {
				return usagef("audit needs at least one manifest or directory")
			}
			o := auditOptions{strict: strict, html: html}
			paths := args
			if len(diff) > 0 {
				// --diff OLD NEW reads as one --diff value and one argument;
				// --diff OLD --diff NEW and --diff OLD,NEW as two values.
				paths = append(append([]string(nil), diff...), args...)
				if len(paths) != 2 {
					return usagef("--diff compares exactly two manifests, OLD and NEW (got %d)", len(paths))
				}
			}
			// A path that is not there is a mistake on the command line,
			// not a finding about a manifest.
			for _, p := range paths {
				if _, err := os.Stat(p); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return usagef("%s: no such file or directory", p)
					}
					return fmt.Errorf("audit: %w", err)
				}
			}
			if len(diff) > 0 {
				return a.runAuditDiff(cmd.Context(), paths[0], paths[1], o)
			}
			return a.runAudit(cmd.Context(), args, o)
		},
	}
	c.Flags().BoolVar(&strict, "strict", false, "treat warnings as findings")
	c.Flags().StringVar(&html, "html", "", "also write an HTML report to FILE")
	c.Flags().StringSliceVar(&diff, "diff", nil, "compare two manifests: --diff OLD --diff NEW (or --diff OLD,NEW)")
	return c
}

// auditOptions are the flags of connhost audit.
type auditOptions struct {
	strict bool
	// html is the file the HTML report is written to ("" for none).
	html string
}

// runAudit audits the manifests and directories in paths, prints the report
// (text, or JSON with --json), writes the HTML report when asked, and
// returns an ExitFindings exitError when the report fails.
func (a *app) runAudit(ctx context.Context, paths []string, o auditOptions) error {
	p := a.newModuleProber(ctx)
	defer p.close()
	r := audit.AuditPaths(paths, p.facts)
	if err := ctx.Err(); err != nil {
		return err // interrupted: the module facts are not to be trusted
	}
	if err := a.writeReport(o, func(w io.Writer) error { return audit.WriteText(w, r) },
		func(w io.Writer) error { return audit.WriteJSON(w, r) },
		func(w io.Writer) error { return audit.WriteHTML(w, r) }); err != nil {
		return err
	}
	if r.Failed(o.strict) {
		return &exitError{code: ExitFindings}
	}
	return nil
}

// runAuditDiff compares two versions of a manifest. A manifest that does
// not load is an operational error (exit 1), not a change.
func (a *app) runAuditDiff(ctx context.Context, oldPath, newPath string, o auditOptions) error {
	oldM, err := manifests.Load(oldPath)
	if err != nil {
		return fmt.Errorf("audit --diff: old manifest: %w", err)
	}
	newM, err := manifests.Load(newPath)
	if err != nil {
		return fmt.Errorf("audit --diff: new manifest: %w", err)
	}
	p := a.newModuleProber(ctx)
	defer p.close()
	d := audit.Diff(oldM, newM, p.facts(oldM), p.facts(newM))
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := a.writeReport(o, func(w io.Writer) error { return audit.WriteDiffText(w, d) },
		func(w io.Writer) error { return audit.WriteDiffJSON(w, d) },
		func(w io.Writer) error { return audit.WriteDiffHTML(w, d) }); err != nil {
		return err
	}
	if d.Failed(o.strict) {
		return &exitError{code: ExitFindings}
	}
	return nil
}

// writeReport prints a report on stdout (JSON with --json) and writes its
// HTML form to o.html when set.
func (a *app) writeReport(o auditOptions, text, js, html func(io.Writer) error) error {
	write := text
	if a.g.json {
		write = js
	}
	if err := write(a.stdout); err != nil {
		return fmt.Errorf("audit: write report: %w", err)
	}
	if o.html == "" {
		return nil
	}
	f, err := os.Create(o.html)
	if err != nil {
		return fmt.Errorf("audit: --html: %w", err)
	}
	err = html(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: --html %s: %w", o.html, err)
	}
	return nil
}

// moduleProber finds out the facts about connector modules for the audit by
// loading them with the wasm runtime. One runtime, with the compilation
// cache in --data/cache, serves every manifest of a run; close releases it.
// It is not safe for concurrent use (the audit calls it in turn).
type moduleProber struct {
	ctx context.Context
	// dir is --modules; modules not found there are looked up next to
	// their manifest.
	dir string
	// cacheDir is the compilation cache, --data/cache.
	cacheDir string
	rt       *wasmrt.Runtime
	// rtErr is why the runtime could not be created (reported as each
	// module's load error).
	rtErr error
}

func (a *app) newModuleProber(ctx context.Context) *moduleProber {
	p := &moduleProber{ctx: ctx, dir: a.g.modules}
	if a.g.data != "" {
		p.cacheDir = filepath.Join(a.g.data, "cache")
	}
	return p
}

// runtime returns the prober's runtime, creating it on first use (an audit
// whose manifests all fail to parse creates no cache directory).
func (p *moduleProber) runtime() (*wasmrt.Runtime, error) {
	if p.rt != nil || p.rtErr != nil {
		return p.rt, p.rtErr
	}
	ro := wasmrt.Options{
		CacheDir: p.cacheDir,
		// Guests may log while they initialise and describe themselves;
		// the audit's output is the report alone.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	p.rt, p.rtErr = wasmrt.New(p.ctx, ro)
	if p.rtErr != nil && ro.CacheDir != "" {
		// The cache only saves compile time: an audit of a read-only
		// checkout still runs, with an in-memory cache.
		ro.CacheDir = ""
		p.rt, p.rtErr = wasmrt.New(p.ctx, ro)
	}
	return p.rt, p.rtErr
}

func (p *moduleProber) close() {
	if p.rt != nil {
		_ = p.rt.Close(context.WithoutCancel(p.ctx))
	}
}

// modulePath resolves m's module: in --modules, else next to the manifest.
// When neither exists it returns the --modules path (where connhost build
// writes), and false.
func (p *moduleProber) modulePath(m *manifests.Manifest) (string, bool) {
	path := m.ModulePath(p.dir)
	if _, err := os.Stat(path); err == nil {
		return path, true
	}
	if alt := m.ModulePath(""); alt != path {
		if _, err := os.Stat(alt); err == nil {
			return alt, true
		}
	}
	return path, false
}

// abiInError extracts the version a module claims from an ErrABIVersion
// load error ("module speaks abi 2", "module describes itself as abi 2").
var abiInError = regexp.MustCompile(`module (?:speaks|describes itself as) abi (-?\d+)`)

// facts is the audit.FactsFunc of the prober. It reads the module, hashes
// it, and loads it to learn its ABI version and self-description. The load
// is a probe: it uses a copy of the manifest that pins the actual digest
// (a mismatch is the audit's finding, not a reason to stop looking),
// declares the host's ABI version (the audit compares the module's with the
// manifest's) and no operations and capabilities, so that the host's own
// cross-check of declared policies against exports does not hide the
// description the audit needs to report export-missing per operation. A
// second probe declares exactly the operations the module describes, so
// that a module claiming an entry point it does not export is reported as
// module-invalid.
func (p *moduleProber) facts(m *manifests.Manifest) audit.ModuleFacts {
	path, found := p.modulePath(m)
	f := audit.ModuleFacts{Path: path, Found: found}
	if !found {
		return f
	}
	code, err := os.ReadFile(path)
	if err != nil {
		f.LoadError = err.Error()
		return f
	}
	sum := sha256.Sum256(code)
	f.ActualSHA256 = hex.EncodeToString(sum[:])
	if _, err := p.runtime(); err != nil {
		f.LoadError = err.Error()
		return f
	}

	desc, err := p.probe(m, path, f.ActualSHA256, nil)
	if err != nil {
		if errors.Is(err, host.ErrABIVersion) {
			if sm := abiInError.FindStringSubmatch(err.Error()); sm != nil {
				if v, cerr := strconv.Atoi(sm[1]); cerr == nil && v != 0 {
					f.ABI = v // the audit raises abi-mismatch
					return f
				}
			}
		}
		f.LoadError = loadErrorText(m, err)
		return f
	}
	f.ABI = abi.Version // Load checked connhost_abi_version against it
	f.Description = &desc

	ops := make([]*manifests.Operation, 0, len(desc.Operations))
	for _, info := range desc.Operations {
		ops = append(ops, &manifests.Operation{Name: info.Name})
	}
	if _, err := p.probe(m, path, f.ActualSHA256, ops); err != nil {
		f.LoadError = loadErrorText(m, err)
	}
	return f
}

// probe loads the module at path under a probing copy of m (see facts) and
// returns its description.
func (p *moduleProber) probe(m *manifests.Manifest, path, digest string, ops []*manifests.Operation) (abi.Description, error) {
	pm := *m
	pm.Connector.SHA256 = digest
	pm.Connector.ABI = abi.Version
	pm.Capabilities = manifests.Capabilities{}
	pm.Operations = ops
	c, err := p.rt.Load(p.ctx, &pm, wasmrt.LoadOptions{ModulePath: path, AllowUnpinned: true})
	if err != nil {
		return abi.Description{}, err
	}
	defer c.Close(context.WithoutCancel(p.ctx))
	return c.Description(), nil
}

// loadErrorText makes a load error read well after "module X could not be
// loaded: ": without the connector prefix, on one line.
func loadErrorText(m *manifests.Manifest, err error) string {
	prefix := "connector[" + m.Connector.Name + "]: "
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "; ")
}
