package host_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
)

// TestFleetForgedApprovalsAreNotDispatched plays whoever holds the shared
// ledger's database credentials but no approver's token: they open the
// ledger with the connection string every node has (or edit its rows in
// SQL) and write approvals. None of them is dispatched, and each call's
// trail says why; a call rita approved through a node is, as a control.
// Without signed approvals every forged one below ran (the effect count
// was 6).
func TestFleetForgedApprovalsAreNotDispatched(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withApproval())
	a, b := f.start("a", nil), f.start("b", nil)
	// The database holder's own handle on the ledger.
	raw, err := pgledger.Open(ctx, pgledger.Options{DSN: f.dsn, Now: f.h.clock, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer raw.Close()

	intent := func(c host.ToolCall) host.Result {
		t.Helper()
		res, err := a.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		return res
	}
	approve := func(res host.Result) {
		t.Helper()
		_, err := a.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
	}
	// approveInDB records rita's approval as the ledger's API lets anyone
	// with the connection string do (what `connhost approve --ledger …
	// --by rita` did).
	approveInDB := func(res host.Result, signature string) {
		t.Helper()
		rec, err := raw.Get(ctx, res.ExecutionID)
		require.NoError(t, err)
		ap := *rec.Approval
		ap.Decision, ap.By, ap.DecidedAt, ap.Signature = ledger.ApprovalApproved, "rita", f.h.clock(), signature
		_, err = raw.Apply(ctx, rec.ID, ledger.Transition{From: rec.State, FromAttempt: rec.Attempt, To: ledger.StateApproved,
			Approval: &ap, Event: ledger.Event{Actor: "rita", Decision: "approved", Evidence: "digest " + ap.ArgsDigest}})
		require.NoError(t, err)
	}
	// editRow rewrites a record's row in SQL, past the ledger's grammar.
	editRow := func(id string, edit func(*ledger.Record)) {
		t.Helper()
		rec, err := raw.Get(ctx, id)
		require.NoError(t, err)
		edit(&rec)
		v, err := rec.MarshalBinary()
		require.NoError(t, err)
		require.NoError(t, testenv.ExecDSN(ctx, f.dsn, `UPDATE connhost_executions SET record = $1, state = $2, attempt = $3 WHERE id = $4`,
			v, string(rec.State), rec.Attempt, []byte(id)))
		require.NoError(t, testenv.ExecDSN(ctx, f.dsn, `UPDATE connhost_pending SET state = $1 WHERE id = $2`, string(rec.State), []byte(id)))
	}
	// redrive sends the call again through node b, as its runtime would.
	redrive := func(c host.ToolCall) (host.Result, ledger.Event) {
		t.Helper()
		res, err := b.Execute(ctx, c)
		require.NoError(t, err)
		return res, lastEvent(t, b, res.ExecutionID)
	}
	notDispatched := func(name string, res host.Result, last ledger.Event, status host.Status, why string) {
		t.Helper()
		require.Equal(t, status, res.Status, name)
		require.Equal(t, string(host.DecisionApprovalUnverified), last.Decision, name)
		require.Contains(t, last.Reason, why, name)
		for _, step := range trail(t, b, res.ExecutionID) {
			require.NotContains(t, step, "dispatch>", name+": the trail holds a dispatch")
		}
	}

	// The control: rita's approval, made through a node, is dispatched.
	c0 := call("s0", "c0", `{"n":0}`)
	approve(intent(c0))
	res, _ := redrive(c0)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 1, f.h.prov.count())

	// An approval written with the database's credentials.
	c1 := call("s1", "c1", `{"n":1}`)
	approveInDB(intent(c1), "")
	res, last := redrive(c1)
	notDispatched("unsigned", res, last, host.StatusExpired, "carries no signature")

	// One that copies the signature of rita's approval of another call.
	c2, c3 := call("s2", "c2", `{"n":2}`), call("s2", "c3", `{"n":2}`)
	r2, r3 := intent(c2), intent(c3)
	approve(r2)
	signed, err := raw.Get(ctx, r2.ExecutionID)
	require.NoError(t, err)
	approveInDB(r3, signed.Approval.Signature)
	res, last = redrive(c3)
	notDispatched("copied signature", res, last, host.StatusExpired, "does not verify with rita's key")

	// Rita's approval whose arguments were edited afterwards (the digests
	// left as she approved them).
	c4 := call("s4", "c4", `{"n":4}`)
	r4 := intent(c4)
	approve(r4)
	editRow(r4.ExecutionID, func(r *ledger.Record) { r.Args = json.RawMessage(`{"n":999999}`) })
	res, last = redrive(c4)
	notDispatched("edited arguments", res, last, host.StatusExpired, "do not have the approved digest")

	// Rita's approval whose expiry was pushed out afterwards.
	c5 := call("s5", "c5", `{"n":5}`)
	r5 := intent(c5)
	approve(r5)
	editRow(r5.ExecutionID, func(r *ledger.Record) { r.Approval.ExpiresAt = r.Approval.ExpiresAt.Add(365 * 24 * time.Hour) })
	res, last = redrive(c5)
	notDispatched("edited expiry", res, last, host.StatusExpired, "does not verify with rita's key")

	// A retry made up in SQL: a gated call put in retry_wait, its forged
	// approval marked consumed, due now. Recovery, which dispatches due
	// retries without a runtime, does not dispatch it.
	c6 := call("s6", "c6", `{"n":6}`)
	r6 := intent(c6)
	editRow(r6.ExecutionID, func(r *ledger.Record) {
		r.State, r.Attempt, r.NextAttemptAt = ledger.StateRetryWait, 1, f.h.clock().Add(-time.Second)
		r.Approval.Decision, r.Approval.By, r.Approval.ConsumedBy = ledger.ApprovalApproved, "rita", 1
		r.Outcome = &ledger.Outcome{Kind: "retryable_error", Error: "made up", Source: "connector", Attempt: 1}
	})
	_, err = b.Recover(ctx)
	require.NoError(t, err)
	res, last = redrive(c6)
	notDispatched("forged retry", res, last, host.StatusRecoveryRequired, "carries no signature")
	// Nor does an operator's retry.
	_, err = b.Resolve(ctx, r6.ExecutionID, host.Resolution{Retry: true, By: "olga", Reason: "looks fine"})
	require.ErrorIs(t, err, host.ErrApprovalRequired)

	// A node that holds no approver's key (a config without approvers)
	// verifies nothing, so it leaves the call as it is and says why.
	c8 := call("s8", "c8", `{"n":8}`)
	approveInDB(intent(c8), "")
	keyless := f.startWith("keyless", nil, nil)
	_, err = keyless.Execute(ctx, c8)
	require.ErrorIs(t, err, host.ErrApproverNotConfigured)
	require.ErrorContains(t, err, "whom this node's configuration does not authorise")
	rec, err := raw.Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, c8.SessionID, c8.ToolCallID))
	require.NoError(t, err)
	require.Equal(t, ledger.StateApproved, rec.State)

	// A node refuses to record a decision it cannot sign.
	c7 := call("s7", "c7", `{"n":7}`)
	r7 := intent(c7)
	_, err = b.Approve(ctx, r7.Approval.ID, host.Decision{By: "mallory", ArgsDigest: r7.Approval.ArgsDigest})
	require.ErrorIs(t, err, host.ErrBadCall)
	require.ErrorContains(t, err, "cannot be signed")

	require.Equal(t, 1, f.h.prov.count(), "effects at the provider: only the control's")
}
