package host

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// TestDecide runs the decision table in testdata/decide: every row of a
// `decide` block is one case, and the expected output repeats the row with
// the action decide returns (regenerate with -rewrite and review the
// diff). A row is a list of key=value facts; what a row leaves out is the
// quiet default (an external, live, loaded, unfenced call at attempt 1 of
// 3, one minute old, no evidence):
//
//	state=<ledger state>   policy=manual|idempotent-retry|reconcile|-   read
//	attempt=<n>/<max>      evidence=none|ok|retryable|permanent|unsupported|uncertain|in_progress|applied|not_applied|unknown|reconcile_error|repeat
//	uncertain  cancel  unloaded  pass (not live)  fenced  elsewhere  age=<duration>  reconcilable
//	next=<±duration>  settle=<±duration>  final=<±duration>  (relative to now)
//	approval=ok|none|expired|problem|unverified (a shared ledger's approval without a valid signature)
//	replayed (the journal of consumed approvals holds the next dispatch already; evidence=repeat: it kept the attempt from being called)
//
// The action prints as `<step> [to] [decision] [until=±d] [+uncertain|-uncertain]`.
func TestDecide(t *testing.T) {
	datadriven.Walk(t, "testdata/decide", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "decide" {
				d.Fatalf(t, "unknown command %q", d.Cmd)
			}
			var out strings.Builder
			rows := strings.Split(strings.TrimSpace(d.Input), "\n")
			width := 0
			for _, r := range rows {
				width = max(width, len(strings.Join(strings.Fields(r), " ")))
			}
			for _, row := range rows {
				row = strings.Join(strings.Fields(row), " ")
				if row == "" || strings.HasPrefix(row, "#") {
					out.WriteString(row + "\n")
					continue
				}
				f, err := parseFacts(row)
				if err != nil {
					d.Fatalf(t, "row %q: %v", row, err)
				}
				fmt.Fprintf(&out, "%-*s → %s\n", width, row, fmtAction(decide(f), f.Now))
			}
			return out.String()
		})
	})
}

var decideNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func parseFacts(row string) (facts, error) {
	f := facts{
		State: ledger.StateDispatched, Policy: manifests.PolicyIdempotentRetry,
		Attempt: 1, MaxAttempts: 3, Loaded: true, Live: true,
		Now: decideNow, Age: time.Minute, KeyRetention: 24 * time.Hour,
		Backoff: time.Second, InFlightBackoff: 4 * time.Second,
		SettleAt: decideNow.Add(-time.Second),
	}
	rel := func(v string) (time.Time, error) {
		dur, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
		return decideNow.Add(dur), err
	}
	for _, tok := range strings.Fields(row) {
		k, v, _ := strings.Cut(tok, "=")
		var err error
		switch k {
		case "state":
			f.State = ledger.State(v)
		case "policy":
			f.Policy = manifests.Policy(strings.TrimPrefix(v, "-"))
		case "read":
			f.Read, f.Policy = true, ""
		case "attempt":
			a, m, ok := strings.Cut(v, "/")
			if !ok {
				return f, fmt.Errorf("attempt=%q: want n/max", v)
			}
			if f.Attempt, err = strconv.Atoi(a); err == nil {
				f.MaxAttempts, err = strconv.Atoi(m)
			}
		case "evidence":
			f.Evidence = 255
			for e, name := range evidenceNames {
				if name == v {
					f.Evidence = evidence(e)
				}
			}
			if f.Evidence == 255 {
				err = fmt.Errorf("unknown evidence %q", v)
			}
		case "uncertain":
			f.Uncertain = true
		case "reconcilable":
			f.Reconcilable = true
		case "cancel":
			f.CancelRequested = true
		case "unloaded":
			f.Loaded = false
		case "pass":
			f.Live = false
		case "fenced":
			f.Fenced = true
		case "elsewhere":
			f.Elsewhere = true
		case "replayed":
			f.Replayed = "the journal of consumed approvals says node a dispatched attempt 1"
		case "age":
			f.Age, err = time.ParseDuration(v)
		case "next":
			f.NextAttemptAt, err = rel(v)
		case "settle":
			f.SettleAt, err = rel(v)
		case "final":
			f.FinalSettleAt, err = rel(v)
		case "approval":
			f.HasApproval, f.ApprovalExpiresAt = true, decideNow.Add(time.Hour)
			switch v {
			case "ok":
			case "none":
				f.HasApproval = false
			case "expired":
				f.ApprovalExpiresAt = decideNow.Add(-time.Second)
			case "problem":
				f.ApprovalProblem = "approval was given for other arguments"
			case "unverified":
				f.Unverified = "approval by rita carries no signature"
			default:
				err = fmt.Errorf("approval=%q", v)
			}
		default:
			err = fmt.Errorf("unknown fact %q", k)
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

func fmtAction(a action, now time.Time) string {
	parts := []string{a.Step.String()}
	if a.Step == stepRecord {
		parts = append(parts, string(a.To))
	}
	if a.Decision != DecisionNone {
		parts = append(parts, string(a.Decision))
	}
	if !a.Until.IsZero() {
		d := a.Until.Sub(now)
		sign := "+"
		if d < 0 {
			sign, d = "-", -d
		}
		parts = append(parts, "until="+sign+d.String())
	}
	if a.Uncertain {
		parts = append(parts, "+uncertain")
	}
	if a.RuledOut {
		parts = append(parts, "-uncertain")
	}
	return strings.Join(parts, " ")
}
