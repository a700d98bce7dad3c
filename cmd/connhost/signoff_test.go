package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/audit"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/manifests"
)

// TestAuditWaiveSignServe walks a reviewer's steps on the shipped email
// connector: the audit fails with --strict on its loopback origin; the
// reviewer waives that finding and signs; serve with require_signoff
// (a real process) starts only while manifest and module are what was
// signed, and names what changed when they are not.
func TestAuditWaiveSignServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs serve")
	}
	e := newAuditEnv(t)
	reviewClock = func() time.Time { return time.Date(2025, 6, 3, 8, 0, 0, 0, time.UTC) }
	t.Cleanup(func() { reviewClock = time.Now })
	mans := filepath.Join(e.tmp, "manifests")
	if err := os.MkdirAll(mans, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../manifests/email.toml")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(auditModule(t, "email.wasm"))
	digest := hex.EncodeToString(sum[:])
	pinned, err := manifests.SetSHA256(src, digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest := writeFile(t, mans, "email.toml", string(pinned))
	cfg := writeFile(t, e.tmp, "connhost.toml", "[server]\nrequire_signoff = true\n")
	bin := buildConnhost(t, e.tmp)
	global := []string{"--data", e.data, "--manifests", mans, "--modules", e.modules, "--config", cfg}
	// serve is a connhost serve process expected to refuse to start; one
	// that starts instead is killed at the bound and fails the test.
	serve := func() (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), processBound)
		defer cancel()
		res, err := proc.Run(ctx, proc.Cmd{Path: bin, Args: append([]string{"serve", "--listen", "127.0.0.1:0"}, global...), Env: cliEnv(), DieWithParent: true})
		if err != nil {
			t.Fatalf("serve did not refuse to start: %v\n%s", err, res.Stderr)
		}
		return res.Code, string(res.Stderr)
	}

	if code, _, _ := e.run(t, "--strict", manifest); code != cli.ExitFindings {
		t.Fatalf("--strict before the waiver: exit %d", code)
	}
	// Signing refuses while a warning stands, and writes nothing.
	code, _, errOut := e.run(t, "--sign", "--by", "rita", manifest)
	if code != cli.ExitFindings || !strings.Contains(errOut, "nothing signed") {
		t.Fatalf("sign with a warning: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(audit.SignoffPath(manifest)); !os.IsNotExist(err) {
		t.Fatalf("a sign-off was written: %v", err)
	}
	// Not signed: serve refuses.
	code, errOut = serve()
	if code != cli.ExitFailure || !strings.Contains(errOut, "connector email is not signed off") {
		t.Fatalf("serve unsigned: exit %d, stderr %q", code, errOut)
	}

	// An error cannot be waived; a warning can.
	if code, _, errOut := e.run(t, "--waive", "digest-mismatch", "--by", "rita", "--reason", "r", manifest); code != cli.ExitUsage ||
		!strings.Contains(errOut, "raises no digest-mismatch") {
		t.Errorf("waive a finding not raised: exit %d %q", code, errOut)
	}
	code, out, errOut := e.run(t, "--json", "--waive", "loopback-host", "--by", "rita", "--reason", "Mailpit runs next to the host", manifest)
	if code != cli.ExitOK || !strings.Contains(errOut, "waived loopback-host for email") {
		t.Fatalf("waive: exit %d, stderr %q\n%s", code, errOut, out)
	}
	r := decodeAudit(t, out)
	if r.Summary.Warnings != 0 || r.Summary.Waived != 1 {
		t.Errorf("after the waiver: %+v", r.Summary)
	}
	if code, _, _ := e.run(t, "--strict", manifest); code != cli.ExitOK {
		t.Errorf("--strict after the waiver: exit %d", code)
	}
	code, _, errOut = e.run(t, "--sign", "--by", "rita", manifest)
	if code != cli.ExitOK || !strings.Contains(errOut, "signed email 1.0.0 by rita") {
		t.Fatalf("sign: exit %d, stderr %q", code, errOut)
	}
	var s audit.Signoff
	b, err := os.ReadFile(audit.SignoffPath(manifest))
	if err != nil || json.Unmarshal(b, &s) != nil {
		t.Fatalf("sign-off file: %v\n%s", err, b)
	}
	if s.Reviewer != "rita" || s.ModuleSHA256 != digest || len(s.PolicyVersions) != 4 || len(s.Waivers) != 1 ||
		s.SignedAt != reviewClock() {
		t.Errorf("sign-off %+v", s)
	}
	// The HTML report shows the sign-off.
	page := filepath.Join(e.tmp, "report.html")
	if code, _, _ := e.run(t, "--html", page, manifest); code != cli.ExitOK {
		t.Fatalf("--html: exit %d", code)
	}
	if html, _ := os.ReadFile(page); !strings.Contains(string(html), `class="signoff signoff-signed">signed by rita at 2025-06-03T08:00:00Z`) {
		t.Errorf("the page does not show the sign-off:\n%s", html)
	}

	// Signed as it is: serve starts.
	srv := startServer(t, bin, cliEnv(), "serving the HTTP API", append([]string{"serve", "--listen", "127.0.0.1:0"}, global...)...)
	srv.stop(t)

	// A loosened policy: refused, naming the operation and the manifest.
	changed := strings.Replace(string(pinned), "max_attempts = 1", "max_attempts = 2", 1)
	writeFile(t, mans, "email.toml", changed)
	code, errOut = serve()
	if code != cli.ExitFailure || !strings.Contains(errOut, "connector email changed since its sign-off") ||
		!strings.Contains(errOut, "operation release_message: policy version") || !strings.Contains(errOut, "manifest email.toml: sha256") {
		t.Fatalf("serve after a change: exit %d, stderr %q", code, errOut)
	}
	// Another module under the same manifest: refused, naming the module.
	writeFile(t, mans, "email.toml", string(pinned))
	other := auditModule(t, "noreconcile.wasm")
	if err := os.WriteFile(filepath.Join(e.modules, "email.wasm"), other, 0o644); err != nil {
		t.Fatal(err)
	}
	code, errOut = serve()
	if code != cli.ExitFailure || !strings.Contains(errOut, "module email.wasm: sha256") || strings.Contains(errOut, "manifest email.toml") {
		t.Fatalf("serve with another module: exit %d, stderr %q", code, errOut)
	}
	// The signed module back: it starts again.
	if err := os.WriteFile(filepath.Join(e.modules, "email.wasm"), auditModule(t, "email.wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, bin, cliEnv(), "serving the HTTP API", append([]string{"serve", "--listen", "127.0.0.1:0"}, global...)...)
	srv.stop(t)
}

// auditModule returns the bytes of a module of auditModules.
func auditModule(t *testing.T, name string) []byte {
	t.Helper()
	b, ok := auditModuleBytes(t)[name]
	if !ok {
		t.Fatalf("no module %s", name)
	}
	return b
}
