package wasmrt

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
)

// TestDeniedRequestsInTheLogBudget: a guest that retries a denied request
// in a loop (one 5 s call logged 85 MB against a 64 KiB budget, one WARN
// per request) costs two records: the first denial, within the guest's
// log budget, and one warning with the count when the invocation ends.
// The guest-chosen origin is cut; with the budget spent, only the count
// is logged.
func TestDeniedRequestsInTheLogBudget(t *testing.T) {
	longHost := "http://" + strings.Repeat("a", 20000) + ".example:80/x"
	for _, tc := range []struct {
		name string
		url  string
		n    int
		// log is what the guest logs first: with one record allowed, it
		// spends the budget.
		log         string
		firstLogged bool
	}{
		{"within the budget", "http://127.0.0.1:1/" + strings.Repeat("p", 1000), 5000, "", true},
		{"a long origin", longHost, 500, "", true},
		{"the budget spent", "http://127.0.0.1:1/", 5000, "hello", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, logs := newTestRuntime(t, Options{})
			m, lo := testManifest(t, "probe", "httpprobe", ops("getn"))
			m.Capabilities.HTTP = []string{"https://api.example.com:443"}
			m.Limits.LogRecords, m.Limits.LogKiB = 100, 64
			if tc.log != "" {
				m.Limits.LogRecords = 1
			}
			c := mustLoad(t, rt, m, lo)
			n := tc.n
			args, _ := json.Marshal(map[string]any{"url": tc.url, "n": n, "log": tc.log})
			out, err := c.Call(context.Background(), CallRequest{Export: abi.ExportExecute, Operation: "getn", ExecutionID: "e1", Args: args})
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Result) != strconv.Itoa(n) {
				t.Fatalf("denied %s of %d", out.Result, n)
			}
			l := parseLogs(t, logs)
			var single, summary []map[string]any
			for _, r := range l.others {
				switch r["msg"] {
				case "guest http request denied":
					single = append(single, r)
				case "guest http requests denied":
					summary = append(summary, r)
				}
			}
			t.Logf("%d denied requests: %d log bytes, %d single record(s), %d summary", n, l.size, len(single), len(summary))
			wantSingle := 0
			if tc.firstLogged {
				wantSingle = 1
			}
			if len(single) != wantSingle || len(summary) != 1 {
				t.Fatalf("%d records of a single denial (want %d), %d summaries (want 1)", len(single), wantSingle, len(summary))
			}
			if got := summary[0]["denied_requests"]; got != float64(n) {
				t.Errorf("summary counts %v denials, want %d", got, n)
			}
			if summary[0]["first_logged"] != tc.firstLogged {
				t.Errorf("summary says first_logged %v", summary[0]["first_logged"])
			}
			for _, r := range append(single, summary...) {
				for _, k := range []string{"origin", "first_origin", "reason", "first_reason"} {
					if s, _ := r[k].(string); len(s) > maxDeniedText+len("…") {
						t.Errorf("%s of %d bytes logged", k, len(s))
					}
				}
			}
			if l.size > 8<<10 {
				t.Errorf("%d bytes logged for %d denied requests", l.size, n)
			}
		})
	}
}
