package audit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/manifests"
)

// copyCase copies testdata/<name>'s manifest (without review files) into a
// temporary directory and returns the manifest's path there.
func copyCase(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name, "payments.toml"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "payments.toml")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path
}

var reviewNow = time.Date(2025, 6, 2, 9, 30, 0, 0, time.UTC)

// TestWaiveAcceptsOneVersion: a waiver accepts the finding for the manifest
// version it was given for; the audit then passes with --strict and shows
// the finding as waived. Once the manifest changes the waiver no longer
// applies and the finding fails the audit again.
func TestWaiveAcceptsOneVersion(t *testing.T) {
	path := copyCase(t, "loopback-host")
	facts := fakeFacts(t, filepath.Join("testdata", "loopback-host"))
	r := AuditPaths([]string{path}, Options{Facts: facts})
	require.True(t, r.Failed(true))

	wf, err := ReadWaivers(WaiversPath(path))
	require.NoError(t, err, "no file: no waivers")
	wf, err = Waive(wf, r, "payments", CodeLoopbackHost, "", "rita", "the Stripe emulator runs next to the host", reviewNow)
	require.NoError(t, err)
	require.NoError(t, WriteWaivers(WaiversPath(path), wf))
	require.Equal(t, strings.TrimSuffix(path, ".toml")+".waivers.json", WaiversPath(path))

	r = AuditPaths([]string{path}, Options{Facts: facts})
	require.False(t, r.Failed(true), "waived")
	require.Equal(t, []Code{CodeLoopbackHost}, codes(r.Findings))
	require.NotNil(t, r.Findings[0].Waived)
	require.Equal(t, "rita", r.Findings[0].Waived.Reviewer)
	require.Equal(t, Summary{Waived: 1}, r.Summary())

	// Another version of the manifest: the waiver is stale.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "max_attempts = 3", "max_attempts = 4", 1)), 0o644))
	r = AuditPaths([]string{path}, Options{Facts: facts})
	require.True(t, r.Failed(true))
	require.Equal(t, []Code{CodeLoopbackHost, CodeWaiverStale}, codes(r.Findings))
	require.Nil(t, r.Findings[0].Waived)
}

func TestWaiveRefuses(t *testing.T) {
	dir := filepath.Join("testdata", "digest-mismatch")
	r := AuditPaths([]string{dir}, Options{Facts: fakeFacts(t, dir)})
	for _, tc := range []struct {
		name                       string
		code                       Code
		op, reviewer, reason, want string
	}{
		{"an error", CodeDigestMismatch, "", "rita", "trust me", "errors cannot be waived"},
		{"a finding not raised", CodeLoopbackHost, "", "rita", "why not", "raises no loopback-host"},
		{"another operation", CodeDigestMismatch, "get_payment", "rita", "why not", "raises no digest-mismatch for payments/get_payment"},
		{"no reviewer", CodeDigestMismatch, "", " ", "x", "reviewer and a reason"},
		{"no reason", CodeDigestMismatch, "", "rita", "", "reviewer and a reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Waive(WaiverFile{}, r, "payments", tc.code, tc.op, tc.reviewer, tc.reason, reviewNow)
			require.ErrorIs(t, err, ErrCannotWaive)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestWaiveNamesTheOperation: waiving an operation's finding without the
// operation says which operation to name.
func TestWaiveNamesTheOperation(t *testing.T) {
	r := auditCase(t, "unbounded-amount")
	_, err := Waive(WaiverFile{}, r, "payments", CodeUnboundedAmount, "", "rita", "bounded by the provider", reviewNow)
	require.ErrorIs(t, err, ErrCannotWaive)
	require.ErrorContains(t, err, "only for operation create_payment (waive unbounded-amount:create_payment)")
	wf, err := Waive(WaiverFile{}, r, "payments", CodeUnboundedAmount, "create_payment", "rita", "bounded by the provider", reviewNow)
	require.NoError(t, err)
	require.Len(t, wf.Waivers, 1)
}

// TestSignoff: a reviewer signs a connector that passes; the host's check
// accepts it as it is and names what changed afterwards (the manifest, a
// policy, the module, an operation added or removed).
func TestSignoff(t *testing.T) {
	path := copyCase(t, "clean")
	facts := fakeFacts(t, filepath.Join("testdata", "clean"))
	r := AuditPaths([]string{path}, Options{Facts: facts})
	s, err := Sign(r, "payments", "rita", reviewNow)
	require.NoError(t, err)
	require.Equal(t, "payments.toml", s.Manifest)
	require.Equal(t, r.Connectors[0].ManifestSHA256, s.ManifestSHA256)
	require.Equal(t, strings.Repeat("1", 64), s.ModuleSHA256)
	require.Len(t, s.PolicyVersions, 2)

	m, err := manifests.Load(path)
	require.NoError(t, err)
	var se *SignoffError
	err = CheckSignoff(m, s.ModuleSHA256)
	require.ErrorIs(t, err, ErrNotSigned)
	require.ErrorAs(t, err, &se)
	require.Contains(t, err.Error(), "connhost audit --sign")

	require.NoError(t, WriteSignoff(SignoffPath(path), s))
	require.NoError(t, CheckSignoff(m, s.ModuleSHA256))
	r = AuditPaths([]string{path}, Options{Facts: facts})
	require.Equal(t, SignoffStatus{Status: SignoffSigned, File: SignoffPath(path), Reviewer: "rita", SignedAt: "2025-06-02T09:30:00Z"}, r.Connectors[0].Signoff)

	// Another module.
	err = CheckSignoff(m, strings.Repeat("2", 64))
	require.ErrorIs(t, err, ErrSignoffChanged)
	require.ErrorContains(t, err, "module payments.wasm: sha256 111111111111… signed, now 222222222222…")

	// A loosened policy and a new operation.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "max_attempts = 3", "max_attempts = 5", 1) +
		"\n[[operation]]\nname = \"void_payment\"\ndescription = \"Void a PaymentIntent that was not captured.\"\neffect = \"external\"\nrecovery = \"manual\"\nrequires_approval = true\n" +
		"input_schema = '{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"string\"}}, \"additionalProperties\": false}'\n"
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	m, err = manifests.Load(path)
	require.NoError(t, err)
	err = CheckSignoff(m, s.ModuleSHA256)
	require.ErrorAs(t, err, &se)
	require.Len(t, se.Changes, 3)
	require.Contains(t, se.Changes[0], "manifest payments.toml: sha256")
	require.Contains(t, se.Changes[1], "operation create_payment: policy version")
	require.Equal(t, "operation void_payment was added", se.Changes[2])
	r = AuditPaths([]string{path}, Options{Facts: facts})
	require.Equal(t, SignoffChanged, r.Connectors[0].Signoff.Status)
	require.Equal(t, se.Changes, r.Connectors[0].Signoff.Changes)
}

func TestSignRefuses(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"loopback-host", "neither fixed nor waived: warning loopback-host"},
		{"digest-mismatch", "error digest-mismatch"},
		{"module-not-checked", "must be found and match its pin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := auditCase(t, tc.name)
			_, err := Sign(r, "payments", "rita", reviewNow)
			require.ErrorIs(t, err, ErrCannotSign)
			require.ErrorContains(t, err, tc.want)
		})
	}
	// A waived warning does not stand in the way, and the sign-off keeps
	// the waiver it accepted.
	s, err := Sign(auditCase(t, "waived"), "payments", "sam", reviewNow)
	require.NoError(t, err)
	require.Len(t, s.Waivers, 1)
	require.Equal(t, CodeLoopbackHost, s.Waivers[0].Code)
	_, err = Sign(auditCase(t, "clean"), "payments", "", reviewNow)
	require.ErrorIs(t, err, ErrCannotSign)
	_, err = Sign(auditCase(t, "clean"), "email", "rita", reviewNow)
	require.ErrorIs(t, err, ErrCannotSign)
	// An invalid waiver file stands in the way too: it is the connector's.
	_, err = Sign(auditCase(t, "waiver-invalid"), "payments", "rita", reviewNow)
	require.ErrorIs(t, err, ErrCannotSign)
	require.ErrorContains(t, err, "error waiver-invalid")
}

func TestReviewFilesDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{`{"connector": "payments", "waivers": [], "extra": 1}`, `{"waivers": {}}`, `{} {}`, `[`} {
		p := filepath.Join(dir, "w.json")
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		_, err := ReadWaivers(p)
		require.ErrorIs(t, err, ErrReviewFile, text)
		_, err = ReadSignoff(p)
		require.ErrorIs(t, err, ErrReviewFile, text)
	}
	_, err := ReadSignoff(filepath.Join(dir, "none.json"))
	require.True(t, errors.Is(err, ErrNotSigned) && errors.Is(err, os.ErrNotExist))
}

// FuzzReviewFiles: a waiver or sign-off file of any content never panics
// the audit; it is applied, or reported as a finding.
func FuzzReviewFiles(f *testing.F) {
	for _, p := range []string{"testdata/waived/payments.waivers.json", "testdata/waiver-invalid/payments.waivers.json", "testdata/signed/payments.signoff.json"} {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add([]byte(`{"waivers": [{"code": "loopback-host", "at": "x"}]}`))
	manifest, err := os.ReadFile("testdata/loopback-host/payments.toml")
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "payments.toml")
		require.NoError(t, os.WriteFile(path, manifest, 0o644))
		require.NoError(t, os.WriteFile(WaiversPath(path), data, 0o644))
		require.NoError(t, os.WriteFile(SignoffPath(path), data, 0o644))
		r := AuditPaths([]string{path}, Options{})
		for _, f := range r.Findings {
			if f.Waived != nil && f.Severity == SeverityError {
				t.Fatalf("an error was waived: %+v", f)
			}
		}
	})
}
