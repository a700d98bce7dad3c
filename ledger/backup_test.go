package ledger

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBackupWhileOpen: a backup taken while the ledger is open and an
// approved call waits, restored after the call ran and another session
// wrote, fences both instead of running the call again; the replaced
// ledger is set aside, not deleted.
func TestBackupWhileOpen(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	db := dp.mustOpen()
	createIn(t, db, "old", "before")
	_, err := db.Create(ctx, gatedRecord("pay", "s1"), Event{})
	require.NoError(t, err)
	approve(t, db, "pay")

	dir := filepath.Join(t.TempDir(), "backup-1")
	info, err := db.Backup(ctx, dir)
	require.NoError(t, err)
	require.Equal(t, db.identity, info.Identity)
	require.NotZero(t, info.Position)
	_, err = db.Backup(ctx, dir)
	require.ErrorIs(t, err, ErrBackupExists, "a backup never writes over another")

	// The ledger goes on after the backup: the call runs, another
	// session writes.
	dispatchAndSucceed(t, db, "pay")
	createIn(t, db, "later", "s2")
	require.NoError(t, db.Close())
	seen := dp.readWitness().Position
	require.Greater(t, seen, info.Position)

	read, err := ReadBackup(dir)
	require.NoError(t, err)
	require.Equal(t, info, read)

	rep, got, err := RestoreBackup(ctx, dp.options(), dir, RestoreAcceptance{By: "ops", Reason: "the disk failed"})
	require.NoError(t, err)
	require.Equal(t, info, got)
	require.True(t, rep.Accepted)
	require.Equal(t, []FencedExecution{{ID: "pay", Namespace: DefaultNamespace, SessionID: "s1", Tool: "payments.create_payment", Was: StateApproved}}, rep.Executions)
	var sessions []string
	for _, s := range rep.Sessions {
		sessions = append(sessions, s.SessionID)
	}
	require.ElementsMatch(t, []string{"s1", "s2"}, sessions)
	set, err := filepath.Glob(dp.dir() + ".replaced-*")
	require.NoError(t, err)
	require.Len(t, set, 1, "the replaced ledger is set aside")

	db = dp.mustOpen()
	defer db.Close()
	checkInvariants(t, db)
	pay, err := db.Get(ctx, "pay")
	require.NoError(t, err)
	require.Equal(t, StateRecoveryRequired, pay.State, "the approved call is not dispatched again")
	fenced, err := db.Fenced(ctx, DefaultNamespace, "s2")
	require.NoError(t, err)
	require.Len(t, fenced, 1, "a call made after the backup is refused, not run again")

	_, err = ReadBackup(t.TempDir())
	require.Error(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, BackupFile), []byte("{}"), 0o600))
	_, err = ReadBackup(dir)
	require.ErrorIs(t, err, ErrCorrupt)
}

// TestRestoreBackupWhereWitnessLags: the mark and the witness lag the last
// writes, so a backup put back may not be behind what they say; it is
// behind what it replaced all the same, and its approved call is fenced.
func TestRestoreBackupWhereWitnessLags(t *testing.T) {
	ctx := context.Background()
	dp := newDeployment(t)
	db := dp.mustOpen()
	_, err := db.Create(ctx, gatedRecord("pay", "s1"), Event{})
	require.NoError(t, err)
	approve(t, db, "pay")
	dir := filepath.Join(t.TempDir(), "backup")
	info, err := db.Backup(ctx, dir)
	require.NoError(t, err)
	require.NoError(t, db.Close())
	require.Equal(t, info.Position, dp.readWitness().Position, "nothing written since the backup")

	rep, _, err := RestoreBackup(ctx, dp.options(), dir, RestoreAcceptance{By: "ops", Reason: "r"})
	require.NoError(t, err)
	require.True(t, rep.Accepted, "a backup put back is accepted as a restore, fencing what it holds unfinished")
	require.Len(t, rep.Executions, 1)
	_, _, err = RestoreBackup(ctx, dp.options(), dir, RestoreAcceptance{})
	require.ErrorIs(t, err, ErrInvalid, "a restore names its operator and reason")
}
