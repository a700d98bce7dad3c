package audit

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

var update = flag.Bool("update", false, "rewrite testdata/**/*.golden")

// auditCases maps each directory under testdata/ to exactly the finding
// codes its manifests must produce (in report order). Each directory holds
// deliberately flawed manifests and, optionally, facts.json: the module
// facts to report instead of those of a truthful module (see fakeFacts).
var auditCases = map[string][]Code{
	"clean":                              nil,
	"manifest-invalid":                   {CodeManifestInvalid},
	"duplicate-connector":                {CodeDuplicateConnector},
	"module-missing":                     {CodeModuleMissing},
	"module-invalid":                     {CodeModuleInvalid},
	"digest-unpinned":                    {CodeDigestUnpinned},
	"digest-mismatch":                    {CodeDigestMismatch},
	"abi-mismatch":                       {CodeABIMismatch},
	"export-missing":                     {CodeExportMissing, CodeExportMissing, CodeExportMissing},
	"read-exports-recovery":              {CodeReadExportsRecovery},
	"metadata-host":                      {CodeMetadataHost, CodeIdempotencyUnknownProvider},
	"secret-in-manifest":                 {CodeSecretInManifest, CodeSecretInManifest},
	"waiver-invalid":                     {CodeWaiverInvalid, CodeWaiverInvalid},
	"signoff-invalid":                    {CodeSignoffInvalid},
	"undeclared-operation":               {CodeUndeclaredOperation},
	"external-no-approval-auto-recovery": {CodeExternalNoApprovalAutoRecovery},
	"manual-without-approval":            {CodeManualWithoutApproval},
	"read-sounds-external":               {CodeReadSoundsExternal, CodeReadSoundsExternal},
	"plain-http-host":                    {CodePlainHTTPHost},
	"loopback-host":                      {CodeLoopbackHost},
	"internal-host":                      {CodeInternalHost, CodeInternalHost, CodeIdempotencyUnknownProvider},
	"idempotency-unknown-provider":       {CodeIdempotencyUnknownProvider},
	"provider-key-unproven":              {CodeProviderKeyUnproven},
	"provider-key-proven":                nil,
	"missing-description":                {CodeMissingDescription},
	"permissive-schema":                  {CodePermissiveSchema, CodePermissiveSchema},
	"permissive-schema-nested":           {CodePermissiveSchema, CodePermissiveSchema},
	"unbounded-amount":                   {CodeUnboundedAmount, CodeUnboundedAmount},
	"unbounded-string":                   {CodeUnboundedString, CodeUnboundedString, CodeManualWithoutApproval, CodeUnboundedString},
	"approval-ttl-long":                  {CodeApprovalTTLLong},
	"secret-like-token":                  {CodeSecretLikeToken},
	"high-attempts":                      {CodeHighAttempts},
	"http-empty":                         {CodeHTTPEmpty},
	"approval-ttl-ignored":               {CodeApprovalTTLIgnored},
	"module-not-checked":                 {CodeModuleNotChecked},
	"waived":                             {CodeLoopbackHost},
	"waiver-stale":                       {CodeLoopbackHost, CodeWaiverStale},
	"waiver-unused":                      {CodeWaiverUnused},
	"signed":                             nil,
	"signoff-stale":                      {CodeSignoffStale},
}

// fakeFacts builds the FactsFunc of a test case. By default every module
// is truthful: found, digest equal to the pin, ABI 1, and a description
// implementing exactly the declared operations with the exports their
// policies need. facts.json, when present, overrides fields of those
// defaults ("null" means no facts at all: a nil FactsFunc).
func fakeFacts(t *testing.T, dir string) FactsFunc {
	t.Helper()
	override, err := os.ReadFile(filepath.Join(dir, "facts.json"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(override)) == "null" {
		return nil
	}
	return func(m *manifests.Manifest) ModuleFacts {
		f := ModuleFacts{
			Found:        true,
			Path:         filepath.Join("modules", m.Connector.Module),
			ActualSHA256: m.Connector.SHA256,
			ABI:          abi.Version,
			Description:  truthfulDescription(m),
		}
		if f.ActualSHA256 == "" {
			f.ActualSHA256 = strings.Repeat("9", 64)
		}
		if len(override) > 0 {
			if err := json.Unmarshal(override, &f); err != nil {
				t.Fatalf("%s/facts.json: %v", dir, err)
			}
		}
		return f
	}
}

func truthfulDescription(m *manifests.Manifest) *abi.Description {
	d := &abi.Description{ABI: abi.Version}
	for _, op := range m.Operations {
		d.Operations = append(d.Operations, abi.OperationInfo{
			Name:           op.Name,
			Execute:        true,
			ExecuteWithKey: op.Recovery == manifests.PolicyIdempotentRetry || op.Recovery == manifests.PolicyReconcile,
			Reconcile:      op.Recovery == manifests.PolicyReconcile,
		})
	}
	return d
}

func auditCase(t *testing.T, name string) Report {
	t.Helper()
	dir := filepath.Join("testdata", name)
	return AuditPaths([]string{dir}, Options{Facts: fakeFacts(t, dir)})
}

func codes(fs []Finding) []Code {
	var out []Code
	for _, f := range fs {
		out = append(out, f.Code)
	}
	return out
}

// TestAuditFindings proves that each flawed manifest produces exactly its
// finding, and compares the text and JSON renderings with golden files.
func TestAuditFindings(t *testing.T) {
	for name, want := range auditCases {
		t.Run(name, func(t *testing.T) {
			r := auditCase(t, name)
			require.Equal(t, want, codes(r.Findings))
			for _, f := range r.Findings {
				require.Equal(t, codeSeverity(f.Code), f.Severity, f.Code)
				require.True(t, f.Message != "", f.Code)
			}
			var txt, js bytes.Buffer
			require.NoError(t, WriteText(&txt, r))
			require.NoError(t, WriteJSON(&js, r))
			golden(t, filepath.Join("testdata", name, "audit.txt.golden"), txt.Bytes())
			golden(t, filepath.Join("testdata", name, "audit.json.golden"), js.Bytes())
		})
	}
}

// TestEveryFindingCodeHasACase: the table in the package documentation,
// FindingCodes and the test cases stay in step.
func TestEveryFindingCodeHasACase(t *testing.T) {
	covered := map[Code]bool{}
	for _, cs := range auditCases {
		for _, c := range cs {
			covered[c] = true
		}
	}
	for _, fc := range FindingCodes {
		require.True(t, covered[fc.Code], "no test case for "+string(fc.Code))
		require.True(t, fc.Severity != "", fc.Code)
	}
	require.Equal(t, len(FindingCodes), len(covered))
	dirs, err := os.ReadDir("testdata")
	require.NoError(t, err)
	for _, d := range dirs {
		if _, ok := auditCases[d.Name()]; d.IsDir() && d.Name() != "diff" && !ok {
			t.Errorf("testdata/%s has no entry in auditCases", d.Name())
		}
	}
	doc, err := os.ReadFile("audit.go")
	require.NoError(t, err)
	for _, fc := range FindingCodes {
		require.Contains(t, string(doc), "//\t"+string(fc.Code)+" ", "code missing from the package documentation table")
	}
}

func codeSeverity(c Code) Severity {
	if s := severityOf(c); s != "" {
		return s
	}
	for _, cc := range ChangeCodes {
		if cc.Code == c {
			return cc.Severity
		}
	}
	return ""
}

func TestManifestInvalidHasFileAndLine(t *testing.T) {
	r := auditCase(t, "manifest-invalid")
	f := r.Findings[0]
	require.Equal(t, filepath.Join("testdata", "manifest-invalid", "payments.toml"), f.File)
	require.Equal(t, 10, f.Line)
	require.Contains(t, f.Message, "wildcards are not allowed")
	require.Equal(t, 0, f.Column, "a rule has a line, no column")
	require.Empty(t, r.Connectors)
}

func TestAuditPathsUnreadable(t *testing.T) {
	r := AuditPaths([]string{"testdata/does-not-exist.toml"}, Options{})
	require.Equal(t, []Code{CodeManifestInvalid}, codes(r.Findings))
	require.True(t, r.Failed(false))

	r = AuditPaths([]string{t.TempDir()}, Options{})
	require.Equal(t, []Code{CodeManifestInvalid}, codes(r.Findings))
	require.Contains(t, r.Findings[0].Message, "no *.toml manifest")
}

func TestReportFailed(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		strict, lax, strict2 bool
	}{
		{name: "clean"},
		{name: "loopback-host", strict: true},                    // warning
		{name: "waived", strict: false},                          // a waived warning
		{name: "plain-http-host", strict: true},                  // warning
		{name: "digest-mismatch", strict: true, lax: true},       // error
		{name: "module-not-checked"},                             // info only
		{name: "permissive-schema", strict: true, strict2: true}, // two warnings
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := auditCase(t, tc.name)
			require.Equal(t, tc.lax, r.Failed(false))
			require.Equal(t, tc.strict, r.Failed(true))
			require.Equal(t, len(r.Errors())+len(r.Warnings())+len(r.Infos())+r.Waived(), len(r.Findings))
		})
	}
}

// TestReportShowsWhatModuleExports checks the per-operation facts the
// reviewer reads.
func TestReportShowsWhatModuleExports(t *testing.T) {
	r := auditCase(t, "export-missing")
	require.Len(t, r.Connectors, 1)
	c := r.Connectors[0]
	require.Equal(t, DigestMatch, c.Module.DigestStatus)
	byName := map[string]OperationReport{}
	for _, op := range c.Operations {
		byName[op.Name] = op
	}
	require.Equal(t, "execute", byName["create_payment"].Exports.String())
	require.Equal(t, "execute, execute_with_key", byName["refund"].Exports.String())
	require.Equal(t, "absent", byName["void"].Exports.String())
	require.Equal(t, "idempotent-retry", byName["create_payment"].Recovery)
	require.Equal(t, "1h", byName["create_payment"].ApprovalTTL)
	require.Len(t, byName["create_payment"].PolicyVersion, 16)

	nc := auditCase(t, "module-not-checked").Connectors[0]
	require.False(t, nc.Module.Checked)
	require.Nil(t, nc.Operations[0].Exports)
}

// diffCases maps testdata/diff/<case> (old.toml -> new.toml; "-reversed"
// swaps them) to exactly the change codes expected, in report order.
var diffCases = map[string][]Code{
	"none": nil,
	"risk": {
		CodeDigestChangedSameVersion, CodeHostAdded,
		CodeApprovalRemoved, CodeAttemptsRaised, CodeRecoveryLoosened,
		CodeSchemaLoosened,
		CodeOperationRemoved,
		CodeConfigAdded, CodeConfigRemoved, CodeLimitLowered, CodeLimitRaised,
		CodeOperationAdded,
		CodeDescriptionChanged, CodePolicyVersionChanged,
	},
	"risk-reversed": {
		CodeDigestChangedSameVersion,
		CodeOperationRemoved,
		CodeConfigAdded, CodeConfigRemoved, CodeHostRemoved, CodeLimitLowered, CodeLimitRaised,
		CodeApprovalAdded, CodeAttemptsLowered, CodeDescriptionChanged, CodePolicyVersionChanged, CodeRecoveryTightened,
		CodeSchemaChanged,
		CodeOperationAdded,
	},
	"effect-reversed": {
		CodeApprovalTTLRaised, CodeAttemptsRaised, CodeEffectDowngraded, CodeRecoveryLoosened,
		CodeLimitRaised, CodeModuleDigestChanged, CodeModuleFileChanged, CodeDurabilitySync, CodePolicyVersionChanged, CodeSchemaChanged,
	},
	"duplicates":          {CodeDuplicateGuardLoosened, CodeDuplicateGuardLoosened, CodeDuplicateGuardLoosened, CodeDuplicateGuardLoosened},
	"duplicates-reversed": {CodeDuplicateGuardTightened, CodeDuplicateGuardTightened, CodeDuplicateGuardTightened, CodeDuplicateGuardTightened},
	"effect": {
		CodeDurabilityLazy,
		CodeLimitLowered, CodeModuleDigestChanged, CodeModuleFileChanged,
		CodeApprovalTTLLowered, CodeAttemptsLowered, CodeEffectChanged, CodePolicyVersionChanged, CodeRecoveryTightened, CodeSchemaChanged,
	},
}

func diffCase(t *testing.T, name string) DiffReport {
	t.Helper()
	dir, oldF, newF := name, "old.toml", "new.toml"
	if name == "none" {
		dir, newF = "risk", "old.toml"
	}
	if d, ok := strings.CutSuffix(name, "-reversed"); ok {
		dir, oldF, newF = d, newF, oldF
	}
	old, err := manifests.Load(filepath.Join("testdata", "diff", dir, oldF))
	require.NoError(t, err)
	nw, err := manifests.Load(filepath.Join("testdata", "diff", dir, newF))
	require.NoError(t, err)
	return Diff(old, nw, ModuleFacts{}, ModuleFacts{})
}

func TestDiff(t *testing.T) {
	for name, want := range diffCases {
		t.Run(name, func(t *testing.T) {
			d := diffCase(t, name)
			var got []Code
			for _, c := range d.Changes {
				got = append(got, c.Code)
				require.Equal(t, codeSeverity(c.Code), c.Severity, c.Code)
			}
			require.Equal(t, want, got)
			var txt, js bytes.Buffer
			require.NoError(t, WriteDiffText(&txt, d))
			require.NoError(t, WriteDiffJSON(&js, d))
			golden(t, filepath.Join("testdata", "diff", name+".txt.golden"), txt.Bytes())
			golden(t, filepath.Join("testdata", "diff", name+".json.golden"), js.Bytes())
		})
	}
}

func TestDiffRecoveryRiskOrder(t *testing.T) {
	order := []manifests.Policy{manifests.PolicyManual, manifests.PolicyReconcile, manifests.PolicyIdempotentRetry, ""}
	for i := 1; i < len(order); i++ {
		require.True(t, recoveryRisk(order[i-1]) < recoveryRisk(order[i]), order[i])
	}
	d := diffCase(t, "risk")
	i := slices.IndexFunc(d.Changes, func(c Change) bool { return c.Code == CodeRecoveryLoosened })
	require.True(t, i >= 0)
	require.Equal(t, Change{
		Severity: SeverityWarning, Code: CodeRecoveryLoosened, Operation: "create_payment", Field: "recovery",
		Old: "reconcile", New: "idempotent-retry", OldLine: 21, NewLine: 21,
		Message: "risk increase: after a crash the host now acts on its own with idempotent-retry instead of reconcile",
	}, d.Changes[i])
	require.True(t, d.Failed(false), "a risk increase fails the diff by default")
}

func TestDiffDigestFromFacts(t *testing.T) {
	m, err := manifests.Load("testdata/diff/effect/old.toml")
	require.NoError(t, err)
	m2 := *m
	m2.Connector.SHA256 = ""
	d := Diff(&m2, &m2, ModuleFacts{ActualSHA256: strings.Repeat("a", 64)}, ModuleFacts{ActualSHA256: strings.Repeat("b", 64)})
	require.Len(t, d.Changes, 1)
	require.Equal(t, CodeDigestChangedSameVersion, d.Changes[0].Code)
}

func TestChangeCodesDocumented(t *testing.T) {
	doc, err := os.ReadFile("diff.go")
	require.NoError(t, err)
	for _, cc := range ChangeCodes {
		require.Contains(t, string(doc), string(cc.Code), "change code missing from the Diff documentation")
	}
}

// golden compares got with the file, or rewrites the file with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/audit/ -update")
	if !bytes.Equal(want, got) {
		t.Fatalf("%s differs (run with -update and review the diff)\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
