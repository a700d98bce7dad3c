package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
)

// TestShippedManifestsPassStrictAudit runs what docs/connectors.md shows a
// reviewer, `connhost audit --strict manifests/`, on the shipped manifests
// with the modules built from plugins/ today: it passes, and the one
// warning that stands (email's loopback origin: Mailpit runs next to the
// host) is waived in manifests/email.waivers.json with its reason, not
// hidden. A changed email.toml makes that waiver stale, and this test
// fails until a reviewer waives the finding again for the new version.
func TestShippedManifestsPassStrictAudit(t *testing.T) {
	e := newAuditEnv(t)
	code, out, errOut := e.run(t, "--strict", "--json", "../../manifests/")
	r := decodeAudit(t, out)
	if code != cli.ExitOK || r.Summary.Errors != 0 || r.Summary.Warnings != 0 {
		var lines []string
		for _, f := range r.Findings {
			lines = append(lines, fmt.Sprintf("%s %s %s %s", f.Severity, f.Code, f.Where(), f.Message))
		}
		t.Fatalf("audit --strict manifests/: exit %d, %+v\n%s\n%s", code, r.Summary, strings.Join(lines, "\n"), errOut)
	}
	var waived []string
	for _, f := range r.Findings {
		if f.Waived != nil {
			waived = append(waived, f.Connector+" "+string(f.Code))
		}
	}
	if strings.Join(waived, ",") != "email loopback-host" {
		t.Errorf("waived findings %q, want only email's loopback-host", waived)
	}
}
