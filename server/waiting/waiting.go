// Package waiting reads from a ledger what waits for a human now: calls
// awaiting a reviewer's approval, calls in recovery_required that need an
// operator, and the sessions those fence. Read serves the startup summary
// and the gauges of /metrics; an Announcer logs each call as it starts to
// wait.
//
// Everything here is read from the ledger's pending index, never counted
// from events seen by this process: a restart, another process that
// opened the ledger, or another node sharing it changes nothing in what
// Read reports.
package waiting

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Call is one execution that waits for a human.
type Call struct {
	ID        string
	Namespace string
	SessionID string
	// Tool is "connector.operation".
	Tool  string
	State ledger.State
	// Since is when the execution entered State (its last transition).
	Since time.Time
	// Attempt is the execution's current (or last) dispatch.
	Attempt int
	// Uncertain: an earlier attempt may have taken effect.
	Uncertain bool
	// ApprovalID and ExpiresAt are the pending approval request of an
	// awaiting_approval call.
	ApprovalID string
	ExpiresAt  time.Time
}

// Session is one session fenced by recovery_required calls.
type Session struct {
	Namespace string
	SessionID string
	// Calls are the ids of the calls that fence it.
	Calls []string
}

// Summary is what waits for a human at one instant.
type Summary struct {
	// Approvals are the awaiting_approval calls, oldest first.
	Approvals []Call
	// Recoveries are the recovery_required calls, oldest first.
	Recoveries []Call
}

// Read reads what waits in led from its pending index: the cost grows
// with the number of pending executions, not with history.
func Read(ctx context.Context, led ledger.Ledger) (Summary, error) {
	var s Summary
	err := led.Pending(ctx, func(r ledger.Record) error {
		c := Call{ID: r.ID, Namespace: r.Namespace, SessionID: r.SessionID, Tool: r.Connector + "." + r.Operation,
			State: r.State, Since: r.UpdatedAt, Attempt: r.Attempt, Uncertain: r.Uncertain}
		switch r.State {
		case ledger.StateAwaitingApproval:
			if r.Approval != nil {
				c.ApprovalID, c.ExpiresAt = r.Approval.ID, r.Approval.ExpiresAt
			}
			s.Approvals = append(s.Approvals, c)
		case ledger.StateRecoveryRequired:
			s.Recoveries = append(s.Recoveries, c)
		}
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	oldest := func(a, b Call) int { return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.ID, b.ID)) }
	slices.SortFunc(s.Approvals, oldest)
	slices.SortFunc(s.Recoveries, oldest)
	return s, nil
}

// Fenced returns the sessions the recovery_required calls fence, in the
// order of their oldest call.
func (s Summary) Fenced() []Session {
	var out []Session
	at := map[[2]string]int{}
	for _, c := range s.Recoveries {
		k := [2]string{c.Namespace, c.SessionID}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Session{Namespace: c.Namespace, SessionID: c.SessionID})
		}
		out[i].Calls = append(out[i].Calls, c.ID)
	}
	return out
}

// Oldest returns how long the oldest of calls has waited at now, 0 when
// there is none. calls must be oldest first, as Read returns them.
func Oldest(calls []Call, now time.Time) time.Duration {
	if len(calls) == 0 {
		return 0
	}
	return max(now.Sub(calls[0].Since), 0)
}
