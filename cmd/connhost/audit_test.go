package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// auditModules are the modules the audit tests need, by module file name,
// built from these connector packages.
var auditModules = map[string]string{
	"payments.wasm":    "plugins/payments",
	"email.wasm":       "plugins/email",
	"noreconcile.wasm": "devkit/testing/testconnectors/noreconcile",
	"badversion.wasm":  "devkit/testing/testconnectors/badversion",
}

var (
	auditBuildOnce sync.Once
	auditBuilt     map[string][]byte
	auditBuildErr  error
)

// auditModuleBytes builds (once per test binary, cached across runs by
// wasmbuild) the modules of auditModules.
func auditModuleBytes(t *testing.T) map[string][]byte {
	t.Helper()
	auditBuildOnce.Do(func() {
		auditBuilt = map[string][]byte{}
		for name, pkg := range auditModules {
			path, _, err := wasmbuild.Cached(context.Background(), pkg)
			if err != nil {
				auditBuildErr = err
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				auditBuildErr = err
				return
			}
			auditBuilt[name] = b
		}
	})
	if auditBuildErr != nil {
		t.Fatalf("build test modules: %v", auditBuildErr)
	}
	return auditBuilt
}

// auditEnv is a temporary --modules directory holding every module of
// auditModules plus garbage.wasm (not wasm at all, see
// testdata/audit/flawed/garbage.toml), and a --data directory.
type auditEnv struct {
	tmp, modules, data string
}

func newAuditEnv(t *testing.T) auditEnv {
	t.Helper()
	mods := auditModuleBytes(t)
	tmp := t.TempDir()
	e := auditEnv{tmp: tmp, modules: filepath.Join(tmp, "modules"), data: filepath.Join(tmp, "data")}
	if err := os.MkdirAll(e.modules, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range mods {
		writeFile(t, e.modules, name, string(b))
	}
	writeFile(t, e.modules, "garbage.wasm", "not wasm\n")
	return e
}

// run runs connhost audit with the env's --modules and --data.
func (e auditEnv) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, nil, append([]string{"--modules", e.modules, "--data", e.data, "audit"}, args...)...)
}

var hex64 = regexp.MustCompile(`\b[0-9a-f]{64}\b`)

// normalise makes output independent of the temporary directories and of
// the module and manifest digests (which change with plugin code, the Go
// version and the shipped manifests).
func (e auditEnv) normalise(s string) string {
	s = strings.ReplaceAll(s, e.modules, "$MODULES")
	s = strings.ReplaceAll(s, e.tmp, "$TMP")
	return hex64.ReplaceAllString(s, "<sha256>")
}

// auditJSON is the part of the --json report the tests inspect.
type auditJSON struct {
	Summary    audit.Summary           `json:"summary"`
	Connectors []audit.ConnectorReport `json:"connectors"`
	Findings   []audit.Finding         `json:"findings"`
}

func decodeAudit(t *testing.T, out string) auditJSON {
	t.Helper()
	var r auditJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, out)
	}
	return r
}

// codesByConnector maps each connector to its finding codes of severity
// sev, in report order.
func codesByConnector(r auditJSON, sev audit.Severity) map[string][]audit.Code {
	out := map[string][]audit.Code{}
	for _, f := range r.Findings {
		if f.Severity == sev {
			out[f.Connector] = append(out[f.Connector], f.Code)
		}
	}
	return out
}

// TestAuditShippedManifestsGolden audits the shipped manifests against
// their real modules: every module is found, loaded and described (so the
// exports column is known), and the text and JSON reports match the
// goldens.
func TestAuditShippedManifestsGolden(t *testing.T) {
	e := newAuditEnv(t)
	code, out, errOut := e.run(t, "../../manifests")
	if errOut != "" {
		t.Fatalf("stderr %q", errOut)
	}
	jcode, jout, jerr := e.run(t, "--json", "../../manifests")
	if jerr != "" || jcode != code {
		t.Fatalf("--json: exit %d (text: %d), stderr %q", jcode, code, jerr)
	}
	r := decodeAudit(t, jout)

	// The exit code follows the findings: 3 on any error.
	if want := map[bool]int{true: cli.ExitFindings, false: cli.ExitOK}[r.Summary.Errors > 0]; code != want {
		t.Errorf("exit %d, want %d with %d errors", code, want, r.Summary.Errors)
	}
	var names []string
	for _, c := range r.Connectors {
		names = append(names, c.Name)
		m := c.Module
		if !m.Checked || !m.Found || m.ABI != 1 || m.LoadError != "" || len(m.ActualSHA256) != 64 {
			t.Errorf("%s: module facts %+v, want checked, found, abi 1, digest, no load error", c.Name, m)
		}
		if m.Path != filepath.Join(e.modules, c.Module.File) {
			t.Errorf("%s: module path %s, want in --modules", c.Name, m.Path)
		}
		for _, op := range c.Operations {
			if op.Exports == nil || !op.Exports.InModule {
				t.Errorf("%s/%s: exports %v, want described by the module", c.Name, op.Name, op.Exports)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.data, "cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a compilation cache in --data/cache (%v): compiled modules belong in the machine's cache", err)
	}
	if !slices.Equal(names, []string{"email", "payments"}) {
		t.Errorf("connectors %v", names)
	}
	for _, f := range r.Findings {
		switch f.Code {
		case audit.CodeModuleMissing, audit.CodeModuleInvalid, audit.CodeExportMissing, audit.CodeABIMismatch, audit.CodeModuleNotChecked:
			t.Errorf("shipped manifest finding %s: %s", f.Code, f.Message)
		}
	}
	golden(t, "audit/shipped", []byte(e.normalise(out)))
	golden(t, "audit/shipped_json", []byte(e.normalise(jout)))
}

// TestAuditFlawedManifests proves that each flawed manifest of
// testdata/audit/flawed produces its error finding from the real module,
// and that the audit exits 3.
func TestAuditFlawedManifests(t *testing.T) {
	e := newAuditEnv(t)
	dir := filepath.Join("testdata", "audit", "flawed")
	code, out, errOut := e.run(t, dir)
	if code != cli.ExitFindings || errOut != "" {
		t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitFindings, errOut)
	}
	jcode, jout, _ := e.run(t, "--json", dir)
	if jcode != cli.ExitFindings {
		t.Fatalf("--json: exit %d", jcode)
	}
	r := decodeAudit(t, jout)
	got := codesByConnector(r, audit.SeverityError)
	want := map[string][]audit.Code{
		// The pin mismatches, yet the module is still described: the
		// missing reconcile export is reported too.
		"noreconcile": {audit.CodeDigestMismatch, audit.CodeExportMissing},
		// The ABI version comes from the module's refusal to load.
		"badversion": {audit.CodeDigestUnpinned, audit.CodeABIMismatch},
		"garbage":    {audit.CodeModuleInvalid},
		"missing":    {audit.CodeModuleMissing},
	}
	for name, codes := range want {
		g := slices.Clone(got[name])
		slices.Sort(g)
		w := slices.Clone(codes)
		slices.Sort(w)
		if !slices.Equal(g, w) {
			t.Errorf("%s: error findings %v, want %v", name, got[name], codes)
		}
	}
	for _, c := range r.Connectors {
		switch c.Name {
		case "badversion":
			if c.Module.ABI != 2 || c.Module.LoadError != "" {
				t.Errorf("badversion: abi %d load error %q, want abi 2 and no load error", c.Module.ABI, c.Module.LoadError)
			}
		case "noreconcile":
			if c.Module.DigestStatus != audit.DigestMismatch || c.Operations[0].Exports.String() != "execute" {
				t.Errorf("noreconcile: digest %s exports %s", c.Module.DigestStatus, c.Operations[0].Exports)
			}
		case "missing":
			if c.Module.Found || c.Module.Path != filepath.Join(e.modules, "missing.wasm") {
				t.Errorf("missing: found %t at %s", c.Module.Found, c.Module.Path)
			}
		}
	}
	golden(t, "audit/flawed", []byte(e.normalise(out)))
	golden(t, "audit/flawed_json", []byte(e.normalise(jout)))
}

// TestAuditStrict: a manifest with warnings only passes, and fails with
// --strict. Its module lies next to the manifest, not in --modules.
func TestAuditStrict(t *testing.T) {
	e := newAuditEnv(t)
	mod := auditModuleBytes(t)["noreconcile.wasm"]
	sum := sha256.Sum256(mod)
	dir := filepath.Join(e.tmp, "strict")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "charge.wasm", string(mod)) // not in --modules
	path := writeFile(t, dir, "charge.toml", `[connector]
name = "charge"
version = "1.0.0"
abi = 1
module = "charge.wasm"
sha256 = "`+hex.EncodeToString(sum[:])+`"

[capabilities]
http = ["https://api.stripe.com:443"]

[[operation]]
name = "charge"
description = "Charge."
effect = "external"
recovery = "manual"
requires_approval = true
input_schema = '''{"type": "object", "properties": {"amount": {"type": "integer"}}, "additionalProperties": false}'''
`)
	code, out, errOut := e.run(t, "--json", path)
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("without --strict: exit %d, stderr %q\n%s", code, errOut, out)
	}
	r := decodeAudit(t, out)
	if r.Summary.Errors != 0 || r.Summary.Warnings == 0 {
		t.Fatalf("summary %+v, want warnings and no errors", r.Summary)
	}
	if got := codesByConnector(r, audit.SeverityWarning)["charge"]; !slices.Contains(got, audit.CodeMissingDescription) {
		t.Errorf("warnings %v, want missing-description", got)
	}
	if m := r.Connectors[0].Module; m.Path != filepath.Join(dir, "charge.wasm") || m.DigestStatus != audit.DigestMatch {
		t.Errorf("module %s %s, want the one next to the manifest, digest match", m.Path, m.DigestStatus)
	}
	for _, args := range [][]string{{"--strict", path}, {"--strict", "--json", path}} {
		if code, _, errOut := e.run(t, args...); code != cli.ExitFindings || errOut != "" {
			t.Errorf("%v: exit %d, want %d; stderr %q", args, code, cli.ExitFindings, errOut)
		}
	}
}

// TestAuditHTML: --html writes, besides the usual output, a page showing
// every finding of the report.
func TestAuditHTML(t *testing.T) {
	e := newAuditEnv(t)
	args := []string{"../../manifests", filepath.Join("testdata", "audit", "flawed")}
	_, jout, _ := e.run(t, append([]string{"--json"}, args...)...)
	r := decodeAudit(t, jout)

	page := filepath.Join(e.tmp, "report.html")
	code, out, errOut := e.run(t, append([]string{"--html", page}, args...)...)
	if code != cli.ExitFindings || errOut != "" || !strings.Contains(out, "findings\n") {
		t.Fatalf("exit %d stderr %q stdout:\n%s", code, errOut, out)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if !strings.HasPrefix(html, "<!DOCTYPE html>") {
		t.Errorf("not an HTML page: %.80q", html)
	}
	if len(r.Findings) == 0 {
		t.Fatal("no findings to look for")
	}
	seen := map[audit.Code]bool{}
	for _, f := range r.Findings {
		seen[f.Code] = true
	}
	for c := range seen {
		if n, want := strings.Count(html, `data-code="`+string(c)+`"`), countCode(r, c); n != want {
			t.Errorf("%s: %d rows in the page, want %d", c, n, want)
		}
	}

	// An HTML file that cannot be written is an operational error.
	bad := filepath.Join(e.tmp, "no", "such", "dir", "report.html")
	if code, _, errOut := e.run(t, "--html", bad, "../../manifests"); code != cli.ExitFailure || !strings.Contains(errOut, "--html") {
		t.Errorf("unwritable --html: exit %d stderr %q", code, errOut)
	}
}

func countCode(r auditJSON, c audit.Code) int {
	n := 0
	for _, f := range r.Findings {
		if f.Code == c {
			n++
		}
	}
	return n
}

// loosenedPayments writes a copy of the shipped payments.toml whose refund
// policy is loosened (reconcile -> idempotent-retry), whose create_payment
// no longer requires approval, and which may reach a new host.
func loosenedPayments(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../manifests/payments.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range []struct{ old, new string }{
		{"recovery = \"reconcile\"\nreconcile_settle = \"0s\"", `recovery = "idempotent-retry"`},
		{`requires_approval = true`, `requires_approval = false`}, // the first: create_payment
		{`http = ["https://api.stripe.com:443"]`, `http = ["https://api.stripe.com:443", "https://payments.example.com:443"]`},
	} {
		if !strings.Contains(s, r.old) {
			t.Fatalf("manifests/payments.toml no longer contains %q: update the test", r.old)
		}
		s = strings.Replace(s, r.old, r.new, 1)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "payments.toml", s)
}

// TestAuditDiff compares the shipped payments.toml with a loosened copy:
// the diff names each risk increase with its line in both files and exits
// 3 until every one is accepted with --allow; the new manifest is audited
// against its module too.
func TestAuditDiff(t *testing.T) {
	e := newAuditEnv(t)
	oldPath := "../../manifests/payments.toml"
	newPath := loosenedPayments(t, filepath.Join(e.tmp, "new"))
	accepted := "recovery-loosened,approval-removed,host-added"

	code, out, errOut := e.run(t, "--diff", oldPath, newPath)
	if code != cli.ExitFindings || errOut != "" {
		t.Fatalf("risk increases: exit %d, want %d; stderr %q\n%s", code, cli.ExitFindings, errOut, out)
	}
	// The other spellings of the flag say the same.
	for _, args := range [][]string{{"--diff", oldPath, "--diff", newPath}, {"--diff", oldPath + "," + newPath}} {
		if c, o, _ := e.run(t, args...); c != code || o != out {
			t.Errorf("%v: exit %d, output:\n%s", args, c, o)
		}
	}
	// Accepting one of three is not enough; accepting all passes.
	if c, _, _ := e.run(t, "--diff", oldPath, newPath, "--allow", "host-added"); c != cli.ExitFindings {
		t.Errorf("--allow host-added: exit %d, want %d", c, cli.ExitFindings)
	}
	code, out, _ = e.run(t, "--diff", oldPath, newPath, "--allow", accepted)
	if code != cli.ExitOK {
		t.Fatalf("--allow %s: exit %d\n%s", accepted, code, out)
	}
	jcode, jout, _ := e.run(t, "--json", "--diff", oldPath, newPath, "--allow", accepted)
	if jcode != cli.ExitOK {
		t.Fatalf("--json: exit %d", jcode)
	}
	var d audit.DiffReport
	if err := json.Unmarshal([]byte(jout), &d); err != nil {
		t.Fatal(err)
	}
	want := map[audit.Code]string{
		audit.CodeRecoveryLoosened: "refund_payment",
		audit.CodeApprovalRemoved:  "create_payment",
		audit.CodeHostAdded:        "",
	}
	for _, c := range d.Changes {
		if op, ok := want[c.Code]; ok && op == c.Operation && c.Severity == audit.SeverityWarning && c.Allowed {
			if c.OldLine == 0 || c.NewLine == 0 {
				t.Errorf("%s: lines old %d new %d, want both", c.Code, c.OldLine, c.NewLine)
			}
			delete(want, c.Code)
		}
	}
	if len(want) > 0 {
		t.Errorf("changes %+v lack allowed warnings %v", d.Changes, want)
	}
	for _, c := range d.Changes {
		if c.Code == audit.CodeModuleDigestChanged || c.Code == audit.CodeDigestChangedSameVersion {
			t.Errorf("same module, yet %s", c.Code)
		}
	}
	// The new manifest was audited against the real module.
	var newCodes []audit.Code
	for _, f := range d.Findings {
		newCodes = append(newCodes, f.Code)
		if f.File != newPath {
			t.Errorf("finding %s about %s, want the new manifest", f.Code, f.File)
		}
	}
	if !slices.Contains(newCodes, audit.CodeExternalNoApprovalAutoRecovery) || slices.Contains(newCodes, audit.CodeModuleNotChecked) {
		t.Errorf("new manifest's findings %v: want it audited against its module", newCodes)
	}
	// Column widths follow the temporary directory's name: compare the
	// table with its padding collapsed.
	golden(t, "audit/diff", []byte(regexp.MustCompile(` {2,}`).ReplaceAllString(e.normalise(out), "  ")))
	golden(t, "audit/diff_json", []byte(e.normalise(jout)))

	if code, _, _ := e.run(t, "--strict", "--diff", oldPath, newPath, "--allow", accepted); code != cli.ExitFindings {
		t.Errorf("--strict: exit %d, want %d (the new manifest has warnings)", code, cli.ExitFindings)
	}
	// No change at all passes.
	if code, out, _ := e.run(t, "--diff", oldPath, oldPath); code != cli.ExitOK || !strings.Contains(out, "no changes") {
		t.Errorf("identical: exit %d\n%s", code, out)
	}
	page := filepath.Join(e.tmp, "diff.html")
	if code, _, _ := e.run(t, "--html", page, "--diff", oldPath, newPath, "--allow", accepted); code != cli.ExitOK {
		t.Errorf("--html: exit %d", code)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "recovery-loosened") {
		t.Errorf("diff page: %v\n%.200s", err, b)
	}
}

// TestAuditDiffBrokenNew: a new manifest that does not parse, or whose
// module cannot honour its policy, is a finding with its location and
// exit code 3 — never an operational error or an "internal" problem.
func TestAuditDiffBrokenNew(t *testing.T) {
	e := newAuditEnv(t)
	oldPath := "../../manifests/payments.toml"
	b, err := os.ReadFile(oldPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.tmp, "new")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	syntax := writeFile(t, dir, "payments.toml", strings.Replace(string(b), `name = "payments"`, `name = "payments`, 1))
	code, out, errOut := e.run(t, "--json", "--diff", oldPath, syntax)
	if code != cli.ExitFindings || errOut != "" {
		t.Fatalf("exit %d, want %d; stderr %q", code, cli.ExitFindings, errOut)
	}
	if strings.Contains(out, `"internal"`) {
		t.Errorf("reported as an internal problem:\n%s", out)
	}
	var d audit.DiffReport
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("not a diff report: %v\n%s", err, out)
	}
	if len(d.Findings) != 1 || d.Findings[0].Code != audit.CodeManifestInvalid || d.Findings[0].File != syntax ||
		d.Findings[0].Line == 0 || d.Findings[0].Column == 0 {
		t.Errorf("findings %+v, want one manifest-invalid with line and column", d.Findings)
	}

	// A policy the module cannot honour: email's send declared
	// idempotent-retry is fine (it exports execute_with_key), but
	// release_message declared reconcile is not (no reconcile export).
	eb, err := os.ReadFile("../../manifests/email.toml")
	if err != nil {
		t.Fatal(err)
	}
	dishonest := strings.Replace(string(eb), "recovery = \"manual\"\nrequires_approval = true\napproval_ttl = \"1h\"\nmax_attempts = 1",
		"recovery = \"reconcile\"\nrequires_approval = true\napproval_ttl = \"1h\"\nmax_attempts = 1", 1)
	if dishonest == string(eb) {
		t.Fatal("manifests/email.toml changed: update the test")
	}
	newPath := writeFile(t, dir, "email.toml", dishonest)
	code, out, _ = e.run(t, "--diff", "../../manifests/email.toml", newPath, "--allow", "recovery-loosened")
	if code != cli.ExitFindings || !strings.Contains(out, "export-missing") {
		t.Errorf("exit %d, want %d with export-missing:\n%s", code, cli.ExitFindings, out)
	}
}

// TestAuditErrors: command-line mistakes exit 2 and do nothing — a path
// that does not exist among them: it is not a finding about a manifest.
func TestAuditErrors(t *testing.T) {
	e := auditEnv{modules: t.TempDir(), data: t.TempDir()}
	tests := []struct {
		name string
		args []string
		exit int
		want string
	}{
		{"nothing to audit", nil, cli.ExitUsage, "at least one manifest"},
		{"diff one manifest", []string{"--diff", "a.toml"}, cli.ExitUsage, "exactly two"},
		{"diff three manifests", []string{"--diff", "a.toml", "--diff", "b.toml", "c.toml"}, cli.ExitUsage, "exactly two"},
		{"diff missing manifest", []string{"--diff", "../../manifests/payments.toml", "nope.toml"}, cli.ExitUsage, "nope.toml: no such file or directory"},
		{"missing directory", []string{"nosuchdir/"}, cli.ExitUsage, "nosuchdir/: no such file or directory"},
		{"missing manifest among others", []string{"testdata/manifests/noop.toml", "nope.toml"}, cli.ExitUsage, "nope.toml: no such file or directory"},
		{"allow without diff", []string{"--allow", "host-added", "x.toml"}, cli.ExitUsage, "--diff only"},
		{"allow an unknown code", []string{"--diff", "a.toml", "b.toml", "--allow", "loopback-host"}, cli.ExitUsage, "not a change code"},
		{"sign without a reviewer", []string{"--sign", "x.toml"}, cli.ExitUsage, "--by NAME"},
		{"waive without a reason", []string{"--waive", "loopback-host", "--by", "rita", "x.toml"}, cli.ExitUsage, "--reason"},
		{"waive two manifests", []string{"--waive", "loopback-host", "--by", "rita", "--reason", "r", "a.toml", "b.toml"}, cli.ExitUsage, "one manifest"},
		{"by without sign or waive", []string{"--by", "rita", "x.toml"}, cli.ExitUsage, "--sign or --waive"},
		{"sign a diff", []string{"--sign", "--by", "rita", "--diff", "a.toml", "b.toml"}, cli.ExitUsage, "does not sign"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := e.run(t, tt.args...)
			if code != tt.exit || out != "" || !strings.Contains(errOut, tt.want) {
				t.Fatalf("exit %d (want %d), stdout %q, stderr %q (want %q)", code, tt.exit, out, errOut, tt.want)
			}
		})
	}
}
