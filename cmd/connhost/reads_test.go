package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
)

// TestReadsOfNoLedger: ls and history on a data directory without a
// ledger, or on one that does not exist, are errors (exit 6, exit 2),
// never "no executions": an empty answer would read as an all-clear.
func TestReadsOfNoLedger(t *testing.T) {
	empty := t.TempDir()
	missing := filepath.Join(empty, "nope")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"ls, no ledger", []string{"ls", "--data", empty}, cli.ExitLedgerDamaged, "there is no ledger in " + empty},
		{"ls --state, no ledger", []string{"ls", "--state", "recovery_required", "--data", empty}, cli.ExitLedgerDamaged, "there is no ledger in " + empty},
		{"history, no ledger", []string{"history", "ex_1", "--data", empty}, cli.ExitLedgerDamaged, "there is no ledger in " + empty},
		{"ls, no directory", []string{"ls", "--data", missing}, cli.ExitUsage, "--data " + missing + ": no such file or directory"},
		{"history, no directory", []string{"history", "ex_1", "--data", missing}, cli.ExitUsage, "--data " + missing + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(ServerEnv, "")
			code, out, errOut := runCLI(t, nil, tc.args...)
			if code != tc.code || strings.Contains(out, "no executions") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d stdout %q stderr %q, want exit %d and %q", code, out, errOut, tc.code, tc.want)
			}
		})
	}
	code, out, _ := runCLI(t, nil, "--json", "ls", "--data", empty)
	if code != cli.ExitLedgerDamaged || !strings.Contains(out, `"code": "ledger_damaged"`) {
		t.Fatalf("--json: exit %d %q", code, out)
	}
}
