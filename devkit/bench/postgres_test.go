package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

// TestRunPostgres runs the PostgreSQL measurement at a small scale on a
// real server: every figure is measured, an execution is two commits, and
// the bench's schemas are dropped afterwards.
func TestRunPostgres(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.NewPostgresDatabase(t)
	var phases []string
	rep, err := RunPostgres(ctx, PostgresOptions{DSN: dsn, LedgerOptions: LedgerOptions{History: 300, Pending: 20, Concurrency: 4, SeqOps: 6, ParOps: 24, Rounds: 2, WitnessRun: 50 * time.Millisecond,
		Progress: func(p string) { phases = append(phases, p) }}})
	require.NoError(t, err)
	for name, v := range map[string]float64{
		"raw_seq_us": rep.RawSeqMicros, "ledger_seq_us": rep.LedgerSeqMicros, "seq ratio": rep.SeqRatio,
		"raw_par_per_s": rep.RawParPerSecond, "ledger_par_per_s": rep.LedgerParPerSecond, "par ratio": rep.ParRatio,
		"recover_with_history_ms": rep.RecoverWithHistoryMs, "recover_pending_only_ms": rep.RecoverPendingOnlyMs,
		"recover ratio": rep.RecoverRatio, "bytes_per_execution": rep.BytesPerExecution, "wal bytes": rep.WALBytesPerExecution,
		"execute_seq_us": rep.ExecuteSeqMicros, "execute seq ratio": rep.ExecuteSeqRatio,
		"execute_par_per_s": rep.ExecuteParPerSecond, "execute par ratio": rep.ExecuteParRatio,
		"witness_seq_us": rep.WitnessSeqMicros, "witness seq ratio": rep.WitnessSeqRatio,
		"witness_par_per_s": rep.WitnessParPerSecond, "witness par ratio": rep.WitnessParRatio,
		"hot update share": rep.HOTUpdateShare,
	} {
		require.Positive(t, v, name)
	}
	// Two write transactions per execution (an autovacuum ANALYZE in the
	// window may add one).
	require.GreaterOrEqual(t, rep.CommitsPerExecution, 2.0)
	require.LessOrEqual(t, rep.CommitsPerExecution, 2.5)
	// So is a whole execution through the executor (a lease renewal may
	// add one), against DBOS's three.
	require.GreaterOrEqual(t, rep.ExecuteCommitsPerExecution, 2.0)
	require.LessOrEqual(t, rep.ExecuteCommitsPerExecution, 2.5)
	require.Equal(t, 3.0, rep.DBOSCommitsPerStep)
	require.Contains(t, phases, "round 2 of 2: raw, ledger and execute, sequential and with 4 callers")
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'connhost_bench_%'`).Scan(&n))
	require.Zero(t, n, "bench schemas left behind")

	_, err = RunPostgres(ctx, PostgresOptions{})
	require.ErrorContains(t, err, "DSN")
}

func TestWithSearchPath(t *testing.T) {
	got, err := withSearchPath("postgres://u@h:5/db?sslmode=disable", "s1")
	require.NoError(t, err)
	require.Equal(t, "postgres://u@h:5/db?search_path=s1&sslmode=disable", got)
	got, err = withSearchPath("host=h dbname=db", "s1")
	require.NoError(t, err)
	require.Equal(t, "host=h dbname=db search_path=s1", got)
}
