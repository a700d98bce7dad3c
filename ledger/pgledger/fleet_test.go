package pgledger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
	"github.com/connhost/connhost/ledger/pgledger"
)

// expire ends node's lease now, as if it had not been renewed in time: the
// database's clock decides expiry, so the test moves the row, not a clock.
func expire(t *testing.T, dsn, node string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `UPDATE connhost_nodes SET expires_at = clock_timestamp() - INTERVAL '1 second' WHERE node_id = $1`, node)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

const ttl = time.Hour

// TestLeases: a node's lease is renewed while it is live; an expired or
// superseded lease can neither be renewed nor fence a write, and its node
// must register again, which starts a new epoch.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	a1, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	require.EqualValues(t, 1, a1.Epoch)
	require.False(t, a1.Superseded, "a new node ends no lease")
	require.WithinDuration(t, time.Now().Add(ttl), a1.Expires, 5*time.Minute)
	a1, err = db.RenewLease(ctx, a1, 2*ttl)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*ttl), a1.Expires, 5*time.Minute)

	_, err = db.CreateOwned(ctx, a1, ledgertest.Dispatched("x"), ledger.Event{})
	require.NoError(t, err)
	owner, live, err := db.Owner(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, "a", owner.Node)
	require.EqualValues(t, 1, owner.Epoch)
	require.True(t, live)
	require.Equal(t, a1.Expires, owner.Expires)

	// A restart: the same node registers again. Its former epoch is
	// fenced out at once, though its lease had not expired.
	a2, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	require.EqualValues(t, 2, a2.Epoch)
	require.True(t, a2.Superseded, "the former epoch was live")
	_, err = db.RenewLease(ctx, a1, ttl)
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.ApplyOwned(ctx, a1, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.CreateOwned(ctx, a1, ledgertest.Dispatched("y"), ledger.Event{})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.Get(ctx, "y")
	require.ErrorIs(t, err, ledger.ErrNotFound, "a fenced create wrote")
	owner, live, err = db.Owner(ctx, "x")
	require.NoError(t, err)
	require.False(t, live, "a superseded epoch is not live")
	require.EqualValues(t, 1, owner.Epoch)
	// The new epoch does not own x either until it claims it.
	_, err = db.ApplyOwned(ctx, a2, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.ErrorIs(t, err, pgledger.ErrNotOwner)
	claimed, err := db.ClaimExpired(ctx, a2)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, ids(claimed))
	_, err = db.ApplyOwned(ctx, a2, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.NoError(t, err)

	// Expiry: the lease can no longer be renewed or claim.
	expire(t, dsn, "a")
	_, err = db.RenewLease(ctx, a2, ttl)
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.ClaimExpired(ctx, a2)
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.RegisterNode(ctx, "", ttl)
	require.ErrorIs(t, err, ledger.ErrInvalid)
}

func ids(claims []ledger.Claim) []string {
	var out []string
	for _, c := range claims {
		out = append(out, c.Record.ID)
	}
	slices.Sort(out)
	return out
}

// TestTakeover: node a dispatches and dies (its lease expires). Its pending
// executions, and only those, are claimed by exactly one of the live nodes
// claiming at once; a's late writes are refused by the epoch check, and an
// unowned write path (an operator's resolution) is not fenced.
func TestTakeover(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	nodeA := openDB(t, dsn, nil)
	a, err := nodeA.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("x%02d", i)
		_, err := nodeA.CreateOwned(ctx, a, ledgertest.Dispatched(id), ledger.Event{})
		require.NoError(t, err)
		switch {
		case i%10 == 0: // finished before a died: not claimable
			_, err = nodeA.ApplyOwned(ctx, a, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
				Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
			require.NoError(t, err)
		default:
			want = append(want, id)
		}
	}
	// An unowned execution (created through the plain interface) is no
	// dead node's to claim.
	_, err = nodeA.Create(ctx, ledgertest.Dispatched("free"), ledger.Event{})
	require.NoError(t, err)
	expire(t, dsn, "a")

	// Eight live nodes claim at once; each execution goes to one.
	const claimers = 8
	dbs := make([]*pgledger.DB, claimers)
	leases := make([]pgledger.Lease, claimers)
	for i := range claimers {
		dbs[i] = openDB(t, dsn, nil)
		leases[i], err = dbs[i].RegisterNode(ctx, fmt.Sprint("n", i), ttl)
		require.NoError(t, err)
	}
	got := make([][]ledger.Claim, claimers)
	errs := make([]error, claimers)
	start := make(chan struct{})
	done := make(chan int)
	for i := range claimers {
		go func() {
			<-start
			got[i], errs[i] = dbs[i].ClaimExpired(ctx, leases[i])
			done <- i
		}()
	}
	close(start)
	for range claimers {
		<-done
	}
	var all []string
	owner := map[string]int{}
	for i := range claimers {
		require.NoError(t, errs[i])
		for _, c := range got[i] {
			all = append(all, c.Record.ID)
			owner[c.Record.ID] = i
			require.Equal(t, ledger.StateDispatched, c.Record.State)
			require.Equal(t, a.Node, c.From.Node, "claimed from a")
			require.Equal(t, a.Epoch, c.From.Epoch)
		}
	}
	slices.Sort(all)
	require.Equal(t, want, all, "every pending execution of a claimed exactly once")
	for id, i := range owner {
		owner, live, err := nodeA.Owner(ctx, id)
		require.NoError(t, err)
		require.Equal(t, leases[i].Node, owner.Node)
		require.Equal(t, leases[i].Epoch, owner.Epoch)
		require.True(t, live)
	}
	free, live, err := nodeA.Owner(ctx, "free")
	require.NoError(t, err)
	require.Equal(t, pgledger.Lease{}, free)
	require.False(t, live)

	// a comes back late and writes an outcome: refused, nothing changes.
	id := want[0]
	_, err = nodeA.ApplyOwned(ctx, a, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "late", Attempt: 1}})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	rec, err := nodeA.Get(ctx, id)
	require.NoError(t, err)
	require.Equal(t, ledger.StateDispatched, rec.State)
	// Another live node may not write an execution it does not own.
	i := owner[id]
	other := (i + 1) % claimers
	_, err = dbs[other].ApplyOwned(ctx, leases[other], id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
	require.ErrorIs(t, err, pgledger.ErrNotOwner)
	// The owner applies the decision table: re-dispatch with the same key.
	rec, err = dbs[i].ApplyOwned(ctx, leases[i], id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2, Uncertain: true})
	require.NoError(t, err)
	require.Equal(t, 2, rec.Attempt)
	// Nothing is left to claim.
	again, err := dbs[other].ClaimExpired(ctx, leases[other])
	require.NoError(t, err)
	require.Empty(t, again)
	everything := []string{"free"}
	for i := range 40 {
		everything = append(everything, fmt.Sprintf("x%02d", i))
	}
	ledgertest.Invariants(t, nodeA, everything, [][2]string{{ledger.DefaultNamespace, "s1"}})
	checkTables(t, dsn)
}

func gated(id string) ledger.Record {
	r := ledgertest.Dispatched(id)
	r.State, r.Attempt = ledger.StateAwaitingApproval, 0
	r.Approval = &ledger.Approval{ID: "ap-" + id, ArgsDigest: r.ArgsDigest, Decision: ledger.ApprovalPending}
	return r
}

func requireOwner(t *testing.T, db *pgledger.DB, id string, want pgledger.Lease) {
	t.Helper()
	owner, _, err := db.Owner(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want.Node, owner.Node)
	require.Equal(t, want.Epoch, owner.Epoch)
}

// TestOwnershipAtRest: an execution with no attempt in flight belongs to
// whichever live node writes it next (an approval given through one node is
// consumed by the node that dispatches); an attempt in flight only to its
// owner, though another node may record a cancel request on it, which
// leaves the owner as it is.
func TestOwnershipAtRest(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	var a, b, c pgledger.Lease
	for _, p := range []struct {
		l    *pgledger.Lease
		node string
	}{{&a, "a"}, {&b, "b"}, {&c, "c"}} {
		var err error
		*p.l, err = db.RegisterNode(ctx, p.node, ttl)
		require.NoError(t, err)
	}
	_, err := db.CreateOwned(ctx, a, gated("x"), ledger.Event{})
	require.NoError(t, err)
	requireOwner(t, db, "x", a)

	// b approves a's request (a is live): at rest, b takes it.
	approved := ledger.Approval{ID: "ap-x", ArgsDigest: "d-x", Decision: ledger.ApprovalApproved, By: "rita"}
	_, err = db.ApplyOwned(ctx, b, "x", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateApproved, Approval: &approved})
	require.NoError(t, err)
	requireOwner(t, db, "x", b)
	// c dispatches it.
	_, err = db.ApplyOwned(ctx, c, "x", ledger.Transition{From: ledger.StateApproved, To: ledger.StateDispatched, Attempt: 1})
	require.NoError(t, err)
	requireOwner(t, db, "x", c)

	// In flight: neither a nor b may decide its attempt.
	outcome := ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}}
	for _, l := range []pgledger.Lease{a, b} {
		_, err = db.ApplyOwned(ctx, l, "x", outcome)
		require.ErrorIs(t, err, pgledger.ErrNotOwner, "%s", l)
		_, err = db.ApplyOwned(ctx, l, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2, Uncertain: true})
		require.ErrorIs(t, err, pgledger.ErrNotOwner, "%s", l)
	}
	// b may ask for its cancellation; c still owns the attempt.
	rec, err := db.ApplyOwned(ctx, b, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 1, CancelRequested: true})
	require.NoError(t, err)
	require.True(t, rec.CancelRequested)
	requireOwner(t, db, "x", c)
	// c records the outcome on the record b changed since c's last write
	// (its cached version is stale).
	rec, err = db.ApplyOwned(ctx, c, "x", outcome)
	require.NoError(t, err)
	require.Equal(t, ledger.StateSucceeded, rec.State)

	// retry_wait is at rest too: a due retry goes to whichever live node
	// dispatches it first.
	_, err = db.CreateOwned(ctx, a, ledgertest.Dispatched("y"), ledger.Event{})
	require.NoError(t, err)
	_, err = db.ApplyOwned(ctx, a, "y", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRetryWait, Attempt: 1,
		NextAttemptAt: time.Now(), Outcome: &ledger.Outcome{Kind: "retryable_error", Attempt: 1}})
	require.NoError(t, err)
	_, err = db.ApplyOwned(ctx, b, "y", ledger.Transition{From: ledger.StateRetryWait, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2})
	require.NoError(t, err)
	requireOwner(t, db, "y", b)
	_, err = db.ApplyOwned(ctx, a, "y", ledger.Transition{From: ledger.StateRetryWait, FromAttempt: 1, To: ledger.StateDispatched, Attempt: 2})
	require.ErrorIs(t, err, ledger.ErrConflict, "the loser of the race gets the grammar's answer")

	// A lease that is not live takes nothing, at rest or not.
	_, err = db.CreateOwned(ctx, a, gated("z"), ledger.Event{})
	require.NoError(t, err)
	expire(t, dsn, "b")
	_, err = db.ApplyOwned(ctx, b, "z", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateApproved, Approval: &approved})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	requireOwner(t, db, "z", a)
	ledgertest.Invariants(t, db, []string{"x", "y", "z"}, [][2]string{{ledger.DefaultNamespace, "s1"}})
	checkTables(t, dsn)
}

// TestReleaseLease: a node that shuts down releases its lease, and its
// executions are claimable at once; the released lease writes nothing more.
func TestReleaseLease(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	a, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	b, err := db.RegisterNode(ctx, "b", ttl)
	require.NoError(t, err)
	_, err = db.CreateOwned(ctx, a, gated("x"), ledger.Event{})
	require.NoError(t, err)
	claimed, err := db.ClaimExpired(ctx, b)
	require.NoError(t, err)
	require.Empty(t, claimed, "a is live")

	require.NoError(t, db.ReleaseLease(ctx, a))
	require.NoError(t, db.ReleaseLease(ctx, a), "releasing twice")
	_, err = db.RenewLease(ctx, a, ttl)
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.CreateOwned(ctx, a, gated("y"), ledger.Event{})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, live, err := db.Owner(ctx, "x")
	require.NoError(t, err)
	require.False(t, live)
	claimed, err = db.ClaimExpired(ctx, b)
	require.NoError(t, err)
	require.Equal(t, []string{"x"}, ids(claimed))
	requireOwner(t, db, "x", b)
}

// TestPendingOwned: a node's recovery pass reads the pending (and the due)
// executions it owns and those nobody owns, never another node's.
func TestPendingOwned(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	a, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	b, err := db.RegisterNode(ctx, "b", ttl)
	require.NoError(t, err)
	for _, id := range []string{"a1", "a2", "done"} {
		_, err := db.CreateOwned(ctx, a, ledgertest.Dispatched(id), ledger.Event{})
		require.NoError(t, err)
	}
	_, err = db.ApplyOwned(ctx, a, "done", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.NoError(t, err)
	_, err = db.CreateOwned(ctx, b, ledgertest.Dispatched("b1"), ledger.Event{})
	require.NoError(t, err)
	_, err = db.Create(ctx, ledgertest.Dispatched("free"), ledger.Event{})
	require.NoError(t, err)
	list := func(l pgledger.Lease) []string {
		var got []string
		require.NoError(t, db.PendingOwned(ctx, l, func(r ledger.Record) error { got = append(got, r.ID); return nil }))
		return got
	}
	due := func(l pgledger.Lease) []string {
		var got []string
		require.NoError(t, db.DueOwned(ctx, l, time.Now(), func(id string) error { got = append(got, id); return nil }))
		return got
	}
	require.Equal(t, []string{"a1", "a2", "free"}, list(a))
	require.Equal(t, []string{"b1", "free"}, list(b))
	require.Equal(t, []string{"a1", "a2", "free"}, due(a), "dispatched executions are due at once")
	require.Equal(t, []string{"b1", "free"}, due(b))
	a2, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	require.Equal(t, []string{"free"}, list(a2), "a new epoch owns nothing until it claims")
	require.Equal(t, []string{"free"}, due(a2))
}

// TestRecoveryRequiredIsNotClaimed: an execution parked recovery_required
// waits for an operator, whom any node serves; it is not claimed from a
// gone lease (it was claimed again at every lease loss, from node to node),
// and every node's PendingOwned lists it, so each node's recovery report
// still shows it.
func TestRecoveryRequiredIsNotClaimed(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	a, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	for _, id := range []string{"inflight", "parked"} {
		_, err := db.CreateOwned(ctx, a, ledgertest.Dispatched(id), ledger.Event{})
		require.NoError(t, err)
	}
	_, err = db.ApplyOwned(ctx, a, "parked", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1,
		To: ledger.StateRecoveryRequired, Attempt: 1, Uncertain: true})
	require.NoError(t, err)
	expire(t, dsn, "a")

	b, err := db.RegisterNode(ctx, "b", ttl)
	require.NoError(t, err)
	claims, err := db.ClaimExpired(ctx, b)
	require.NoError(t, err)
	require.Equal(t, []string{"inflight"}, ids(claims))
	requireOwner(t, db, "parked", a)
	var got []string
	require.NoError(t, db.PendingOwned(ctx, b, func(r ledger.Record) error { got = append(got, r.ID); return nil }))
	require.Equal(t, []string{"inflight", "parked"}, got)

	expire(t, dsn, "b")
	c, err := db.RegisterNode(ctx, "c", ttl)
	require.NoError(t, err)
	claims, err = db.ClaimExpired(ctx, c)
	require.NoError(t, err)
	require.Equal(t, []string{"inflight"}, ids(claims), "only the call in flight moves again")

	// An operator's decision through any live node takes it.
	_, err = db.ApplyOwned(ctx, c, "parked", ledger.Transition{From: ledger.StateRecoveryRequired, FromAttempt: 1,
		To: ledger.StateAbandoned, Attempt: 1, Resolution: &ledger.Resolution{By: "rita", Reason: "checked by hand"}})
	require.NoError(t, err)
	requireOwner(t, db, "parked", c)
}

// TestCreateOwnedUnfenced: a new call in a session with a recovery_required
// execution is refused in the insert's own statement, guarded or not, and
// nothing is written; a recorded id is still ErrExists; other sessions,
// and CreateOwned, are not affected; a resolved fence lets calls in.
func TestCreateOwnedUnfenced(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	db := openDB(t, dsn, nil)
	a, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)

	_, err = db.CreateOwnedUnfenced(ctx, a, ledgertest.Dispatched("first"), ledger.Event{})
	require.NoError(t, err, "an unfenced session takes the call")
	_, err = db.ApplyOwned(ctx, a, "first", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateRecoveryRequired, Attempt: 1})
	require.NoError(t, err)

	guarded := ledgertest.Dispatched("guarded")
	guarded.DuplicateWindow = time.Hour
	for _, r := range []ledger.Record{ledgertest.Dispatched("new"), gated("gated"), guarded} {
		_, err = db.CreateOwnedUnfenced(ctx, a, r, ledger.Event{})
		require.ErrorIs(t, err, ledger.ErrFenced, r.ID)
		_, err = db.Get(ctx, r.ID)
		require.ErrorIs(t, err, ledger.ErrNotFound, "%s: a refused create wrote", r.ID)
	}
	got, err := db.CreateOwnedUnfenced(ctx, a, ledgertest.Dispatched("first"), ledger.Event{})
	require.ErrorIs(t, err, ledger.ErrExists, "a recorded id is answered, fenced or not")
	require.Equal(t, ledger.StateRecoveryRequired, got.State)

	other := ledgertest.Dispatched("elsewhere")
	other.SessionID = "s2"
	_, err = db.CreateOwnedUnfenced(ctx, a, other, ledger.Event{})
	require.NoError(t, err, "another session is not fenced")
	_, err = db.CreateOwned(ctx, a, ledgertest.Dispatched("plain"), ledger.Event{})
	require.NoError(t, err, "CreateOwned does not look at the fence")

	_, err = db.ApplyOwned(ctx, a, "first", ledger.Transition{From: ledger.StateRecoveryRequired, FromAttempt: 1, To: ledger.StateAbandoned, Attempt: 1,
		Resolution: &ledger.Resolution{By: "oscar", Reason: "not applied"}})
	require.NoError(t, err)
	_, err = db.CreateOwnedUnfenced(ctx, a, ledgertest.Dispatched("new"), ledger.Event{})
	require.NoError(t, err, "the fence is lifted")
	_, err = db.CreateOwnedUnfenced(ctx, a, guarded, ledger.Event{})
	require.NoError(t, err)
}
