//go:build unix

package soak

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/mailpit"
	"github.com/connhost/connhost/devkit/sandbox/stripe"
	"github.com/connhost/connhost/devkit/testing/trail"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// checkLedger checks the ledger against what the test issued and was
// told, before the final re-issue: every call is recorded, final (terminal
// or recovery_required), with the ids, tool and arguments the test sent
// and the status and receipt the runtime was given; the ledger holds
// nothing else. It returns the number of lost or stuck calls.
func (s *soak) checkLedger(recs []httpapi.Execution, byExec map[string]*call) int {
	recByID := map[string]httpapi.Execution{}
	for _, r := range recs {
		recByID[r.ExecutionID] = r
		if byExec[r.ExecutionID] == nil {
			s.errorf("ledger holds execution %s (%s/%s, %s) that the test never issued", r.ExecutionID, r.SessionID, r.ToolCallID, r.Tool)
		}
	}
	lost := 0
	for _, c := range s.calls {
		r, ok := recByID[c.execID]
		switch {
		case c.execID == "":
			lost++
			s.errorf("call %s never got an answer (last %+v)", c, c.last)
		case !ok:
			lost++
			s.errorf("call %s is missing from the ledger (last seen %s)", c, c.last.Status)
		case !final(r.State):
			lost++
			s.errorf("call %s is stuck in %s after recovery", c, r.State)
		case r.SessionID != c.session || r.ToolCallID != c.toolCallID || r.Tool != c.tool || !sameJSON(r.Args, c.args):
			s.errorf("call %s: the ledger recorded %s/%s %s %s", c, r.SessionID, r.ToolCallID, r.Tool, r.Args)
		case c.first != nil && (string(r.State) != string(c.first.Status) || receiptOf(r) != c.first.Receipt):
			s.errorf("call %s: the runtime was told %s with receipt %q, the ledger holds %s with %q", c, c.first.Status, c.first.Receipt, r.State, receiptOf(r))
		}
	}
	return lost
}

func receiptOf(r httpapi.Execution) string { return r.Receipt }

// final reports whether a ledger state is terminal or recovery_required.
func final(st ledger.State) bool {
	switch st {
	case ledger.StateSucceeded, ledger.StateFailed, ledger.StateRejected, ledger.StateExpired,
		ledger.StateAbandoned, ledger.StateCancelled, ledger.StateRecoveryRequired:
		return true
	}
	return false
}

// checkProviders checks, per execution, what the providers hold against
// the policy and the ledger, and returns the number of duplicate effects.
//
//   - create_payment (idempotent-retry), refund_payment and send
//     (reconcile): at most one effect tagged with the execution; a
//     succeeded execution's receipt names that effect, and the effect
//     carries the execution's key; a failed one has none.
//   - release_message (manual): never dispatched twice (the ledger's
//     events), since nothing can tell whether a lost release happened.
//   - No effect at the providers that no execution accounts for.
func (s *soak) checkProviders(ev *evidence, recs []httpapi.Execution, events map[string][]ledger.Event, byExec map[string]*call) int {
	dups := 0
	seenPI, seenRefund, seenMsg := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		c := byExec[r.ExecutionID]
		if c == nil {
			continue // reported already
		}
		approvals := 0
		for _, e := range events[r.ExecutionID] {
			if e.Decision == "approved" {
				approvals++
			}
		}
		if approvals > 1 {
			s.errorf("%s was approved %d times: an answered approval gate was re-armed", c, approvals)
		}
		var ids []string
		var key func(id string) string // the connhost_key the effect carries
		switch c.tool {
		case opCreate:
			ids = ev.pis[r.ExecutionID]
			key = func(id string) string { return ev.pi[id].Metadata["connhost_key"] }
			for _, id := range ids {
				seenPI[id] = true
			}
		case opRefund:
			ids = ev.refunds[r.ExecutionID]
			key = func(id string) string { return ev.refund[id].Metadata["connhost_key"] }
			for _, id := range ids {
				seenRefund[id] = true
				var a struct {
					PaymentIntent string `json:"payment_intent"`
				}
				if err := json.Unmarshal(c.args, &a); err != nil || ev.refund[id].PaymentIntent != a.PaymentIntent {
					s.errorf("%s: refund %s is of %s, the call named %s", c, id, ev.refund[id].PaymentIntent, a.PaymentIntent)
				}
			}
		case opSend:
			ids = ev.msgs[messageID(r.IdempotencyKey)]
			key = func(string) string { return r.IdempotencyKey } // the Message-ID is derived from it
			for _, id := range ids {
				seenMsg[id] = true
			}
		case opRelease:
			copies := ev.copies[releaseTo(c.toolCallID)]
			for _, id := range copies {
				seenMsg[id] = true
			}
			if len(copies) > 1 {
				dups += len(copies) - 1
				s.errorf("manual %s relayed %d copies: %v", c, len(copies), copies)
			}
			dispatches := 0
			for _, e := range events[r.ExecutionID] {
				if e.To == ledger.StateDispatched {
					dispatches++
				}
			}
			if dispatches > 1 || r.Attempt > 1 {
				dups += dispatches - 1
				s.errorf("manual %s was dispatched %d times (attempt %d): %+v", c, dispatches, r.Attempt, events[r.ExecutionID])
			}
			continue
		}
		if len(ids) > 1 {
			dups += len(ids) - 1
			s.errorf("%s (%s): %d effects at the provider: %v", c, r.State, len(ids), ids)
		}
		switch r.State {
		case ledger.StateSucceeded:
			receipt := r.Receipt
			switch {
			case len(ids) == 0:
				s.errorf("%s succeeded with receipt %q, but the provider holds no effect tagged with it", c, receipt)
			case !slices.Contains(ids, receipt):
				s.errorf("%s succeeded with receipt %q, but the effect tagged with it is %v", c, receipt, ids)
			case key(receipt) != r.IdempotencyKey:
				s.errorf("%s: effect %s carries key %q, the ledger recorded %q", c, receipt, key(receipt), r.IdempotencyKey)
			}
		case ledger.StateFailed:
			if len(ids) > 0 {
				s.errorf("%s failed, but the provider holds %v tagged with it; its trail:\n%s", c, ids, trail.Of(events[r.ExecutionID]))
			}
		}
	}
	for id, p := range ev.pi {
		if !seenPI[id] {
			dups++
			s.errorf("payment intent %s (metadata %v) belongs to no execution", id, p.Metadata)
		}
	}
	for id, r := range ev.refund {
		if !seenRefund[id] {
			dups++
			s.errorf("refund %s (metadata %v) belongs to no execution", id, r.Metadata)
		}
	}
	for id, m := range ev.msg {
		if !seenMsg[id] {
			dups++
			s.errorf("message %s (Message-ID %s) belongs to no execution", id, m.MessageID)
		}
	}
	return dups
}

// world is a small synthetic end state: one execution per operation, all
// succeeded (the release failed, as against the emulator), each effect
// tagged as the connectors tag them.
type world struct {
	recs   []httpapi.Execution
	events map[string][]ledger.Event
	calls  map[string]*call
	ev     *evidence
}

func cleanWorld() *world {
	w := &world{events: map[string][]ledger.Event{}, calls: map[string]*call{}, ev: newEvidence()}
	add := func(id, tool string, st ledger.State, receipt string, args string) {
		r := httpapi.Execution{Result: host.Result{ExecutionID: id, State: st, Attempt: 1, IdempotencyKey: "ck_" + id, Receipt: receipt}}
		w.recs = append(w.recs, r)
		w.calls[id] = &call{session: "s", toolCallID: id, tool: tool, args: json.RawMessage(args), execID: id}
		w.events[id] = []ledger.Event{
			{To: ledger.StateAwaitingApproval, Decision: "intent"},
			{To: ledger.StateApproved, Decision: "approved"},
			{To: ledger.StateDispatched, Decision: "dispatch"},
			{To: st, Decision: "outcome"},
		}
	}
	tag := func(id string) map[string]string {
		return map[string]string{"connhost_execution_id": id, "connhost_key": "ck_" + id}
	}
	add("ex_pay", opCreate, ledger.StateSucceeded, "pi_1", `{}`)
	w.ev.addPI(stripe.PaymentIntent{ID: "pi_1", Metadata: tag("ex_pay")})
	add("ex_ref", opRefund, ledger.StateSucceeded, "re_1", `{"payment_intent":"pi_1"}`)
	w.ev.addRefund(stripe.Refund{ID: "re_1", PaymentIntent: "pi_1", Metadata: tag("ex_ref")})
	add("ex_mail", opSend, ledger.StateSucceeded, "m1", `{}`)
	w.ev.addMessage(mailpit.MessageSummary{ID: "m1", MessageID: messageID("ck_ex_mail")})
	add("ex_rel", opRelease, ledger.StateFailed, "", `{}`)
	return w
}

// TestCheckersReportViolations proves the end-state checks can fail: each
// case breaks one invariant of a clean end state.
func TestCheckersReportViolations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		breakIt  func(w *world)
		wantDups int
		want     string // a fragment of the reported problem; "" for none
	}{
		{name: "clean", breakIt: func(*world) {}},
		{name: "second payment intent for one execution", wantDups: 1, want: "2 effects at the provider",
			breakIt: func(w *world) {
				w.ev.addPI(stripe.PaymentIntent{ID: "pi_2", Metadata: map[string]string{"connhost_execution_id": "ex_pay", "connhost_key": "ck_ex_pay"}})
			}},
		{name: "second message with the execution's Message-ID", wantDups: 1, want: "2 effects at the provider",
			breakIt: func(w *world) { w.ev.addMessage(mailpit.MessageSummary{ID: "m2", MessageID: messageID("ck_ex_mail")}) }},
		{name: "second refund", wantDups: 1, want: "2 effects at the provider",
			breakIt: func(w *world) {
				w.ev.addRefund(stripe.Refund{ID: "re_2", PaymentIntent: "pi_1", Metadata: map[string]string{"connhost_execution_id": "ex_ref"}})
			}},
		{name: "effect no execution accounts for", wantDups: 1, want: "belongs to no execution",
			breakIt: func(w *world) { w.ev.addMessage(mailpit.MessageSummary{ID: "m9", MessageID: "other@example.com"}) }},
		{name: "receipt names another object", want: "but the effect tagged with it is",
			breakIt: func(w *world) { w.recs[0].Receipt = "pi_9" }},
		{name: "succeeded without an effect", want: "holds no effect tagged with it",
			breakIt: func(w *world) {
				w.ev = newEvidence()
				w.ev.addRefund(stripe.Refund{ID: "re_1", PaymentIntent: "pi_1", Metadata: map[string]string{"connhost_execution_id": "ex_ref", "connhost_key": "ck_ex_ref"}})
				w.ev.addMessage(mailpit.MessageSummary{ID: "m1", MessageID: messageID("ck_ex_mail")})
			}},
		{name: "effect carries another key", want: "carries key",
			breakIt: func(w *world) { w.ev.pi["pi_1"].Metadata["connhost_key"] = "ck_other" }},
		{name: "refund of another payment", want: "the call named",
			breakIt: func(w *world) { w.calls["ex_ref"].args = json.RawMessage(`{"payment_intent":"pi_7"}`) }},
		{name: "failed with an effect", want: "failed, but the provider holds",
			breakIt: func(w *world) { w.recs[0].State = ledger.StateFailed }},
		{name: "manual operation dispatched twice", wantDups: 1, want: "was dispatched 2 times",
			breakIt: func(w *world) {
				w.events["ex_rel"] = append(w.events["ex_rel"], ledger.Event{To: ledger.StateDispatched, Decision: "recover_retry"})
			}},
		{name: "approval gate re-armed", want: "approved 2 times",
			breakIt: func(w *world) {
				w.events["ex_pay"] = append(w.events["ex_pay"], ledger.Event{To: ledger.StateApproved, Decision: "approved"})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var problems []string
			s := &soak{t: t, seed: 7, problems: &problems}
			w := cleanWorld()
			tc.breakIt(w)
			dups := s.checkProviders(w.ev, w.recs, w.events, w.calls)
			if dups != tc.wantDups {
				t.Errorf("duplicates = %d, want %d (problems %q)", dups, tc.wantDups, problems)
			}
			switch {
			case tc.want == "" && len(problems) > 0:
				t.Errorf("problems on a clean end state: %q", problems)
			case tc.want != "" && !containsFragment(problems, tc.want):
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
			for _, p := range problems {
				if !strings.HasPrefix(p, "[seed 7] ") {
					t.Errorf("problem %q does not name the seed", p)
				}
			}
		})
	}
}

// TestObserveReportsChangedResults proves the duplicate-result check can
// fail: a terminal answer that changes, or turns back into a pending one.
func TestObserveReportsChangedResults(t *testing.T) {
	ok := host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Receipt: "pi_1", Source: "connector", Result: json.RawMessage(`{"a": 1}`)}
	for _, tc := range []struct {
		name    string
		second  host.Result
		wantDup bool
	}{
		{name: "same answer, other JSON spacing", second: host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Receipt: "pi_1", Source: "connector", Result: json.RawMessage(`{"a":1}`), Recorded: true}},
		{name: "other receipt", wantDup: true, second: host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Receipt: "pi_2", Source: "connector", Result: ok.Result}},
		{name: "other result", wantDup: true, second: host.Result{ExecutionID: "ex_1", Status: host.StatusSucceeded, Receipt: "pi_1", Source: "connector", Result: json.RawMessage(`{"a":2}`)}},
		{name: "approval gate again", wantDup: true, second: host.Result{ExecutionID: "ex_1", Status: host.StatusAwaitingApproval}},
		{name: "failed now", wantDup: true, second: host.Result{ExecutionID: "ex_1", Status: host.StatusFailed}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var problems []string
			s := &soak{t: t, seed: 7, problems: &problems}
			c := &call{session: "s", toolCallID: "c", tool: opSend}
			s.observe(c, ok)
			s.observe(c, tc.second)
			if got := s.dupResults.Load() == 1; got != tc.wantDup {
				t.Errorf("duplicate result reported: %t, want %t (problems %q)", got, tc.wantDup, problems)
			}
		})
	}
}

// TestObserveReportsForgottenApprovals proves the lost-state checks can
// fail: an approval request recreated after it was answered, and a call
// waiting for approval again after an answered approve.
func TestObserveReportsForgottenApprovals(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	waiting := func(exp time.Time) host.Result {
		return host.Result{ExecutionID: "ex_1", Status: host.StatusAwaitingApproval,
			Approval: &ledger.Approval{ID: "ap_1", ArgsDigest: "d", ExpiresAt: exp}}
	}
	for _, tc := range []struct {
		name     string
		approved bool
		second   host.Result
		want     int64
	}{
		{name: "same request again", second: waiting(at)},
		{name: "request recreated", second: waiting(at.Add(time.Minute)), want: 1},
		{name: "waiting again after approve", approved: true, second: waiting(at), want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var problems []string
			s := &soak{t: t, seed: 7, problems: &problems}
			c := &call{session: "s", toolCallID: "c", tool: opCreate}
			s.observe(c, waiting(at))
			c.approved = tc.approved
			s.observe(c, tc.second)
			if got := s.forgotten.Load(); got != tc.want {
				t.Errorf("forgotten = %d, want %d (problems %q)", got, tc.want, problems)
			}
		})
	}
}

func containsFragment(problems []string, frag string) bool {
	for _, p := range problems {
		if strings.Contains(p, frag) {
			return true
		}
	}
	return false
}
