package pgledger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/testing/testenv"
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
	require.WithinDuration(t, time.Now().Add(ttl), a1.Expires, 5*time.Minute)
	a1, err = db.RenewLease(ctx, a1, 2*ttl)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*ttl), a1.Expires, 5*time.Minute)

	_, err = db.CreateOwned(ctx, a1, ledgertest.Dispatched("x"), ledger.Event{})
	require.NoError(t, err)
	node, epoch, err := db.Owner(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, "a", node)
	require.EqualValues(t, 1, epoch)

	// A restart: the same node registers again. Its former epoch is
	// fenced out at once, though its lease had not expired.
	a2, err := db.RegisterNode(ctx, "a", ttl)
	require.NoError(t, err)
	require.EqualValues(t, 2, a2.Epoch)
	_, err = db.RenewLease(ctx, a1, ttl)
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.ApplyOwned(ctx, a1, "x", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Attempt: 1}})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.CreateOwned(ctx, a1, ledgertest.Dispatched("y"), ledger.Event{})
	require.ErrorIs(t, err, pgledger.ErrLeaseExpired)
	_, err = db.Get(ctx, "y")
	require.ErrorIs(t, err, ledger.ErrNotFound, "a fenced create wrote")
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

func ids(recs []ledger.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.ID)
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
	got := make([][]ledger.Record, claimers)
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
		for _, r := range got[i] {
			all = append(all, r.ID)
			owner[r.ID] = i
			require.Equal(t, ledger.StateDispatched, r.State)
		}
	}
	slices.Sort(all)
	require.Equal(t, want, all, "every pending execution of a claimed exactly once")
	for id, i := range owner {
		node, epoch, err := nodeA.Owner(ctx, id)
		require.NoError(t, err)
		require.Equal(t, leases[i].Node, node)
		require.Equal(t, leases[i].Epoch, epoch)
	}
	node, _, err := nodeA.Owner(ctx, "free")
	require.NoError(t, err)
	require.Empty(t, node)

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
