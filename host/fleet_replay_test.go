package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
)

// saveRow copies execution id's row and its pending row aside, as whoever
// holds the database's connection string can (CREATE TABLE … AS SELECT),
// and restoreRow puts them back byte for byte, as a restore of both tables
// would (the events written since go with the row's trail): the record is
// then exactly the one the reviewer's signature covers, at an earlier
// step.
func saveRow(t *testing.T, dsn, id, as string) {
	t.Helper()
	require.NoError(t, testenv.ExecDSN(context.Background(), dsn,
		`CREATE TABLE `+as+` AS SELECT * FROM connhost_executions WHERE id = $1`, []byte(id)))
	require.NoError(t, testenv.ExecDSN(context.Background(), dsn,
		`CREATE TABLE `+as+`_pending AS SELECT * FROM connhost_pending WHERE id = $1`, []byte(id)))
}

func restoreRow(t *testing.T, dsn, id, from string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, testenv.ExecDSN(ctx, dsn, `UPDATE connhost_executions x SET state = s.state, attempt = s.attempt,
    events = s.events, terminal_ns = s.terminal_ns, owner_node = s.owner_node, owner_epoch = s.owner_epoch,
    record = s.record, trail = s.trail
FROM `+from+` s WHERE x.id = s.id AND x.id = $1`, []byte(id)))
	require.NoError(t, testenv.ExecDSN(ctx, dsn, `DELETE FROM connhost_pending WHERE id = $1`, []byte(id)))
	require.NoError(t, testenv.ExecDSN(ctx, dsn, `INSERT INTO connhost_pending SELECT * FROM `+from+`_pending WHERE id = $1`, []byte(id)))
}

// TestFleetReplayedApprovalIsNotDispatchedAgain is issue 37's first
// attack. A gated manual call is approved with rita's token and runs once.
// Whoever holds only the database's connection string saved its row while
// it was approved, restores it after the call ran (the row byte for byte
// the approved one, so the signature verifies, the newer events deleted)
// and has the runtime send the call again, to the node that ran it or to
// another. Before, every round ran it again (1 → 2 → 3 → 4 effects at the
// provider). Now a node refuses a dispatch its journal of consumed
// approvals (outside the database) says was made: the execution becomes
// recovery_required, with ledger_damaged as its reason, and the provider
// sees the call once. Across nodes that takes the journal they share
// (Options.ConsumedDir): a node's own journal knows only its own
// dispatches.
func TestFleetReplayedApprovalIsNotDispatchedAgain(t *testing.T) {
	ctx := context.Background()
	// attack approves call c1 of session s through node a, runs it, and
	// restores its approved row three times, sending it again through
	// the nodes given in turn. It returns the effects at the provider
	// after each round and the answers.
	attack := func(t *testing.T, f *fleet, s string, a *host.Executor, rounds ...*host.Executor) []host.Result {
		t.Helper()
		c := call(s, "c1", `{"n":1}`)
		res, err := a.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, host.StatusAwaitingApproval, res.Status)
		_, err = a.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
		require.NoError(t, err)
		saveRow(t, f.dsn, res.ExecutionID, "saved_"+s)
		before := f.h.prov.count()
		res, err = a.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, host.StatusSucceeded, res.Status)
		require.Equal(t, before+1, f.h.prov.count())
		var out []host.Result
		for round, node := range rounds {
			restoreRow(t, f.dsn, res.ExecutionID, "saved_"+s)
			again, err := node.Execute(ctx, c)
			require.NoError(t, err, "round %d", round+1)
			t.Logf("round %d: %d effect(s) in all; %s: %s", round+1, f.h.prov.count()-before, again.Status, again.Error)
			out = append(out, again)
		}
		return out
	}

	t.Run("a journal the nodes share", func(t *testing.T) {
		f := newFleet(t, "manual", withApproval())
		shared := t.TempDir()
		a, b := f.startJournal("a", shared), f.startJournal("b", shared)
		for round, again := range attack(t, f, "s1", a, b, a, b) {
			require.Equal(t, 1, f.h.prov.count(), "round %d: effects at the provider", round+1)
			require.Equal(t, host.StatusRecoveryRequired, again.Status, "round %d", round+1)
			require.Contains(t, again.Error, "ledger_damaged: ", "round %d", round+1)
			require.Contains(t, again.Error, "the journal of consumed approvals says node a saw attempt 1 applied", "round %d", round+1)
			last := lastEvent(t, b, again.ExecutionID)
			require.Equal(t, "ledger_damaged", last.Decision)
			for _, step := range trail(t, b, again.ExecutionID)[2:] {
				require.NotContains(t, step, "dispatch>", "round %d: a second dispatch in the trail", round+1)
			}
		}
		// The fence holds the session, as any recovery_required call's does.
		_, err := b.Execute(ctx, call("s1", "c2", `{"n":2}`))
		var fe *host.FencedError
		require.ErrorAs(t, err, &fe)
	})

	// Each node with a journal of its own (the default, beside its
	// witness) refuses its own repeats, and knows nothing of another
	// node's: the limit docs/trust.md states.
	t.Run("a journal each", func(t *testing.T) {
		f := newFleet(t, "manual", withApproval())
		a, b := f.startJournal("a", t.TempDir()), f.startJournal("b", t.TempDir())
		answers := attack(t, f, "s1", a, a, b)
		require.Equal(t, host.StatusRecoveryRequired, answers[0].Status)
		require.Equal(t, host.StatusSucceeded, answers[1].Status, "node b knew of node a's dispatch without a shared journal")
		require.Equal(t, 2, f.h.prov.count())
	})
}

// TestFleetReplayedRetryIsNotDispatchedAgain edits the row instead of
// restoring it: after the call ran, its record is made a retry_wait of
// attempt 1 (a made-up retryable error, rita's approval and signature
// intact), and, once that is refused, a retry_wait of attempt 5. Before,
// the node dispatched each "retry". Now the journal's record that the
// call was applied refuses every later attempt.
func TestFleetReplayedRetryIsNotDispatchedAgain(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "idempotent-retry", withApproval(), withAttempts(9))
	shared := t.TempDir()
	a := f.startJournal("a", shared)
	b := f.startJournal("b", shared)
	c := call("s1", "c1", `{"n":1}`)
	res, err := a.Execute(ctx, c)
	require.NoError(t, err)
	_, err = a.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)
	res, err = a.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 1, f.h.prov.count())
	// The provider does not deduplicate (as one past its key retention):
	// only the journal stands between the edited row and a second charge.
	for _, attempt := range []int{1, 5} {
		editRowSQL(t, f, res.ExecutionID, func(r *ledger.Record) {
			r.State, r.Attempt, r.NextAttemptAt = ledger.StateRetryWait, attempt, f.h.clock()
			r.Outcome = &ledger.Outcome{Kind: "retryable_error", Error: "made up", Source: "connector", Attempt: attempt}
		})
		again, err := b.Execute(ctx, c)
		require.NoError(t, err)
		require.Equal(t, 1, f.h.prov.count(), "attempt %d: effects at the provider", attempt)
		require.Equal(t, host.StatusRecoveryRequired, again.Status)
		require.Contains(t, again.Error, "ledger_damaged")
	}
}

// startJournal starts node name with its journal of consumed approvals in
// dir (one every node is given is the fleet's shared journal).
func (f *fleet) startJournal(name, dir string) *host.Executor {
	f.t.Helper()
	return f.startAdjusted(name, plainFleet, func(o *host.Options) {
		o.ApprovalKeys, o.ConsumedDir = map[string][]byte{"rita": host.ApprovalKey(ritaToken)}, dir
	})
}

func plainFleet(db *pgledger.DB) ledger.Fleet { return db }

// editRowSQL rewrites a record's row in SQL, past the ledger's grammar.
func editRowSQL(t *testing.T, f *fleet, id string, edit func(*ledger.Record)) {
	t.Helper()
	ctx := context.Background()
	var v []byte
	require.NoError(t, testenv.QueryDSN(ctx, f.dsn, `SELECT record FROM connhost_executions WHERE id = convert_to('`+id+`', 'UTF8')`, &v))
	var rec ledger.Record
	require.NoError(t, rec.UnmarshalBinary(v))
	edit(&rec)
	v, err := rec.MarshalBinary()
	require.NoError(t, err)
	require.NoError(t, testenv.ExecDSN(ctx, f.dsn, `UPDATE connhost_executions SET record = $1, state = $2, attempt = $3, terminal_ns = NULL WHERE id = $4`,
		v, string(rec.State), rec.Attempt, []byte(id)))
	require.NoError(t, testenv.ExecDSN(ctx, f.dsn, `INSERT INTO connhost_pending (id, namespace, session_id, state, due_ns)
SELECT id, namespace, session_id, $2, 0 FROM connhost_executions WHERE id = $1
ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, due_ns = 0`, []byte(id), string(rec.State)))
}

// TestFleetReviewerOutsideHerNamespaces is issue 37's second attack: rita
// approves in namespace tenant-a only. Through a node's API her scope
// already answers tenant-b's calls as unknown; with her token and the
// connection string, though, a decision made on the shared ledger
// directly (the executor without a scope, as `connhost approve --ledger
// … --by rita` runs it) was recorded and signed, and every node
// dispatched it. Now the decision is refused, and an approval signed
// with her key anyway (by a tool that does not check, here an executor
// without her namespaces) is not dispatched, and expires with its
// approval: the provider sees nothing.
// Tenant-a's call she approves runs, as a control.
func TestFleetReviewerOutsideHerNamespaces(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	ritaKeys := map[string][]byte{"rita": host.ApprovalKey(ritaToken)}
	node := f.startAdjusted("a", plainFleet, func(o *host.Options) {
		o.ApprovalKeys, o.ApprovalNamespaces = ritaKeys, map[string][]string{"rita": {"tenant-a"}}
	})
	// What rita can run herself: her key, no namespaces to check.
	rogue := f.startAdjusted("rogue", plainFleet, func(o *host.Options) { o.ApprovalKeys = ritaKeys })

	inB := call("s1", "c1", `{"n":1}`)
	inB.Namespace = "tenant-b"
	res, err := node.Execute(ctx, inB)
	require.NoError(t, err)
	require.Equal(t, host.StatusAwaitingApproval, res.Status)

	_, err = node.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.ErrorIs(t, err, host.ErrNamespaceForbidden)
	require.ErrorContains(t, err, `rita reviews the calls of namespace "tenant-a" only`)
	_, err = node.Reject(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.ErrorIs(t, err, host.ErrNamespaceForbidden)
	rec, _, err := node.Get(ctx, res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateAwaitingApproval, rec.State, "a refused decision changed the call")

	_, err = rogue.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)
	// The node does not run it. It leaves the call as it is, as for any
	// reviewer its configuration does not authorise there (a node with a
	// config that lags the others' must not end their approvals), and a
	// pass leaves it too, until its approval expires.
	_, err = node.Execute(ctx, inB)
	require.ErrorIs(t, err, host.ErrApproverNotConfigured)
	require.ErrorContains(t, err, `rita, who reviews the calls of namespace "tenant-a" only, not of namespace "tenant-b"`)
	_, err = node.Recover(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, f.h.prov.count(), "effects at the provider of tenant-b's call")
	f.h.advance(2 * time.Hour) // past the approval's expiry (approval_ttl 1h)
	again, err := node.Execute(ctx, inB)
	require.NoError(t, err)
	require.Equal(t, host.StatusExpired, again.Status)
	require.Equal(t, 0, f.h.prov.count(), "effects at the provider of tenant-b's call")

	inA := call("s2", "c2", `{"n":2}`)
	inA.Namespace = "tenant-a"
	res, err = node.Execute(ctx, inA)
	require.NoError(t, err)
	_, err = node.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)
	res, err = node.Execute(ctx, inA)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 1, f.h.prov.count())
}

// TestFleetRollingApproverChange is a rolling configuration change: rita
// is added as an approver, node a has the new config, node b still the old
// one. Rita approves a call through a; the runtime sends it again through
// b. Before, b expired it (approval_unverified: it had no key for rita),
// destroying her approval; now b answers an error naming rita and leaves
// the call approved, its recovery pass too, and the call runs once b is
// restarted with the new config.
func TestFleetRollingApproverChange(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	a := f.start("a", nil)
	olga := map[string][]byte{"olga": host.ApprovalKey("tok-olga-0123456789abcdef")}
	b := f.startWith("b", nil, olga)

	c := call("s1", "c1", `{"n":1}`)
	res, err := a.Execute(ctx, c)
	require.NoError(t, err)
	_, err = a.Approve(ctx, res.Approval.ID, host.Decision{By: "rita", ArgsDigest: res.Approval.ArgsDigest})
	require.NoError(t, err)

	_, err = b.Execute(ctx, c)
	require.ErrorIs(t, err, host.ErrApproverNotConfigured)
	require.ErrorContains(t, err, "approval by rita, whom this node's configuration does not authorise")
	_, err = b.Recover(ctx)
	require.NoError(t, err)
	rec, _, err := b.Get(ctx, res.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, ledger.StateApproved, rec.State, "node b ended rita's approval")
	require.Equal(t, 0, f.h.prov.count())

	require.NoError(t, b.Close(ctx))
	b = f.start("b", nil) // restarted with rita's entry
	res, err = b.Execute(ctx, c)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	require.Equal(t, 1, f.h.prov.count())
}

// TestFleetCorruptRowFencesItsExecution copies one execution's record over
// another's row in the database (the row then holds a record of another
// id) while the node is down. Before, the node did not start again: its
// recovery read every pending record and stopped at the first that did
// not decode. Now that execution alone is fenced: the node starts, the
// call answers ErrCorrupt (ledger_damaged over HTTP) and is neither run nor
// ended, and every other call is served.
func TestFleetCorruptRowFencesItsExecution(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t, "manual", withApproval())
	a := f.start("a", nil)
	c1, c2 := call("s1", "c1", `{"n":1}`), call("s2", "c2", `{"n":2}`)
	r1, err := a.Execute(ctx, c1)
	require.NoError(t, err)
	r2, err := a.Execute(ctx, c2)
	require.NoError(t, err)
	_, err = a.Approve(ctx, r2.Approval.ID, host.Decision{By: "rita", ArgsDigest: r2.Approval.ArgsDigest})
	require.NoError(t, err)
	require.NoError(t, a.Close(ctx))

	require.NoError(t, testenv.ExecDSN(ctx, f.dsn, `UPDATE connhost_executions SET record = (SELECT record FROM connhost_executions WHERE id = convert_to('`+r2.ExecutionID+`', 'UTF8'))
WHERE id = convert_to('`+r1.ExecutionID+`', 'UTF8')`))
	a = f.start("a", nil) // fails the test if Open fails

	_, err = a.Execute(ctx, c1)
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	res, err := a.Execute(ctx, c2)
	require.NoError(t, err)
	require.Equal(t, host.StatusSucceeded, res.Status)
	res, err = a.Execute(ctx, call("s3", "c3", `{"n":3}`))
	require.NoError(t, err)
	require.Equal(t, host.StatusAwaitingApproval, res.Status)
	rep, err := a.Recover(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	require.Contains(t, rep.Errors[0], r1.ExecutionID)
	require.Equal(t, 1, f.h.prov.count(), "effects at the provider: c2's only")
}
