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
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

func (a *app) auditCommand() *cobra.Command {
	var (
		o     auditOptions
		diff  []string
		allow []string
		waive string
	)
	c := &cobra.Command{
		Use:   "audit [--strict] [--html FILE] <manifest or dir>... | --diff OLD NEW [--allow CODES] | --waive CODE[:OPERATION] --by NAME --reason TEXT <manifest> | --sign --by NAME <manifest or dir>...",
		Short: "Review manifests against their modules; waive findings, sign off, diff",
		Long: `audit cross-checks each manifest with its module (exports, declared
recovery policies, capabilities, schemas, secrets) and reports findings, each
at the line of the key it is about. It exits 3 when it finds an error (with
--strict, a warning that is not waived counts too), and 2 when a path it is
given does not exist.

A reviewer accepts a warning or info finding with --waive: the waiver (who,
why, and the manifest digest it applies to) is kept next to the manifest in
<name>.waivers.json; it stops applying when the manifest changes. Errors
cannot be waived.

--sign writes a sign-off next to each manifest (<name>.signoff.json):
reviewer, time, manifest and module digests, policy versions and the
waivers in force. It signs only what passes with --strict. connhost serve
with require_signoff = true refuses a connector whose manifest or module
changed since its sign-off.

--diff OLD NEW compares two versions of a manifest and audits NEW against
its module: it exits 3 on an error finding of NEW (a manifest that does not
parse included) and on every risk increase (policy loosened, approval
removed or TTL raised, hosts added, attempts raised, effect downgraded, …)
not accepted with --allow CODE,CODE. Each change names its line in both
files.`,
		Example: `  connhost audit manifests/
  connhost audit --strict --html report.html manifests/payments.toml
  connhost audit --waive loopback-host --by rita --reason "Mailpit runs next to the host" manifests/email.toml
  connhost audit --sign --by rita manifests/payments.toml
  connhost audit --diff old/payments.toml manifests/payments.toml --allow host-added`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(diff) == 0 {
				return usagef("audit needs at least one manifest or directory")
			}
			if o.maxTTL <= 0 {
				return usagef("--max-approval-ttl must be positive")
			}
			for _, code := range allow {
				if !isChangeCode(audit.Code(code)) {
					return usagef("--allow %s: not a change code of audit --diff (see connhost audit --help)", code)
				}
				o.allow = append(o.allow, audit.Code(code))
			}
			if len(allow) > 0 && len(diff) == 0 {
				return usagef("--allow applies to --diff only")
			}
			if (o.sign || waive != "") && strings.TrimSpace(o.by) == "" {
				return usagef("--sign and --waive need the reviewer's name: --by NAME")
			}
			if o.by != "" && !o.sign && waive == "" {
				return usagef("--by names the reviewer of --sign or --waive")
			}
			if o.reason != "" && waive == "" {
				return usagef("--reason applies to --waive only")
			}
			if len(diff) > 0 && (o.sign || waive != "") {
				return usagef("--diff does not sign or waive: audit the new manifest on its own for that")
			}
			if waive != "" {
				if o.sign {
					return usagef("--waive and --sign are separate steps: waive, read the report, then sign")
				}
				if strings.TrimSpace(o.reason) == "" {
					return usagef("--waive needs --reason: why the finding is acceptable")
				}
				if len(args) != 1 {
					return usagef("--waive applies to one manifest (got %d arguments)", len(args))
				}
				code, op, _ := strings.Cut(waive, ":")
				o.waiveCode, o.waiveOp = audit.Code(code), op
			}
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
	f := c.Flags()
	f.BoolVar(&o.strict, "strict", false, "treat warnings that are not waived as findings")
	f.StringVar(&o.html, "html", "", "also write an HTML report to FILE")
	f.StringSliceVar(&diff, "diff", nil, "compare two manifests: --diff OLD --diff NEW (or --diff OLD,NEW)")
	f.StringSliceVar(&allow, "allow", nil, "with --diff: change codes of accepted risk increases (comma-separated)")
	f.StringVar(&waive, "waive", "", "accept the finding CODE (of OPERATION) of one manifest, for this version of it")
	f.BoolVar(&o.sign, "sign", false, "write a sign-off next to each manifest that passes with --strict")
	f.StringVar(&o.by, "by", "", "the reviewer who waives or signs (recorded)")
	f.StringVar(&o.reason, "reason", "", "why the waived finding is acceptable (recorded)")
	f.DurationVar(&o.maxTTL, "max-approval-ttl", audit.DefaultMaxApprovalTTL, "longest approval_ttl that raises no approval-ttl-long")
	return c
}

func isChangeCode(c audit.Code) bool {
	for _, cc := range audit.ChangeCodes {
		if cc.Code == c {
			return true
		}
	}
	return false
}

// auditOptions are the flags of connhost audit.
type auditOptions struct {
	strict bool
	// html is the file the HTML report is written to ("" for none).
	html   string
	maxTTL time.Duration
	allow  []audit.Code
	// sign writes sign-offs by by.
	sign bool
	by   string
	// waiveCode, waiveOp and reason: the finding to waive ("" for none).
	waiveCode audit.Code
	waiveOp   string
	reason    string
}

// reviewClock is the clock of waivers and sign-offs; tests replace it.
var reviewClock = time.Now

// runAudit audits the manifests and directories in paths, applies --waive
// and --sign, prints the report (text, or JSON with --json), writes the
// HTML report when asked, and returns an ExitFindings exitError when the
// report fails.
func (a *app) runAudit(ctx context.Context, paths []string, o auditOptions) error {
	p := a.newModuleProber(ctx)
	defer p.close()
	ao := audit.Options{Facts: p.facts, MaxApprovalTTL: o.maxTTL}
	r := audit.AuditPaths(paths, ao)
	if err := ctx.Err(); err != nil {
		return err // interrupted: the module facts are not to be trusted
	}
	if o.waiveCode != "" {
		if err := a.waive(r, paths[0], o); err != nil {
			return err
		}
		r = audit.AuditPaths(paths, ao) // the report with the waiver applied
	}
	if err := a.writeReport(o, func(w io.Writer) error { return audit.WriteText(w, r) },
		func(w io.Writer) error { return audit.WriteJSON(w, r) },
		func(w io.Writer) error { return audit.WriteHTML(w, r) }); err != nil {
		return err
	}
	if o.sign {
		return a.sign(r, o)
	}
	if r.Failed(o.strict) {
		return &exitError{code: ExitFindings}
	}
	return nil
}

// waive records the waiver of --waive in the waiver file of the manifest
// at path. A finding that cannot be waived is a usage error: nothing is
// written.
func (a *app) waive(r audit.Report, path string, o auditOptions) error {
	if len(r.Connectors) != 1 {
		return &exitError{code: ExitFindings, err: fmt.Errorf("audit --waive: %s does not load as one manifest; fix it first", path)}
	}
	c := r.Connectors[0]
	file := audit.WaiversPath(c.File)
	wf, err := audit.ReadWaivers(file)
	if err != nil {
		return err
	}
	wf, err = audit.Waive(wf, r, c.Name, o.waiveCode, o.waiveOp, o.by, o.reason, reviewClock())
	if err != nil {
		return usagef("--waive: %v", err)
	}
	if err := audit.WriteWaivers(file, wf); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "waived %s for %s (manifest sha256 %s) in %s\n", o.waiveCode, c.Name, c.ManifestSHA256[:12], file)
	return nil
}

// sign writes a sign-off next to every audited manifest, or none: it
// refuses when any connector does not pass with --strict.
func (a *app) sign(r audit.Report, o auditOptions) error {
	if len(r.Connectors) == 0 || r.Failed(true) {
		return &exitError{code: ExitFindings, err: fmt.Errorf("audit --sign: nothing signed: %s that are neither fixed nor waived", r.Summary())}
	}
	var out []audit.Signoff
	for _, c := range r.Connectors {
		s, err := audit.Sign(r, c.Name, o.by, reviewClock())
		if err != nil {
			return &exitError{code: ExitFindings, err: fmt.Errorf("audit --sign: nothing signed: %w", err)}
		}
		out = append(out, s)
	}
	for i, s := range out {
		file := audit.SignoffPath(r.Connectors[i].File)
		if err := audit.WriteSignoff(file, s); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "signed %s %s by %s: %s\n", s.Connector, s.Version, s.Reviewer, file)
	}
	return nil
}

// runAuditDiff compares two versions of a manifest and audits the new
// one. A manifest that does not load is a finding (exit 3), not an
// operational error.
func (a *app) runAuditDiff(ctx context.Context, oldPath, newPath string, o auditOptions) error {
	p := a.newModuleProber(ctx)
	defer p.close()
	d := audit.DiffPaths(oldPath, newPath, audit.DiffOptions{
		Audit: audit.Options{Facts: p.facts, MaxApprovalTTL: o.maxTTL},
		Allow: o.allow,
	})
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
// cache of --cache-dir (else the user's), serves every manifest of a run;
// close releases it.
// It is not safe for concurrent use (the audit calls it in turn).
type moduleProber struct {
	ctx context.Context
	// dir is --modules; modules not found there are looked up next to
	// their manifest.
	dir string
	// cacheDir is the compilation cache: --cache-dir, else
	// host.DefaultCacheDir(), else "" (in memory).
	cacheDir string
	rt       *wasmrt.Runtime
	// rtErr is why the runtime could not be created (reported as each
	// module's load error).
	rtErr error
}

func (a *app) newModuleProber(ctx context.Context) *moduleProber {
	p := &moduleProber{ctx: ctx, dir: a.g.modules, cacheDir: a.g.cacheDir}
	if p.cacheDir == "" {
		p.cacheDir, _ = host.DefaultCacheDir()
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
	// A cache directory that cannot serve compiles in memory (the cache
	// only saves compile time).
	p.rt, p.rtErr = wasmrt.New(p.ctx, ro)
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
