package pgledger_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
)

// node is one process's view of a shared ledger: the database and a
// witness of its own, outside the database.
type node struct {
	t       *testing.T
	dsn     string
	witness string
}

func newNode(t *testing.T, dsn string) *node {
	return &node{t: t, dsn: dsn, witness: filepath.Join(t.TempDir(), "node.witness")}
}

func (n *node) options(mod ...func(*pgledger.Options)) pgledger.Options {
	o := pgledger.Options{DSN: n.dsn, Logger: quiet, WitnessPath: n.witness, WitnessInterval: time.Hour}
	for _, f := range mod {
		f(&o)
	}
	return o
}

func (n *node) open(mod ...func(*pgledger.Options)) (*pgledger.DB, error) {
	return pgledger.Open(context.Background(), n.options(mod...))
}

func (n *node) mustOpen(mod ...func(*pgledger.Options)) *pgledger.DB {
	n.t.Helper()
	db, err := n.open(mod...)
	require.NoError(n.t, err)
	return db
}

func manual(id, session string, state ledger.State) ledger.Record {
	r := ledger.Record{ID: id, Namespace: ledger.DefaultNamespace, SessionID: session, ToolCallID: "call-" + id,
		Connector: "effect", Operation: "apply", Effect: "external", Policy: "manual",
		ArgsDigest: "d-" + id, State: state, MaxAttempts: 1}
	if state == ledger.StateDispatched {
		r.Attempt = 1
	} else {
		r.Approval = &ledger.Approval{ID: "ap-" + id, ArgsDigest: r.ArgsDigest, Decision: ledger.ApprovalPending, ExpiresAt: time.Now().Add(time.Hour)}
	}
	return r
}

func ran(t *testing.T, db ledger.Ledger, id, session string) {
	t.Helper()
	ctx := context.Background()
	_, err := db.Create(ctx, manual(id, session, ledger.StateDispatched), ledger.Event{})
	require.NoError(t, err)
	_, err = db.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1}})
	require.NoError(t, err)
}

func damaged(t *testing.T, err error, kind ledger.DamageKind, says ...string) {
	t.Helper()
	var de *ledger.DamageError
	require.ErrorAs(t, err, &de, "%v", err)
	require.ErrorIs(t, err, ledger.ErrCorrupt)
	require.Equal(t, kind, de.Kind, "%v", err)
	for _, s := range append(says, "init") {
		require.Contains(t, err.Error(), s)
	}
	require.NotContains(t, err.Error(), "hunter2")
}

func tables(t *testing.T, dsn string) int {
	t.Helper()
	var n int
	require.NoError(t, testenv.QueryDSN(context.Background(), dsn, `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'connhost_%'`, &n))
	return n
}

// TestWitnessTruncate is issue 20's first PostgreSQL attack: the tables of
// executions, events and sessions emptied (TRUNCATE) under an intact
// position row. The witness's probe execution is gone, so Open refuses the
// database instead of letting a succeeded manual call run again.
func TestWitnessTruncate(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	n := newNode(t, dsn)
	db := n.mustOpen()
	ran(t, db, "x", "s1")
	require.NoError(t, db.Close())

	require.NoError(t, testenv.ExecDSN(ctx, dsn, `TRUNCATE connhost_executions, connhost_pending, connhost_sessions`))
	_, err := n.open()
	damaged(t, err, ledger.DamageBehind, "behind its witness "+n.witness, `execution "x", which the witness saw with 2 events, is missing`, "AcceptRestore")
	_, err = n.open(func(o *pgledger.Options) { o.MustExist = true })
	damaged(t, err, ledger.DamageBehind, "is missing")

	// Accepting it: the tables say nothing of how far back they went, so
	// every session the witness names is fenced, and the call sent again
	// is refused in its session.
	rep, err := pgledger.AcceptRestore(ctx, n.options(), ledger.RestoreAcceptance{By: "ops", Reason: "tables emptied by a script"})
	require.NoError(t, err)
	require.True(t, rep.Accepted)
	require.Zero(t, rep.RestoredPosition)
	require.Len(t, rep.Sessions, 1)
	require.Equal(t, "s1", rep.Sessions[0].SessionID)
	db = n.mustOpen()
	defer db.Close()
	fenced, err := db.Fenced(ctx, ledger.DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	require.Equal(t, ledger.RestoreConnector, fenced[0].Connector)
}

// TestWitnessDumpRestore is the second: a pg_dump taken while a gated
// manual call was approved, restored (psql) after the call ran. The
// restored commit position is behind the witness: refused. AcceptRestore
// then fences the approved call and the sessions written after the dump,
// signs out the console session the dump holds live (signed out after
// it), and a dump from before the acceptance is behind again.
func TestWitnessDumpRestore(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	n := newNode(t, dsn)
	db := n.mustOpen()
	ran(t, db, "old", "before")
	_, err := db.Create(ctx, manual("pay", "s1", ledger.StateAwaitingApproval), ledger.Event{})
	require.NoError(t, err)
	rec, err := db.Get(ctx, "pay")
	require.NoError(t, err)
	a := *rec.Approval
	a.Decision, a.By = ledger.ApprovalApproved, "rita"
	_, err = db.Apply(ctx, "pay", ledger.Transition{From: ledger.StateAwaitingApproval, To: ledger.StateApproved, Approval: &a})
	require.NoError(t, err)
	now := time.Now()
	console := ledger.ConsoleSession{Key: ledger.ConsoleSessionKey("id"), Principal: "rita", Created: now, Expires: now.Add(time.Hour)}
	require.NoError(t, db.AddConsoleSession(ctx, console))
	require.NoError(t, db.Close())
	dump, err := testenv.DumpDSN(ctx, dsn)
	require.NoError(t, err)

	db = n.mustOpen()
	require.NoError(t, db.RevokeConsoleSession(ctx, console.Key, now), "rita signs out after the dump")
	_, err = db.Apply(ctx, "pay", ledger.Transition{From: ledger.StateApproved, To: ledger.StateDispatched, Attempt: 1})
	require.NoError(t, err)
	_, err = db.Apply(ctx, "pay", ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1}})
	require.NoError(t, err)
	ran(t, db, "later", "s2")
	require.NoError(t, db.Close())

	require.NoError(t, testenv.RestoreDSN(ctx, dsn, dump))
	_, err = n.open()
	damaged(t, err, ledger.DamageBehind, "behind its witness", "commit position", "older dump")

	rep, err := pgledger.AcceptRestore(ctx, n.options(), ledger.RestoreAcceptance{By: "ops", Reason: "restored the nightly dump"})
	require.NoError(t, err)
	require.True(t, rep.Accepted)
	require.Equal(t, uint64(1), rep.Generation)
	require.Equal(t, []ledger.FencedExecution{{ID: "pay", Namespace: ledger.DefaultNamespace, SessionID: "s1", Tool: "effect.apply", Was: ledger.StateApproved}}, rep.Executions)
	var sessions []string
	for _, s := range rep.Sessions {
		sessions = append(sessions, s.SessionID)
	}
	require.ElementsMatch(t, []string{"s1", "s2"}, sessions)

	db = n.mustOpen()
	rec, err = db.Get(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, ledger.StateRecoveryRequired, rec.State, "the approved call is not dispatched a second time")
	fenced, err := db.Fenced(ctx, ledger.DefaultNamespace, "s2")
	require.NoError(t, err)
	require.Len(t, fenced, 1, "the session of a call the dump does not know is fenced")
	fenced, err = db.Fenced(ctx, ledger.DefaultNamespace, "before")
	require.NoError(t, err)
	require.Empty(t, fenced)
	cs, err := db.ConsoleSession(ctx, console.Key)
	require.NoError(t, err)
	require.False(t, cs.Revoked.IsZero(), "the console session the dump holds live, signed out after it, is signed out again")
	require.NoError(t, db.Close())

	require.NoError(t, testenv.RestoreDSN(ctx, dsn, dump))
	_, err = n.open()
	damaged(t, err, ledger.DamageBehind, "generation")
}

// TestWitnessDropTables is the third: every table dropped. Open refuses
// before it creates any; init creates a new ledger deliberately, setting
// the witness aside; a table dropped alone is refused too.
func TestWitnessDropTables(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	n := newNode(t, dsn)
	db := n.mustOpen()
	ran(t, db, "x", "s1")
	require.NoError(t, db.Close())

	require.NoError(t, testenv.ExecDSN(ctx, dsn, `DROP TABLE connhost_pending`))
	_, err := n.open()
	damaged(t, err, ledger.DamageMissing, "connhost_pending", "are gone")

	require.NoError(t, testenv.ExecDSN(ctx, dsn, `DROP TABLE connhost_executions, connhost_sessions, connhost_nodes, connhost_ledger, connhost_restores, connhost_intent_locks, connhost_console_sessions, connhost_schema_migrations`))
	_, err = n.open()
	damaged(t, err, ledger.DamageMissing, "no connhost tables", "witness "+n.witness, "AcceptRestore")
	require.Zero(t, tables(t, dsn), "no table was created")
	_, err = n.open(func(o *pgledger.Options) { o.MustExist = true })
	damaged(t, err, ledger.DamageMissing)

	db, err = n.open(func(o *pgledger.Options) { o.Init = true })
	require.NoError(t, err)
	require.NoError(t, db.Close())
	aside, err := filepath.Glob(n.witness + ".aside-*")
	require.NoError(t, err)
	require.Len(t, aside, 1)
	_, err = n.open(func(o *pgledger.Options) { o.Init = true })
	require.ErrorIs(t, err, ledger.ErrInvalid, "init on a healthy ledger")
	require.Contains(t, err.Error(), "healthy ledger")
	db = n.mustOpen()
	require.NoError(t, db.Close())
}

// TestWitnessAnotherLedger: a database re-created with another ledger (or
// a DSN pointing at another one) is not the witness's.
func TestWitnessAnotherLedger(t *testing.T) {
	dsn, other := testenv.NewPostgresDatabase(t), testenv.NewPostgresDatabase(t)
	n := newNode(t, dsn)
	db := n.mustOpen()
	require.NoError(t, db.Close())
	db, err := pgledger.Open(context.Background(), pgledger.Options{DSN: other, Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, db.Close())
	n.dsn = other
	_, err = n.open()
	damaged(t, err, ledger.DamageIdentity, "not the one its witness", "names ledger")
	db, err = n.open(func(o *pgledger.Options) { o.Init = true })
	require.NoError(t, err, "init takes the other ledger deliberately")
	require.NoError(t, db.Close())
}

// TestWitnessWhileOpen: a rollback under running nodes (a point-in-time
// restore, a failover to a replica that lost commits) is seen by every
// node within its witness interval, by one that never wrote too (it took
// the writer's position and probe): from then on each refuses every
// operation, so no call runs again through any of them.
func TestWitnessWhileOpen(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	fast := func(o *pgledger.Options) { o.WitnessInterval = 20 * time.Millisecond }
	writer, reader := newNode(t, dsn), newNode(t, dsn)
	a := writer.mustOpen(fast)
	defer a.Close()
	b := reader.mustOpen(fast)
	defer b.Close()
	ran(t, a, "x", "s1")
	// Both witnesses catch up: the writer's advances, the reader takes it.
	waitFor(t, func() bool {
		wa, _ := os.ReadFile(writer.witness)
		wb, _ := os.ReadFile(reader.witness)
		return strings.Contains(string(wa), `"probe"`) && strings.Contains(string(wb), `"probe"`)
	})

	require.NoError(t, testenv.ExecDSN(ctx, dsn, `TRUNCATE connhost_executions, connhost_pending, connhost_sessions`))
	for _, db := range []*pgledger.DB{a, b} {
		waitFor(t, func() bool {
			_, err := db.Get(ctx, "x")
			return errors.Is(err, ledger.ErrCorrupt)
		})
		_, err := db.Create(ctx, manual("x", "s1", ledger.StateDispatched), ledger.Event{})
		damaged(t, err, ledger.DamageBehind, "while this process had it open")
	}
	var n int
	require.NoError(t, testenv.QueryDSN(ctx, dsn, `SELECT count(*) FROM connhost_executions`, &n))
	require.Zero(t, n, "nothing was written after the rollback")
}

// waitFor polls cond; the bound keeps a broken witness loop from hanging
// the test, it is not a timing assertion.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 60s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
