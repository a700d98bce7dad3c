package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/server/httpapi"
)

// TestLsByExpiry: ls --state awaiting_approval --order expiry lists the
// calls awaiting approval soonest to expire first, a page at a time with
// the position that continues it, under the count of all of them; a
// wrong order is a usage error.
func TestLsByExpiry(t *testing.T) {
	a := testApp(t)
	var want []string
	for i := range 3 {
		code, out, errOut := runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", fmt.Sprintf("c%d", i), "--tool", "gated.echo",
			"--args", fmt.Sprintf(`{"msg":"m%d"}`, i))
		var res host.Result
		if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Status != host.StatusAwaitingApproval {
			t.Fatalf("gated %d: %d %q %q", i, code, out, errOut)
		}
		want = append(want, res.ExecutionID)
	}
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the listing does not end")
		}
		args := []string{"--json", "ls", "--state", "awaiting_approval", "--order", "expiry", "--limit", "2"}
		if after != "" {
			args = append(args, "--after", after)
		}
		code, out, errOut := runCLI(t, a, args...)
		var lr httpapi.ListResponse
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &lr) != nil || lr.Total == nil || *lr.Total != 3 {
			t.Fatalf("ls --order expiry: %d %q %q", code, out, errOut)
		}
		for _, e := range lr.Executions {
			got = append(got, e.ExecutionID)
		}
		if after = lr.Next; after == "" {
			break
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ls --order expiry listed %v, want %v (the first asked expires first)", got, want)
	}
	code, out, _ := runCLI(t, a, "ls", "--state", "awaiting_approval", "--order", "expiry", "--limit", "1")
	if code != cli.ExitOK || !strings.Contains(out, "(3 awaiting approval in all") || !strings.Contains(out, "(more: --after ") {
		t.Fatalf("ls --order expiry: %d %q", code, out)
	}
	if code, _, errOut := runCLI(t, a, "ls", "--order", "expiry"); code != cli.ExitUsage || !strings.Contains(errOut, "needs state") {
		t.Fatalf("ls --order expiry without a state: %d %q", code, errOut)
	}
}
