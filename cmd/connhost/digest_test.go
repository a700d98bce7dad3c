package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
)

// TestApproveDigestPrefix: approve takes the args digest whole or its
// first 12 hex characters or more (as the README and the logs shorten
// it, "…" included); a shorter one is a usage error; one that is not the
// recorded digest's start is refused, and so is a whole wrong digest,
// each naming the whole recorded digest.
func TestApproveDigestPrefix(t *testing.T) {
	a := testApp(t)
	gated := func(call string) host.Result {
		t.Helper()
		code, out, errOut := runCLI(t, a, "--json", "exec", "--session", "s1", "--tool-call", call, "--tool", "gated.echo", "--args", `{"msg":"`+call+`"}`)
		var res host.Result
		if code != cli.ExitNotSucceeded || json.Unmarshal([]byte(out), &res) != nil || res.Approval == nil {
			t.Fatalf("gated call: %d %q %q", code, out, errOut)
		}
		return res
	}
	c1 := gated("c1")
	full := c1.Approval.ArgsDigest
	wrong := strings.Repeat("0", 64)
	if strings.HasPrefix(full, "000000000000") {
		wrong = strings.Repeat("f", 64)
	}
	for _, tc := range []struct {
		name, digest string
		code         int
		want         string
	}{
		{"11 characters", full[:11], cli.ExitUsage, "at least its first 12"},
		{"not hex", "zzzzzzzzzzzzzz", cli.ExitUsage, "at least its first 12"},
		{"wrong prefix", wrong[:12], cli.ExitFailure, "recorded arguments' digest " + full},
		{"wrong whole digest", wrong, cli.ExitFailure, "the recorded arguments have digest " + full},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, a, "approve", c1.Approval.ID, "--digest", tc.digest, "--by", "rita")
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d %q %q, want exit %d and %q", code, out, errOut, tc.code, tc.want)
			}
		})
	}
	for i, d := range []string{full[:12], strings.ToUpper(full[:20]) + "…"} {
		res := c1
		if i > 0 {
			res = gated("c2")
			d = strings.ToUpper(res.Approval.ArgsDigest[:20]) + "…"
		}
		code, out, errOut := runCLI(t, a, "--json", "approve", res.Approval.ID, "--digest", d, "--by", "rita")
		if code != cli.ExitOK || !strings.Contains(out, `"state": "approved"`) {
			t.Fatalf("approve --digest %s: exit %d %q %q", d, code, out, errOut)
		}
	}
}
