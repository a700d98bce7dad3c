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

// TestWaiverSurvivesPin: `connhost build --pin` rewrites only the module
// pin, which is not what the reviewer reviewed, so a waiver of a finding
// about the manifest still applies to the re-pinned manifest; any other
// change makes it stale. A waiver of a finding about the module (an
// operation the module implements undeclared) is for that module alone,
// and a re-pin to another module makes it stale.
func TestWaiverSurvivesPin(t *testing.T) {
	path := copyCase(t, "loopback-host")
	facts := fakeFacts(t, filepath.Join("testdata", "loopback-host"))
	// The module also implements an operation the manifest does not
	// declare: an undeclared-operation finding to waive.
	withExtra := func(m *manifests.Manifest) ModuleFacts {
		f := facts(m)
		f.Description.Operations = append(f.Description.Operations, abi.OperationInfo{Name: "capture_payment", Execute: true})
		return f
	}
	r := AuditPaths([]string{path}, Options{Facts: withExtra})
	require.ElementsMatch(t, []Code{CodeLoopbackHost, CodeUndeclaredOperation}, codes(r.Findings))
	wf, err := Waive(WaiverFile{}, r, "payments", CodeLoopbackHost, "", "rita", "the Stripe emulator runs next to the host", reviewNow)
	require.NoError(t, err)
	wf, err = Waive(wf, r, "payments", CodeUndeclaredOperation, "", "rita", "capture is not exposed yet", reviewNow)
	require.NoError(t, err)
	require.NoError(t, WriteWaivers(WaiversPath(path), wf))
	require.NotEmpty(t, wf.Waivers[0].ReviewedSHA256)
	require.NotEqual(t, wf.Waivers[0].ManifestSHA256, wf.Waivers[0].ReviewedSHA256)

	// A rebuilt module, pinned: the manifest's digest changes, what was
	// reviewed does not.
	require.NoError(t, manifests.PinFile(path, strings.Repeat("2", 64)))
	r = AuditPaths([]string{path}, Options{Facts: withExtra})
	require.ElementsMatch(t, []Code{CodeLoopbackHost, CodeUndeclaredOperation, CodeWaiverStale}, codes(r.Findings), "%+v", r.Findings)
	require.NotNil(t, finding(r, CodeLoopbackHost).Waived, "the loopback waiver applies to the re-pinned manifest")
	require.Nil(t, finding(r, CodeUndeclaredOperation).Waived, "the undeclared-operation waiver was for the other module")
	require.Contains(t, finding(r, CodeWaiverStale).Message, "waiver of undeclared-operation by rita")

	// A change a reviewer has not seen: stale.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(data), "max_attempts = 3", "max_attempts = 4", 1)), 0o644))
	r = AuditPaths([]string{path}, Options{Facts: withExtra})
	require.Nil(t, finding(r, CodeLoopbackHost).Waived)
	require.ElementsMatch(t, []Code{CodeLoopbackHost, CodeUndeclaredOperation, CodeWaiverStale, CodeWaiverStale}, codes(r.Findings))
}

// finding returns the first finding of r with code.
func finding(r Report, code Code) Finding {
	for _, f := range r.Findings {
		if f.Code == code {
			return f
		}
	}
	return Finding{}
}
