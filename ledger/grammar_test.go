package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestGrammar runs the scenario files in testdata/grammar. Each command
// prints what the ledger answered and, after a write, the pending and
// fence indexes as stored; checkInvariants runs after every command.
// Regenerate the expected output with -rewrite and review the diff.
//
// Commands:
//
//	create id=<id> state=<state> attempt=<n> max=<n> [ns=<ns>] [session=<s>] [tool=<id>] [args=<digest>] [effect=read|external] [policy=<p>]
//	apply id=<id> from=<state> to=<state> attempt=<n> [fromattempt=<n>]
//	      [outcome=<kind>[@<attempt>]] [resolution=applied|retry|abandon] [cancel] [approval=<decision>]
//	      [uncertain] [ruledout] [lazy]
//	      fromattempt defaults to attempt-1 when entering dispatched (unless
//	      cancel is set and from=dispatched), else to attempt.
//	get id=<id> | events id=<id> | pending | fenced [ns=<ns>] session=<s>
//	session [ns=<ns>] session=<s> | list [state=] [ns=] [session=] [after=] [limit=]
//	tick d=<duration> | prune [ago=<duration>] | reopen
func TestGrammar(t *testing.T) {
	datadriven.Walk(t, "testdata/grammar", func(t *testing.T, path string) {
		clock := newFakeClock()
		fs := vfs.NewMem()
		ctx := context.Background()
		db, err := Open(ctx, memOptions(fs, clock))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = db.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := runGrammarCmd(t, ctx, &db, fs, clock, d)
			checkInvariants(t, db)
			return out
		})
	})
}

func arg(d *datadriven.TestData, key, def string) string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			if len(a.Vals) == 0 {
				return "true"
			}
			return a.Vals[0]
		}
	}
	return def
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int) int {
	s := arg(d, key, "")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		d.Fatalf(t, "%s=%q: %v", key, s, err)
	}
	return n
}

func fmtRecord(r Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s@%d/%d events=%d", r.ID, r.State, r.Attempt, r.MaxAttempts, r.Events)
	if r.Outcome != nil {
		fmt.Fprintf(&b, " outcome=%s@%d", r.Outcome.Kind, r.Outcome.Attempt)
	}
	if r.Resolution != nil {
		fmt.Fprintf(&b, " resolution=applied:%t,retry:%t", r.Resolution.Applied, r.Resolution.Retry)
	}
	if r.Approval != nil {
		fmt.Fprintf(&b, " approval=%s", r.Approval.Decision)
	}
	if r.CancelRequested {
		b.WriteString(" cancel_requested")
	}
	if r.Uncertain {
		b.WriteString(" uncertain")
	}
	return b.String()
}

func fmtErr(err error) string {
	var names []string
	for _, s := range []error{ErrNotFound, ErrExists, ErrConflict, ErrTerminal, ErrIllegalTransition,
		ErrAttemptsExhausted, ErrOutcomeRecorded, ErrPruned, ErrClosed, ErrCorrupt, ErrInvalid, ErrTooLarge} {
		if errors.Is(err, s) {
			names = append(names, strings.TrimPrefix(s.Error(), "ledger: "))
		}
	}
	return fmt.Sprintf("error [%s]: %v", strings.Join(names, ", "), err)
}

func runGrammarCmd(t *testing.T, ctx context.Context, dbp **DB, fs vfs.FS, clock *fakeClock, d *datadriven.TestData) string {
	db := *dbp
	id := arg(d, "id", "")
	switch d.Cmd {
	case "create":
		rec := Record{
			ID: id, Namespace: arg(d, "ns", DefaultNamespace), SessionID: arg(d, "session", "s1"),
			ToolCallID: arg(d, "tool", "call-"+id), ArgsDigest: arg(d, "args", "digest-"+id),
			State: State(arg(d, "state", "")), Attempt: intArg(t, d, "attempt", 0),
			MaxAttempts: intArg(t, d, "max", 3), Resumed: arg(d, "resumed", "") == "true",
			Effect: arg(d, "effect", "external"), Policy: arg(d, "policy", ""),
		}
		got, err := db.Create(ctx, rec, Event{Actor: "executor"})
		if err != nil {
			s := fmtErr(err) + "\n"
			if got.ID != "" {
				s += "existing " + fmtRecord(got) + "\n"
			}
			return s + indexes(t, db)
		}
		return fmtRecord(got) + "\n" + indexes(t, db)
	case "apply":
		to := State(arg(d, "to", ""))
		from := State(arg(d, "from", ""))
		attempt := intArg(t, d, "attempt", 0)
		cancel := arg(d, "cancel", "") == "true"
		defFrom := attempt
		if to == StateDispatched && !(cancel && from == StateDispatched) {
			defFrom = attempt - 1
		}
		tr := Transition{From: from, To: to, Attempt: attempt, FromAttempt: intArg(t, d, "fromattempt", defFrom),
			CancelRequested: cancel, Event: Event{Decision: arg(d, "decision", "step"), Actor: "test"},
			Uncertain: arg(d, "uncertain", "") == "true", RuledOut: arg(d, "ruledout", "") == "true",
			Lazy: arg(d, "lazy", "") == "true"}
		if o := arg(d, "outcome", ""); o != "" {
			kind, at, found := strings.Cut(o, "@")
			oa := attempt
			if found {
				n, err := strconv.Atoi(at)
				if err != nil {
					d.Fatalf(t, "outcome=%q", o)
				}
				oa = n
			}
			tr.Outcome = &Outcome{Kind: kind, Source: "connector", Attempt: oa}
		}
		switch r := arg(d, "resolution", ""); r {
		case "":
		case "applied":
			tr.Resolution = &Resolution{Applied: true, By: "op", Reason: "checked"}
		case "retry":
			tr.Resolution = &Resolution{Retry: true, By: "op", Reason: "checked"}
		case "abandon":
			tr.Resolution = &Resolution{By: "op", Reason: "checked"}
		default:
			d.Fatalf(t, "resolution=%q", r)
		}
		if a := arg(d, "approval", ""); a != "" {
			tr.Approval = &Approval{ID: ApprovalID(id), Decision: ApprovalDecision(a)}
		}
		got, err := db.Apply(ctx, id, tr)
		if err != nil {
			return fmtErr(err) + "\n" + indexes(t, db)
		}
		return fmtRecord(got) + "\n" + indexes(t, db)
	case "get":
		got, err := db.Get(ctx, id)
		if err != nil {
			s := fmtErr(err) + "\n"
			if got.ID != "" {
				s += "tombstone " + fmtRecord(got) + "\n"
			}
			return s
		}
		return fmtRecord(got) + "\n"
	case "events":
		evs, err := db.Events(ctx, id)
		if err != nil {
			return fmtErr(err) + "\n"
		}
		var b strings.Builder
		for _, e := range evs {
			from := string(e.From)
			if from == "" {
				from = "-"
			}
			fmt.Fprintf(&b, "%d %s %s -> %s@%d\n", e.Seq, e.Decision, from, e.To, e.Attempt)
		}
		return b.String()
	case "pending":
		var b strings.Builder
		err := db.Pending(ctx, func(r Record) error {
			b.WriteString(fmtRecord(r) + "\n")
			return nil
		})
		if err != nil {
			return fmtErr(err) + "\n"
		}
		return b.String()
	case "fenced":
		recs, err := db.Fenced(ctx, arg(d, "ns", DefaultNamespace), arg(d, "session", "s1"))
		if err != nil {
			return fmtErr(err) + "\n"
		}
		var b strings.Builder
		for _, r := range recs {
			b.WriteString(fmtRecord(r) + "\n")
		}
		return b.String()
	case "session":
		ok, err := db.SessionKnown(ctx, arg(d, "ns", DefaultNamespace), arg(d, "session", "s1"))
		if err != nil {
			return fmtErr(err) + "\n"
		}
		return fmt.Sprintf("known=%t\n", ok)
	case "list":
		recs, err := db.List(ctx, Filter{State: State(arg(d, "state", "")), Namespace: arg(d, "ns", ""),
			SessionID: arg(d, "session", ""), After: arg(d, "after", ""), Limit: intArg(t, d, "limit", 0)})
		if err != nil {
			return fmtErr(err) + "\n"
		}
		var b strings.Builder
		for _, r := range recs {
			b.WriteString(fmtRecord(r) + "\n")
		}
		return b.String()
	case "tick":
		dur, err := time.ParseDuration(arg(d, "d", "1s"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		clock.Advance(dur)
		return fmt.Sprintf("now %s\n", clock.Now().Format(time.RFC3339))
	case "prune":
		ago, err := time.ParseDuration(arg(d, "ago", "0s"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		n, err := db.Prune(ctx, clock.Now().Add(-ago))
		if err != nil {
			return fmtErr(err) + "\n"
		}
		return fmt.Sprintf("pruned %d\n", n) + indexes(t, db)
	case "reopen":
		if err := db.Close(); err != nil {
			d.Fatalf(t, "close: %v", err)
		}
		ndb, err := Open(ctx, memOptions(fs, clock))
		if err != nil {
			d.Fatalf(t, "reopen: %v", err)
		}
		*dbp = ndb
		return "ok\n" + indexes(t, ndb)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}
