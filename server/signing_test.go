package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/connhost/connhost/server/httpapi"
)

func noEnv(string) (string, bool) { return "", false }

// TestConfigRefusesSelfApprover: a principal holding roles runtime and
// approver could approve the calls it makes itself; it is refused with
// its line unless it opts in with allow_self_approval, and serve logs
// every principal admitted that way.
func TestConfigRefusesSelfApprover(t *testing.T) {
	const both = "[[principals]]\nname = \"desk\"\nroles = [\"runtime\", \"approver\"]\ntoken = \"tok-desk-0123456789\"\n"
	_, err := ParseConfig("c.toml", []byte(both), noEnv)
	if err == nil || !strings.Contains(err.Error(), "c.toml:3: principal desk holds roles runtime and approver") {
		t.Fatalf("runtime and approver without the opt-in: %v", err)
	}
	cfg, err := ParseConfig("c.toml", []byte(both+"allow_self_approval = true\n"), noEnv)
	if err != nil {
		t.Fatalf("with allow_self_approval: %v", err)
	}
	if _, err := ParseConfig("c.toml", []byte(both+"allow_self_approval = \"yes\"\n"), noEnv); err == nil {
		t.Error("allow_self_approval = \"yes\" accepted")
	}
	var log bytes.Buffer
	logAuthority(slog.New(slog.NewTextHandler(&log, nil)), httpapi.Options{Principals: cfg.Credentials()})
	if !strings.Contains(log.String(), "principal may approve the calls it makes itself") || !strings.Contains(log.String(), "principal=desk") {
		t.Errorf("serve's log does not name the self-approver:\n%s", log.String())
	}
	// Other pairs of roles are fine.
	if _, err := ParseConfig("c.toml", []byte("[[principals]]\nname = \"ops\"\nroles = [\"runtime\", \"operator\"]\ntoken = \"tok-ops-0123456789\"\n"), noEnv); err != nil {
		t.Errorf("runtime and operator: %v", err)
	}
}
