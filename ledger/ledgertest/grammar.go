package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/connhost/connhost/ledger"
)

// Grammar runs the scenario files in testdata/grammar against b. Each
// command prints what the ledger answered and, after a write, the pending
// executions (Pending) and the fenced ones of every session the scenario
// created records in (Fenced); Invariants and b.Check run after every
// command. Every backend must produce the same output. Regenerate it with
// -rewrite (on any backend) and review the diff.
//
// Commands:
//
//	create id=<id> state=<state> attempt=<n> max=<n> [ns=<ns>] [session=<s>] [tool=<id>] [args=<digest>] [effect=read|external]
//	       [policy=<p>] [resumed]
//	apply id=<id> from=<state> to=<state> attempt=<n> [fromattempt=<n>]
//	      [outcome=<kind>[@<attempt>]] [resolution=applied|retry|abandon] [cancel] [approval=<decision>]
//	      [nonce=<request-state nonce, with approval>] [uncertain] [ruledout] [lazy] [decision=<name>]
//	      fromattempt defaults to attempt-1 when entering dispatched (unless
//	      cancel is set and from=dispatched), else to attempt.
//	get id=<id> | events id=<id> | pending | fenced [ns=<ns>] session=<s>
//	session [ns=<ns>] session=<s> | list [state=] [ns=] [session=] [after=] [limit=]
//	tick d=<duration> | prune [ago=<duration>] | reopen | crash
func Grammar(t *testing.T, b Backend) {
	datadriven.Walk(t, scenarioDir(t), func(t *testing.T, path string) {
		r := &runner{b: b, clock: NewClock(), ids: map[string]bool{}, sessions: map[[2]string]bool{}}
		r.store = b.New(t)
		r.l = r.store.Open(t, r.clock.Now)
		defer func() { _ = r.l.Close() }()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := r.run(t, d)
			r.check(t)
			return out
		})
	})
}

// scenarioDir is testdata/grammar beside this file, wherever the test that
// calls Grammar runs.
func scenarioDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("ledgertest: cannot locate the scenario files")
	}
	return filepath.Join(filepath.Dir(file), "testdata", "grammar")
}

type runner struct {
	b     Backend
	store Store
	l     ledger.Ledger
	clock *Clock
	// ids and sessions are every execution id and (namespace, session)
	// the scenario asked to create, for the index output and the
	// invariants.
	ids      map[string]bool
	sessions map[[2]string]bool
}

func (r *runner) check(t *testing.T) {
	t.Helper()
	Invariants(t, r.l, slices.Sorted(mapKeys(r.ids)), slices.Collect(mapKeys(r.sessions)))
	if r.b.Check != nil {
		r.b.Check(t, r.l)
	}
}

func mapKeys[K comparable](m map[K]bool) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
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

// FormatRecord is the one-line form of a record in scenario output.
func FormatRecord(r ledger.Record) string {
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
		if r.Approval.StateNonce != "" {
			fmt.Fprintf(&b, " nonce=%s", r.Approval.StateNonce)
		}
	}
	if r.CancelRequested {
		b.WriteString(" cancel_requested")
	}
	if r.Uncertain {
		b.WriteString(" uncertain")
	}
	return b.String()
}

// FormatError names the ledger sentinels err matches, then its message.
func FormatError(err error) string {
	var names []string
	for _, s := range []error{ledger.ErrNotFound, ledger.ErrExists, ledger.ErrConflict, ledger.ErrTerminal, ledger.ErrIllegalTransition,
		ledger.ErrAttemptsExhausted, ledger.ErrOutcomeRecorded, ledger.ErrPruned, ledger.ErrClosed, ledger.ErrCorrupt,
		ledger.ErrInvalid, ledger.ErrTooLarge, ledger.ErrStateUsed} {
		if errors.Is(err, s) {
			names = append(names, strings.TrimPrefix(s.Error(), "ledger: "))
		}
	}
	return fmt.Sprintf("error [%s]: %v", strings.Join(names, ", "), err)
}

// indexes prints the pending executions and the fenced ones of every
// session the scenario touched, read through the interface.
func (r *runner) indexes(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var pending, fenced []string
	if err := r.l.Pending(ctx, func(rec ledger.Record) error {
		pending = append(pending, rec.ID)
		return nil
	}); err != nil {
		t.Fatalf("pending: %v", err)
	}
	sessions := slices.SortedFunc(mapKeys(r.sessions), func(a, b [2]string) int {
		return cmpPair(a, b)
	})
	for _, s := range sessions {
		recs, err := r.l.Fenced(ctx, s[0], s[1])
		if err != nil {
			t.Fatalf("fenced %s/%s: %v", s[0], s[1], err)
		}
		for _, rec := range recs {
			fenced = append(fenced, fmt.Sprintf("%s/%s/%s", s[0], s[1], rec.ID))
		}
	}
	return fmt.Sprintf("pending: %v\nfenced: %v\n", pending, fenced)
}

func cmpPair(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

func (r *runner) run(t *testing.T, d *datadriven.TestData) string {
	ctx := context.Background()
	id := arg(d, "id", "")
	switch d.Cmd {
	case "create":
		rec := ledger.Record{
			ID: id, Namespace: arg(d, "ns", ledger.DefaultNamespace), SessionID: arg(d, "session", "s1"),
			ToolCallID: arg(d, "tool", "call-"+id), ArgsDigest: arg(d, "args", "digest-"+id),
			State: ledger.State(arg(d, "state", "")), Attempt: intArg(t, d, "attempt", 0),
			MaxAttempts: intArg(t, d, "max", 3), Resumed: arg(d, "resumed", "") == "true",
			Effect: arg(d, "effect", "external"), Policy: arg(d, "policy", ""),
		}
		if id != "" {
			r.ids[id] = true
		}
		r.sessions[[2]string{rec.Namespace, rec.SessionID}] = true
		got, err := r.l.Create(ctx, rec, ledger.Event{Actor: "executor"})
		if err != nil {
			s := FormatError(err) + "\n"
			if got.ID != "" {
				s += "existing " + FormatRecord(got) + "\n"
			}
			return s + r.indexes(t)
		}
		return FormatRecord(got) + "\n" + r.indexes(t)
	case "apply":
		to := ledger.State(arg(d, "to", ""))
		from := ledger.State(arg(d, "from", ""))
		attempt := intArg(t, d, "attempt", 0)
		cancel := arg(d, "cancel", "") == "true"
		defFrom := attempt
		if to == ledger.StateDispatched && !(cancel && from == ledger.StateDispatched) {
			defFrom = attempt - 1
		}
		tr := ledger.Transition{From: from, To: to, Attempt: attempt, FromAttempt: intArg(t, d, "fromattempt", defFrom),
			CancelRequested: cancel, Event: ledger.Event{Decision: arg(d, "decision", "step"), Actor: "test"},
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
			tr.Outcome = &ledger.Outcome{Kind: kind, Source: "connector", Attempt: oa}
		}
		switch res := arg(d, "resolution", ""); res {
		case "":
		case "applied":
			tr.Resolution = &ledger.Resolution{Applied: true, By: "op", Reason: "checked"}
		case "retry":
			tr.Resolution = &ledger.Resolution{Retry: true, By: "op", Reason: "checked"}
		case "abandon":
			tr.Resolution = &ledger.Resolution{By: "op", Reason: "checked"}
		default:
			d.Fatalf(t, "resolution=%q", res)
		}
		if a := arg(d, "approval", ""); a != "" {
			tr.Approval = &ledger.Approval{ID: ledger.ApprovalID(id), Decision: ledger.ApprovalDecision(a), StateNonce: arg(d, "nonce", "")}
		}
		got, err := r.l.Apply(ctx, id, tr)
		if err != nil {
			return FormatError(err) + "\n" + r.indexes(t)
		}
		return FormatRecord(got) + "\n" + r.indexes(t)
	case "get":
		got, err := r.l.Get(ctx, id)
		if err != nil {
			s := FormatError(err) + "\n"
			if got.ID != "" {
				s += "tombstone " + FormatRecord(got) + "\n"
			}
			return s
		}
		return FormatRecord(got) + "\n"
	case "events":
		evs, err := r.l.Events(ctx, id)
		if err != nil {
			return FormatError(err) + "\n"
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
		err := r.l.Pending(ctx, func(rec ledger.Record) error {
			b.WriteString(FormatRecord(rec) + "\n")
			return nil
		})
		if err != nil {
			return FormatError(err) + "\n"
		}
		return b.String()
	case "fenced":
		recs, err := r.l.Fenced(ctx, arg(d, "ns", ledger.DefaultNamespace), arg(d, "session", "s1"))
		if err != nil {
			return FormatError(err) + "\n"
		}
		var b strings.Builder
		for _, rec := range recs {
			b.WriteString(FormatRecord(rec) + "\n")
		}
		return b.String()
	case "session":
		ok, err := r.l.SessionKnown(ctx, arg(d, "ns", ledger.DefaultNamespace), arg(d, "session", "s1"))
		if err != nil {
			return FormatError(err) + "\n"
		}
		return fmt.Sprintf("known=%t\n", ok)
	case "list":
		recs, err := r.l.List(ctx, ledger.Filter{State: ledger.State(arg(d, "state", "")), Namespace: arg(d, "ns", ""),
			SessionID: arg(d, "session", ""), After: arg(d, "after", ""), Limit: intArg(t, d, "limit", 0)})
		if err != nil {
			return FormatError(err) + "\n"
		}
		var b strings.Builder
		for _, rec := range recs {
			b.WriteString(FormatRecord(rec) + "\n")
		}
		return b.String()
	case "tick":
		dur, err := time.ParseDuration(arg(d, "d", "1s"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		r.clock.Advance(dur)
		return fmt.Sprintf("now %s\n", r.clock.Now().Format(time.RFC3339))
	case "prune":
		ago, err := time.ParseDuration(arg(d, "ago", "0s"))
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		n, err := r.l.Prune(ctx, r.clock.Now().Add(-ago))
		if err != nil {
			return FormatError(err) + "\n"
		}
		return fmt.Sprintf("pruned %d\n", n) + r.indexes(t)
	case "reopen":
		if err := r.l.Close(); err != nil {
			d.Fatalf(t, "close: %v", err)
		}
		r.l = r.store.Open(t, r.clock.Now)
		return "ok\n" + r.indexes(t)
	case "crash":
		r.store.Crash(t, r.l)
		r.l = r.store.Open(t, r.clock.Now)
		return "ok\n" + r.indexes(t)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}
