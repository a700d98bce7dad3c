package authoring

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/audit"
)

func (k *kit) auditCommand() *cobra.Command {
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
				return cli.Usagef("audit needs at least one manifest or directory")
			}
			if o.maxTTL <= 0 {
				return cli.Usagef("--max-approval-ttl must be positive")
			}
			for _, code := range allow {
				if !isChangeCode(audit.Code(code)) {
					return cli.Usagef("--allow %s: not a change code of audit --diff (see connhost audit --help)", code)
				}
				o.allow = append(o.allow, audit.Code(code))
			}
			if len(allow) > 0 && len(diff) == 0 {
				return cli.Usagef("--allow applies to --diff only")
			}
			if (o.sign || waive != "") && strings.TrimSpace(o.by) == "" {
				return cli.Usagef("--sign and --waive need the reviewer's name: --by NAME")
			}
			if o.by != "" && !o.sign && waive == "" {
				return cli.Usagef("--by names the reviewer of --sign or --waive")
			}
			if o.reason != "" && waive == "" {
				return cli.Usagef("--reason applies to --waive only")
			}
			if len(diff) > 0 && (o.sign || waive != "") {
				return cli.Usagef("--diff does not sign or waive: audit the new manifest on its own for that")
			}
			if waive != "" {
				if o.sign {
					return cli.Usagef("--waive and --sign are separate steps: waive, read the report, then sign")
				}
				if strings.TrimSpace(o.reason) == "" {
					return cli.Usagef("--waive needs --reason: why the finding is acceptable")
				}
				if len(args) != 1 {
					return cli.Usagef("--waive applies to one manifest (got %d arguments)", len(args))
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
					return cli.Usagef("--diff compares exactly two manifests, OLD and NEW (got %d)", len(paths))
				}
			}
			// A path that is not there is a mistake on the command line,
			// not a finding about a manifest.
			for _, p := range paths {
				if _, err := os.Stat(p); err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return cli.Usagef("%s: no such file or directory", p)
					}
					return fmt.Errorf("audit: %w", err)
				}
			}
			if len(diff) > 0 {
				return k.runAuditDiff(cmd.Context(), paths[0], paths[1], o)
			}
			return k.runAudit(cmd.Context(), args, o)
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

// runAudit audits the manifests and directories in paths, applies --waive
// and --sign, prints the report (text, or JSON with --json), writes the
// HTML report when asked, and returns an cli.ExitFindings exitError when the
// report fails.
func (k *kit) runAudit(ctx context.Context, paths []string, o auditOptions) error {
	p := k.newModuleProber(ctx)
	defer p.Close()
	ao := audit.Options{Facts: p.Facts, MaxApprovalTTL: o.maxTTL}
	r := audit.AuditPaths(paths, ao)
	if err := ctx.Err(); err != nil {
		return err // interrupted: the module facts are not to be trusted
	}
	if o.waiveCode != "" {
		if err := k.waive(r, paths[0], o); err != nil {
			return err
		}
		r = audit.AuditPaths(paths, ao) // the report with the waiver applied
	}
	if err := k.writeReport(o, func(w io.Writer) error { return audit.WriteText(w, r) },
		func(w io.Writer) error { return audit.WriteJSON(w, r) },
		func(w io.Writer) error { return audit.WriteHTML(w, r) }); err != nil {
		return err
	}
	if o.sign {
		return k.sign(r, o)
	}
	if r.Failed(o.strict) {
		return &cli.ExitError{Code: cli.ExitFindings}
	}
	return nil
}

// waive records the waiver of --waive in the waiver file of the manifest
// at path. A finding that cannot be waived is a usage error: nothing is
// written.
func (k *kit) waive(r audit.Report, path string, o auditOptions) error {
	if len(r.Connectors) != 1 {
		return &cli.ExitError{Code: cli.ExitFindings, Err: fmt.Errorf("audit --waive: %s does not load as one manifest; fix it first", path)}
	}
	c := r.Connectors[0]
	file := audit.WaiversPath(c.File)
	wf, err := audit.ReadWaivers(file)
	if err != nil {
		return err
	}
	wf, err = audit.Waive(wf, r, c.Name, o.waiveCode, o.waiveOp, o.by, o.reason, k.Now())
	if err != nil {
		return cli.Usagef("--waive: %v", err)
	}
	if err := audit.WriteWaivers(file, wf); err != nil {
		return err
	}
	fmt.Fprintf(k.Stderr(), "waived %s for %s (manifest sha256 %s) in %s\n", o.waiveCode, c.Name, c.ManifestSHA256[:12], file)
	return nil
}

// sign writes a sign-off next to every audited manifest, or none: it
// refuses when any connector does not pass with --strict.
func (k *kit) sign(r audit.Report, o auditOptions) error {
	if len(r.Connectors) == 0 || r.Failed(true) {
		return &cli.ExitError{Code: cli.ExitFindings, Err: fmt.Errorf("audit --sign: nothing signed: %s that are neither fixed nor waived", r.Summary())}
	}
	var out []audit.Signoff
	for _, c := range r.Connectors {
		s, err := audit.Sign(r, c.Name, o.by, k.Now())
		if err != nil {
			return &cli.ExitError{Code: cli.ExitFindings, Err: fmt.Errorf("audit --sign: nothing signed: %w", err)}
		}
		out = append(out, s)
	}
	for i, s := range out {
		file := audit.SignoffPath(r.Connectors[i].File)
		if err := audit.WriteSignoff(file, s); err != nil {
			return err
		}
		fmt.Fprintf(k.Stderr(), "signed %s %s by %s: %s\n", s.Connector, s.Version, s.Reviewer, file)
	}
	return nil
}

// runAuditDiff compares two versions of a manifest and audits the new
// one. A manifest that does not load is a finding (exit 3), not an
// operational error.
func (k *kit) runAuditDiff(ctx context.Context, oldPath, newPath string, o auditOptions) error {
	p := k.newModuleProber(ctx)
	defer p.Close()
	d := audit.DiffPaths(oldPath, newPath, audit.DiffOptions{
		Audit: audit.Options{Facts: p.Facts, MaxApprovalTTL: o.maxTTL},
		Allow: o.allow,
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.writeReport(o, func(w io.Writer) error { return audit.WriteDiffText(w, d) },
		func(w io.Writer) error { return audit.WriteDiffJSON(w, d) },
		func(w io.Writer) error { return audit.WriteDiffHTML(w, d) }); err != nil {
		return err
	}
	if d.Failed(o.strict) {
		return &cli.ExitError{Code: cli.ExitFindings}
	}
	return nil
}

// writeReport prints a report on stdout (JSON with --json) and writes its
// HTML form to o.html when set.
func (k *kit) writeReport(o auditOptions, text, js, html func(io.Writer) error) error {
	write := text
	if k.JSON() {
		write = js
	}
	if err := write(k.Stdout()); err != nil {
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

// newModuleProber probes the modules in --modules for the audit, with the
// compilation cache of --cache-dir, else the user's.
func (k *kit) newModuleProber(ctx context.Context) *audit.Prober {
	cache := k.CacheDir()
	if cache == "" {
		cache, _ = host.DefaultCacheDir()
	}
	return audit.NewProber(ctx, k.Modules(), cache)
}
