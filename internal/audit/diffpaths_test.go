package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

// TestDiffPathsFailsOnRiskIncreases: a risk increase fails the diff by
// default; --allow accepts named change codes, and only those.
func TestDiffPathsFailsOnRiskIncreases(t *testing.T) {
	old, nw := "testdata/diff/risk/old.toml", "testdata/diff/risk/new.toml"
	d := DiffPaths(old, nw, DiffOptions{})
	require.True(t, d.Failed(false))
	require.Equal(t, 7, d.Summary().Warnings)

	all := []Code{CodeDigestChangedSameVersion, CodeHostAdded, CodeApprovalRemoved, CodeAttemptsRaised,
		CodeRecoveryLoosened, CodeSchemaLoosened, CodeOperationRemoved}
	d = DiffPaths(old, nw, DiffOptions{Allow: all[:6]})
	require.True(t, d.Failed(false), "operation-removed is not allowed")
	require.Equal(t, Summary{Warnings: 1, Infos: 7, Waived: 6}, d.Summary())
	d = DiffPaths(old, nw, DiffOptions{Allow: all})
	require.False(t, d.Failed(false))
	for _, c := range d.Changes {
		require.Equal(t, c.Severity == SeverityWarning, c.Allowed, c.Code)
	}
	d = DiffPaths(old, old, DiffOptions{})
	require.False(t, d.Failed(false), "no change, no error finding")
	require.Empty(t, d.Changes)
}

// TestDiffPathsAuditsNew: the new manifest is audited against its module;
// a policy the module cannot honour is an error finding that fails the
// diff, even where the change itself reads as a tightening.
func TestDiffPathsAuditsNew(t *testing.T) {
	facts := func(m *manifests.Manifest) ModuleFacts {
		// A module that implements execute only: no reconcile.
		return ModuleFacts{Found: true, ActualSHA256: m.Connector.SHA256, ABI: abi.Version, Description: &abi.Description{
			ABI: abi.Version, Operations: []abi.OperationInfo{{Name: "send_email", Execute: true}}}}
	}
	d := DiffPaths("testdata/diff/effect/old.toml", "testdata/diff/effect/new.toml",
		DiffOptions{Audit: Options{Facts: facts}, Allow: []Code{CodeDurabilityLazy}})
	require.True(t, d.Failed(false))
	var got []Code
	for _, f := range d.Findings {
		got = append(got, f.Code)
	}
	require.Contains(t, got, CodeExportMissing)
	require.Equal(t, "testdata/diff/effect/new.toml", d.Findings[0].File)
	require.Equal(t, 0, d.Count(SeverityWarning), "the changes themselves are no risk increase (lazy durability allowed)")
}

// TestDiffPathsInvalidManifest: a new manifest that does not parse is a
// finding with its file, line and column, and fails the diff; it is never
// an error of the tool.
func TestDiffPathsInvalidManifest(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/diff/risk/old.toml")
	require.NoError(t, err)
	broken := filepath.Join(dir, "new.toml")
	require.NoError(t, os.WriteFile(broken, []byte(strings.Replace(string(data), `name = "payments"`, `name = "payments`, 1)), 0o644))
	d := DiffPaths("testdata/diff/risk/old.toml", broken, DiffOptions{})
	require.True(t, d.Failed(false))
	require.Len(t, d.Findings, 1)
	f := d.Findings[0]
	require.Equal(t, CodeManifestInvalid, f.Code)
	require.Equal(t, broken, f.File)
	require.Equal(t, 3, f.Line)
	require.NotZero(t, f.Column)
	require.Empty(t, d.Changes)

	d = DiffPaths("testdata/diff/risk/old.toml", filepath.Join(dir, "missing.toml"), DiffOptions{})
	require.True(t, d.Failed(false))
	require.Equal(t, CodeManifestInvalid, d.Findings[0].Code)
}
