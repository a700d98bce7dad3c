package ledger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/ledger/internal/witness"
)

// A deployment on disk: data/ledger, data/ledger.mark and, outside data,
// the witness data.witness, as host.Open and the CLI lay them out.
type deployment struct {
	t       *testing.T
	data    string
	witness string
	logs    bytes.Buffer
}

func newDeployment(t *testing.T) *deployment {
	root := t.TempDir()
	return &deployment{t: t, data: filepath.Join(root, "data"), witness: filepath.Join(root, "data.witness")}
}

func (dp *deployment) dir() string { return filepath.Join(dp.data, "ledger") }

func (dp *deployment) options(mod ...func(*Options)) Options {
	o := Options{Dir: dp.dir(), WitnessPath: dp.witness, Logger: newTextLogger(&dp.logs), MarkInterval: time.Hour}
	for _, f := range mod {
		f(&o)
	}
	return o
}

func (dp *deployment) open(mod ...func(*Options)) (*DB, error) {
	return Open(context.Background(), dp.options(mod...))
}

func (dp *deployment) mustOpen(mod ...func(*Options)) *DB {
	dp.t.Helper()
	db, err := dp.open(mod...)
	require.NoError(dp.t, err)
	return db
}

// backup copies the whole data directory (the ledger and its mark), as an
// operator's backup of the volume would.
func (dp *deployment) backup() string {
	dp.t.Helper()
	to := filepath.Join(dp.t.TempDir(), "backup")
	require.NoError(dp.t, os.CopyFS(to, os.DirFS(dp.data)))
	return to
}

// restore replaces the whole data directory with the backup.
func (dp *deployment) restore(backup string) {
	dp.t.Helper()
	require.NoError(dp.t, os.RemoveAll(dp.data))
	require.NoError(dp.t, os.CopyFS(dp.data, os.DirFS(backup)))
}

func (dp *deployment) readWitness() witness.File {
	dp.t.Helper()
	w, err := witness.Read(dp.witness)
	require.NoError(dp.t, err)
	require.NotNil(dp.t, w)
	return *w
}

// gatedRecord is a call that waits for its reviewer in session.
func gatedRecord(id, session string) Record {
	r := dispatchedRecord(id)
	r.SessionID, r.ToolCallID, r.Policy = session, "call-"+id, "manual"
	r.State, r.Attempt, r.MaxAttempts = StateAwaitingApproval, 0, 1
	r.Approval = &Approval{ID: "ap-" + id, ArgsDigest: r.ArgsDigest, Decision: ApprovalPending, ExpiresAt: time.Now().Add(time.Hour)}
	return r
}

func approve(t *testing.T, db *DB, id string) {
	t.Helper()
	rec, err := db.Get(context.Background(), id)
	require.NoError(t, err)
	a := *rec.Approval
	a.Decision, a.By = ApprovalApproved, "rita"
	_, err = db.Apply(context.Background(), id, Transition{From: StateAwaitingApproval, To: StateApproved, Approval: &a})
	require.NoError(t, err)
}

func dispatchAndSucceed(t *testing.T, db *DB, id string) {
	t.Helper()
	_, err := db.Apply(context.Background(), id, Transition{From: StateApproved, To: StateDispatched, Attempt: 1})
	require.NoError(t, err)
	_, err = db.Apply(context.Background(), id, succeed(1))
	require.NoError(t, err)
}

func createIn(t *testing.T, db *DB, id, session string) {
	t.Helper()
	r := dispatchedRecord(id)
	r.SessionID = session
	_, err := db.Create(context.Background(), r, Event{})
	require.NoError(t, err)
	_, err = db.Apply(context.Background(), id, succeed(1))
	require.NoError(t, err)
}

func requireDamage(t *testing.T, err error, kind DamageKind, says ...string) *DamageError {
	t.Helper()
	var de *DamageError
	require.ErrorAs(t, err, &de, "%v", err)
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, kind, de.Kind, "%v", err)
	for _, s := range says {
		require.Contains(t, err.Error(), s)
	}
	return de
}

// TestWitnessRefusesRestoredCopy is issue 20's Pebble rollback: a backup
// of the whole data directory (ledger and mark) taken while a gated
// manual call was approved, restored after the call ran. The mark came
// back with the ledger, so it agrees with it; the witness, outside the
// data directory, did not, and Open refuses the copy, writing nothing.
// AcceptRestore then fences the approved call (it ran after the backup)
// and every session written after the backup, the one the backup does not
// know at all included; sessions written only before it are not fenced.
func TestWitnessRefusesRestoredCopy(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "old", "before")
	_, err := db.Create(ctx, gatedRecord("pay", "s1"), Event{})
	require.NoError(t, err)
	approve(t, db, "pay")
	require.NoError(t, db.Close())
	backup := dp.backup()
	restoredWrites := dp.readWitness().Position

	db = dp.mustOpen()
	dispatchAndSucceed(t, db, "pay")
	createIn(t, db, "later", "s2")
	require.NoError(t, db.Close())
	seen := dp.readWitness()
	require.Greater(t, seen.Position, restoredWrites)

	dp.restore(backup)
	mark, err := os.ReadFile(dp.dir() + MarkSuffix)
	require.NoError(t, err)
	_, err = dp.open()
	requireDamage(t, err, DamageBehind, dp.dir(), "behind its witness "+dp.witness,
		fmt.Sprintf("it holds %d writes, but the witness saw %d", restoredWrites, seen.Position), "AcceptRestore", "init")
	require.NotContains(t, err.Error(), "remove")
	_, err2 := dp.open()
	require.Equal(t, err.Error(), err2.Error(), "refused again, the same way")
	after, err := os.ReadFile(dp.dir() + MarkSuffix)
	require.NoError(t, err)
	require.Equal(t, mark, after, "a refusal writes neither the mark")
	require.Equal(t, seen, dp.readWitness(), "nor the witness")

	rep, err := AcceptRestore(ctx, dp.options(), RestoreAcceptance{By: "ops", Reason: "restored the 02:00 backup"})
	require.NoError(t, err)
	require.True(t, rep.Accepted)
	require.Equal(t, restoredWrites, rep.RestoredPosition)
	require.Equal(t, seen.Position, rep.WitnessedPosition)
	require.Equal(t, uint64(1), rep.Generation)
	require.False(t, rep.Unnamed)
	require.Equal(t, []FencedExecution{{ID: "pay", Namespace: DefaultNamespace, SessionID: "s1", Tool: "payments.create_payment", Was: StateApproved}}, rep.Executions)
	var fencedSessions []string
	for _, s := range rep.Sessions {
		fencedSessions = append(fencedSessions, s.SessionID)
	}
	require.ElementsMatch(t, []string{"s1", "s2"}, fencedSessions, "session before was written only before the backup")
	require.Contains(t, dp.logs.String(), "accepted a restored ledger")

	db = dp.mustOpen()
	defer db.Close()
	checkInvariants(t, db)
	pay, err := db.Get(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, StateRecoveryRequired, pay.State, "the approved call is not dispatched again")
	require.True(t, pay.Uncertain)
	evs, err := db.Events(ctx, "pay")
	require.NoError(t, err)
	last := evs[len(evs)-1]
	require.Equal(t, DecisionRestoreAccepted, last.Decision)
	require.Equal(t, "ops", last.Actor)
	require.Equal(t, "restored the 02:00 backup", last.Reason)
	// The call "later" is unknown to the restored ledger: its session is
	// fenced by a record of its own, so sending it again is refused.
	_, err = db.Get(ctx, "later")
	require.ErrorIs(t, err, ErrNotFound)
	fenced, err := db.Fenced(ctx, DefaultNamespace, "s2")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	require.Equal(t, RestoreConnector, fenced[0].Connector)
	require.Equal(t, RestoreOperation, fenced[0].Operation)
	require.Equal(t, "connhost:restore:1", fenced[0].ToolCallID)
	fenced, err = db.Fenced(ctx, DefaultNamespace, "before")
	require.NoError(t, err)
	require.Empty(t, fenced)
	require.Equal(t, uint64(1), dp.readWitness().Generation)
	require.NoError(t, db.Close())

	// The backup is older than the acceptance: behind again.
	dp.restore(backup)
	_, err = dp.open()
	requireDamage(t, err, DamageBehind, "generation")
}

// TestWitnessRefusesDeletedData: `rm -rf data` takes the ledger and its
// mark, not the witness: Open refuses instead of starting an empty
// ledger, and init starts one deliberately, setting the witness aside.
func TestWitnessRefusesDeletedData(t *testing.T) {
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "a", "s1")
	require.NoError(t, db.Close())
	old := dp.readWitness()

	require.NoError(t, os.RemoveAll(dp.data))
	_, err := dp.open()
	requireDamage(t, err, DamageMissing, dp.dir()+" is missing, and so is its mark", "witness "+dp.witness, old.Identity, "init")
	_, err = os.Stat(dp.dir())
	require.ErrorIs(t, err, os.ErrNotExist, "nothing created")
	_, err = dp.open(func(o *Options) { o.Create = CreateNever })
	requireDamage(t, err, DamageMissing)

	db = dp.mustOpen(func(o *Options) { o.Create = CreateInit })
	require.NotEqual(t, old.Identity, db.identity)
	require.NoError(t, db.Close())
	aside, err := filepath.Glob(dp.witness + ".aside-*")
	require.NoError(t, err)
	require.Len(t, aside, 1, "the old witness is kept aside")
	w := dp.readWitness()
	require.Equal(t, db.identity, w.Identity)
	require.Zero(t, w.Horizon, "a new ledger's witness names every session")
	require.Contains(t, dp.logs.String(), "created a new, empty ledger")
}

// TestWitnessRefusesAnotherLedger: another ledger's directory with its own
// mark is consistent with itself, not with the witness.
func TestWitnessRefusesAnotherLedger(t *testing.T) {
	dp, other := newDeployment(t), newDeployment(t)
	for _, d := range []*deployment{dp, other} {
		db := d.mustOpen()
		createIn(t, db, "a", "s1")
		require.NoError(t, db.Close())
	}
	dp.restore(other.data)
	_, err := dp.open()
	requireDamage(t, err, DamageIdentity, "not the one its witness "+dp.witness+" names", "init")
}

// TestWitnessUnreadableOrMissing: an unreadable witness is refused; a
// missing one (an upgrade, or an operator who removed it) is written
// again from the ledger as it is, and that is logged; the mark alone, when
// removed, no longer accepts a restored directory.
func TestWitnessUnreadableOrMissing(t *testing.T) {
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "a", "s1")
	require.NoError(t, db.Close())
	good, err := os.ReadFile(dp.witness)
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(dp.witness, []byte(`{"witness":1,"backend":"pebble"`), 0o600))
	_, err = dp.open()
	requireDamage(t, err, DamageWitness, "unreadable", dp.witness)

	require.NoError(t, os.Remove(dp.witness))
	db = dp.mustOpen()
	require.NoError(t, db.Close())
	require.Contains(t, dp.logs.String(), "had no witness; wrote one")
	w := dp.readWitness()
	require.Equal(t, uint64(2), w.Horizon, "it names the sessions written from now on")

	// A restored directory whose mark an operator removed, as the old
	// damage message advised: the witness still sees it.
	require.NoError(t, os.WriteFile(dp.witness, good, 0o600))
	backup := dp.backup()
	db = dp.mustOpen()
	createIn(t, db, "b", "s1")
	require.NoError(t, db.Close())
	dp.restore(backup)
	require.NoError(t, os.Remove(dp.dir()+MarkSuffix))
	_, err = dp.open()
	requireDamage(t, err, DamageBehind, "behind its witness")
}

// TestAcceptRestoreNamesEverySession: a witness that remembers fewer
// sessions than were written after the backup cannot name them all, and
// AcceptRestore refuses (writing nothing) unless told to accept that.
func TestAcceptRestoreNamesEverySession(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	few := func(o *Options) { o.WitnessSessions = 2 }
	db := dp.mustOpen(few)
	createIn(t, db, "a", "s0")
	require.NoError(t, db.Close())
	backup := dp.backup()
	db = dp.mustOpen(few)
	for i := range 4 {
		createIn(t, db, fmt.Sprint("c", i), fmt.Sprint("s", i+1))
	}
	require.NoError(t, db.Close())
	dp.restore(backup)
	w := dp.readWitness()

	_, err := AcceptRestore(ctx, dp.options(few), RestoreAcceptance{By: "ops", Reason: "restored"})
	require.ErrorIs(t, err, ErrUnnamedSessions)
	require.Contains(t, err.Error(), "older than the oldest session the witnesses remember")
	_, err = dp.open(few)
	requireDamage(t, err, DamageBehind)
	require.Equal(t, w, dp.readWitness(), "the refused acceptance left the witness as it was")
	db = dp.mustOpen(few, func(o *Options) { o.accepting = true })
	for i := range 4 {
		_, err := db.Get(ctx, fmt.Sprint("c", i))
		require.ErrorIs(t, err, ErrNotFound)
	}
	rec, err := db.Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, uint64(2), rec.Events, "nothing was fenced")
	require.NoError(t, db.Close())
	_, err = dp.open(few)
	requireDamage(t, err, DamageBehind, "behind its witness")

	rep, err := AcceptRestore(ctx, dp.options(few), RestoreAcceptance{By: "ops", Reason: "restored", Unnamed: true})
	require.NoError(t, err)
	require.True(t, rep.Unnamed)
	require.Len(t, rep.Sessions, 2, "the two the witness still names")
	db = dp.mustOpen(few)
	checkInvariants(t, db)
	require.NoError(t, db.Close())

	_, err = AcceptRestore(ctx, dp.options(), RestoreAcceptance{})
	require.ErrorIs(t, err, ErrInvalid, "by and reason are required")
}

// TestAcceptRestoreRevokesConsoleSessions: a backup holds a console
// session signed out after it was taken; once the restore is accepted the
// session is signed out again (every session is).
func TestAcceptRestoreRevokesConsoleSessions(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "a", "s1")
	now := time.Now()
	s := ConsoleSession{Key: ConsoleSessionKey("id"), Principal: "rita", Created: now, Expires: now.Add(time.Hour)}
	require.NoError(t, db.AddConsoleSession(ctx, s))
	require.NoError(t, db.Close())
	backup := dp.backup()
	db = dp.mustOpen()
	require.NoError(t, db.RevokeConsoleSession(ctx, s.Key, now))
	require.NoError(t, db.Close())
	dp.restore(backup)
	db = dp.mustOpen(func(o *Options) { o.accepting = true })
	got, err := db.ConsoleSession(ctx, s.Key)
	require.NoError(t, err)
	require.True(t, got.Live(now), "the backup holds the session live")
	require.NoError(t, db.Close())

	rep, err := AcceptRestore(ctx, dp.options(), RestoreAcceptance{By: "ops", Reason: "restored"})
	require.NoError(t, err)
	require.True(t, rep.Accepted)
	db = dp.mustOpen()
	got, err = db.ConsoleSession(ctx, s.Key)
	require.NoError(t, err)
	require.False(t, got.Revoked.IsZero(), "a session signed out after the backup is signed out once the restore is accepted")
	checkInvariants(t, db)
	require.NoError(t, db.Close())
}

// TestAcceptRestoreNothingToAccept: a healthy ledger is left as it is.
func TestAcceptRestoreNothingToAccept(t *testing.T) {
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "a", "s1")
	require.NoError(t, db.Close())
	w := dp.readWitness()
	rep, err := AcceptRestore(context.Background(), dp.options(), RestoreAcceptance{By: "ops", Reason: "r"})
	require.NoError(t, err)
	require.False(t, rep.Accepted)
	require.Empty(t, rep.Executions)
	require.Equal(t, w, dp.readWitness())
}

// TestAcceptRestoreWitnesses: the witness of another writer (a process
// run with another witness path) is given to AcceptRestore, or fences its
// own sessions when it is next used; a witness of another ledger is
// refused.
func TestAcceptRestoreWitnesses(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	other := filepath.Join(t.TempDir(), "other.witness")
	withOther := func(o *Options) { o.WitnessPath = other }
	db := dp.mustOpen()
	createIn(t, db, "a", "s0")
	require.NoError(t, db.Close())
	backup := dp.backup()
	db = dp.mustOpen(withOther)
	createIn(t, db, "b", "theirs")
	require.NoError(t, db.Close())
	db = dp.mustOpen()
	createIn(t, db, "c", "mine")
	require.NoError(t, db.Close())
	dp.restore(backup)

	stranger := newDeployment(t)
	sdb := stranger.mustOpen()
	require.NoError(t, sdb.Close())
	_, err := AcceptRestore(ctx, dp.options(), RestoreAcceptance{By: "ops", Reason: "r", Witnesses: []string{stranger.witness}})
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "not this one")

	rep, err := AcceptRestore(ctx, dp.options(), RestoreAcceptance{By: "ops", Reason: "r"})
	require.NoError(t, err)
	require.Len(t, rep.Sessions, 1)
	require.Equal(t, "mine", rep.Sessions[0].SessionID)

	// The other writer's witness is of the generation before: its
	// sessions are fenced when it opens the ledger next.
	db = dp.mustOpen(withOther)
	fenced, err := db.Fenced(ctx, DefaultNamespace, "theirs")
	require.NoError(t, err)
	require.Len(t, fenced, 1)
	require.Contains(t, dp.logs.String(), "fenced the sessions the witness saw written after it")
	checkInvariants(t, db)
	require.NoError(t, db.Close())
	w, err := witness.Read(other)
	require.NoError(t, err)
	require.Equal(t, uint64(1), w.Generation)
}

// TestAcceptRestoreInterrupted: an acceptance that recorded its new
// generation but stopped before it rewrote the mark and the witness (a
// crash) is completed by the next Open, not refused: the older mark is
// rewritten, the witness's sessions fenced (again: those made are found
// made).
func TestAcceptRestoreInterrupted(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "a", "s0")
	require.NoError(t, db.Close())
	backup := dp.backup()
	db = dp.mustOpen()
	createIn(t, db, "b", "s1")
	require.NoError(t, db.Close())
	dp.restore(backup)
	oldMark, err := os.ReadFile(dp.dir() + MarkSuffix)
	require.NoError(t, err)
	oldWitness, err := os.ReadFile(dp.witness)
	require.NoError(t, err)

	_, err = AcceptRestore(ctx, dp.options(), RestoreAcceptance{By: "ops", Reason: "r"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dp.dir()+MarkSuffix, oldMark, 0o644))
	require.NoError(t, os.WriteFile(dp.witness, oldWitness, 0o600))

	db = dp.mustOpen()
	defer db.Close()
	fenced, err := db.Fenced(ctx, DefaultNamespace, "s1")
	require.NoError(t, err)
	require.Len(t, fenced, 1, "one fence, not two")
	checkInvariants(t, db)
	require.Equal(t, uint64(1), dp.readWitness().Generation)
	m := readMarkFile(t, dp.dir()+MarkSuffix)
	require.Equal(t, uint64(1), m.Generation)
}

// TestWitnessFollowsTheMark: the witness is written with the mark, names
// the sessions written, and the count in it is one the directory holds.
func TestWitnessFollowsTheMark(t *testing.T) {
	dp := newDeployment(t)
	db := dp.mustOpen(func(o *Options) { o.MarkInterval = time.Millisecond })
	defer db.Close()
	createIn(t, db, "a", "s1")
	deadline := time.Now().Add(30 * time.Second) // a bound, not a timing assertion
	for {
		w := dp.readWitness()
		if w.Position == 2 {
			require.Equal(t, []witness.Session{{Namespace: DefaultNamespace, ID: "s1", Position: 2}}, w.Sessions)
			break
		}
		require.True(t, time.Now().Before(deadline), "witness still at %d", w.Position)
		time.Sleep(time.Millisecond)
	}
	v, closer, err := db.db.Get(hwmKey)
	require.NoError(t, err)
	require.Equal(t, encodeHWM(2), v)
	require.NoError(t, closer.Close())
}

func TestOptionsWitnessPath(t *testing.T) {
	o := Options{Dir: "/data/ledger", WitnessPath: "/data/ledger/w"}
	o.EnsureDefaults()
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "inside Options.Dir")
	o.WitnessPath = o.MarkPath
	require.Contains(t, o.Validate().Error(), "the mark's path")
	o.WitnessPath, o.WitnessSessions = "/data.witness", -1
	require.Contains(t, o.Validate().Error(), "WitnessSessions")
}
