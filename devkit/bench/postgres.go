package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/manifests"
)

// PostgresOptions configures RunPostgres: the knobs of RunLedger, with the
// same defaults except History (100,000; Dir and SyncCallers are not
// used), and the database.
type PostgresOptions struct {
	// DSN is the database to measure on. RunPostgres works in schemas of
	// its own (connhost_bench_<random>_*), which it drops afterwards. It
	// is required.
	DSN string
	LedgerOptions
	// MaxConns is the connection pool size of both the raw baseline and
	// the ledger. The default value is pgledger.DefaultMaxConns.
	MaxConns int32
}

// PostgresReport is the result of RunPostgres. Raw is two committed
// single-row transactions per operation on the same server (an INSERT of a
// 600-byte row, then an UPDATE of it): the floor of an execution's two
// durable steps. Ledger is pgledger's Create (dispatched) and Apply
// (succeeded) of one execution. Execute is a whole execution through the
// executor as one node of a fleet on the same server (host.Execute of the
// no-op connector: argument validation, the fence check, the owned,
// lease-fenced dispatch record, the wasm call, the outcome). Figures are
// medians over the rounds and ratios medians of the per-round ratios, as
// in LedgerReport.
type PostgresReport struct {
	RawSeqMicros         float64 `json:"raw_seq_us"`
	LedgerSeqMicros      float64 `json:"ledger_seq_us"`
	SeqRatio             float64 `json:"ledger_seq_over_raw_seq"`
	RawParPerSecond      float64 `json:"raw_par_per_s"`
	LedgerParPerSecond   float64 `json:"ledger_par_per_s"`
	ParRatio             float64 `json:"ledger_par_over_raw_par"`
	ExecuteSeqMicros     float64 `json:"execute_seq_us"`
	ExecuteSeqRatio      float64 `json:"execute_seq_over_raw_seq"`
	ExecuteParPerSecond  float64 `json:"execute_par_per_s"`
	ExecuteParRatio      float64 `json:"execute_par_over_raw_par"`
	RecoverWithHistoryMs float64 `json:"recover_with_history_ms"`
	RecoverPendingOnlyMs float64 `json:"recover_pending_only_ms"`
	RecoverRatio         float64 `json:"recover_history_over_pending_only"`
	// BytesPerExecution is the size of the ledger's tables and indexes
	// (pg_total_relation_size) per execution written; WALBytesPerExecution
	// the write-ahead log the server wrote per execution.
	BytesPerExecution    float64 `json:"bytes_per_execution"`
	WALBytesPerExecution float64 `json:"wal_bytes_per_execution"`
	// HOTUpdateShare is the share of the updates of the execute run's
	// execution rows that PostgreSQL made heap-only (HOT: no index entry
	// written), from its statistics (pg_stat_user_tables).
	HOTUpdateShare float64 `json:"hot_update_share"`
	// CommitsPerExecution is the number of write transactions per
	// execution of the ledger's writes (transaction ids consumed, measured
	// on the sequential runs); ExecuteCommitsPerExecution the same for a
	// whole execution through the executor (its node's lease renewals,
	// about one in 20 s, included).
	CommitsPerExecution        float64 `json:"commits_per_execution"`
	ExecuteCommitsPerExecution float64 `json:"execute_commits_per_execution"`
	// DBOSCommitsPerStep is not measured: it is the shape DBOS documents
	// for a workflow of one step on PostgreSQL ("How Workflows Work",
	// docs.dbos.dev: the input recorded before the workflow starts, the
	// step's output, the workflow's output: three writes), printed beside
	// connhost's for comparison.
	DBOSCommitsPerStep float64 `json:"dbos_published_commits_per_one_step_workflow"`
	// The witness's cost (pgledger.Options.WitnessPath): the ledger's
	// writes with a witness against the same writes without one, each
	// execution in a session of its own, in runs of WitnessRun (each
	// holds advances of the commit position, about one a second).
	WitnessSeqMicros      float64 `json:"witness_seq_us"`
	NoWitnessSeqMicros    float64 `json:"no_witness_seq_us"`
	WitnessSeqRatio       float64 `json:"witness_seq_over_no_witness_seq"`
	WitnessParPerSecond   float64 `json:"witness_par_per_s"`
	NoWitnessParPerSecond float64 `json:"no_witness_par_per_s"`
	WitnessParRatio       float64 `json:"witness_par_over_no_witness_par"`
	Rounds                int     `json:"rounds"`
	History               int     `json:"history"`
	Pending               int     `json:"pending"`
	Concurrency           int     `json:"concurrency"`
	MaxConns              int32   `json:"max_conns"`
	ServerVersion         string  `json:"server_version"`
	GOMAXPROCS            int     `json:"gomaxprocs"`
	CPUs                  int     `json:"cpus"`
}

// RunPostgres measures the PostgreSQL ledger against the same server's raw
// baseline; see PostgresReport.
func RunPostgres(ctx context.Context, o PostgresOptions) (rep PostgresReport, err error) {
	if o.DSN == "" {
		return rep, errors.New("bench: the postgres backend needs a DSN (--dsn)")
	}
	lo := o.LedgerOptions
	if lo.History == 0 {
		lo.History = 100_000
	}
	lo.ensureDefaults()
	if o.MaxConns == 0 {
		o.MaxConns = pgledger.DefaultMaxConns
	}
	rep = PostgresReport{History: lo.History, Pending: lo.Pending, Concurrency: lo.Concurrency, Rounds: lo.Rounds,
		MaxConns: o.MaxConns, GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU(), DBOSCommitsPerStep: dbosCommitsPerStep}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	prefix := "connhost_bench_" + hex.EncodeToString(suffix[:])
	admin, err := pgx.Connect(ctx, o.DSN)
	if err != nil {
		return rep, fmt.Errorf("bench: connect: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&rep.ServerVersion); err != nil {
		return rep, err
	}
	schemas := []string{prefix + "_raw", prefix + "_ledger", prefix + "_pending", prefix + "_history", prefix + "_exec",
		prefix + "_witness", prefix + "_nowitness"}
	for _, s := range schemas {
		if _, err := admin.Exec(ctx, "CREATE SCHEMA "+s); err != nil {
			return rep, fmt.Errorf("bench: create schema %s: %w", s, err)
		}
	}
	defer func() {
		for _, s := range schemas {
			if _, derr := admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+s+" CASCADE"); derr != nil && err == nil {
				err = fmt.Errorf("bench: drop schema %s: %w", s, derr)
			}
		}
	}()
	dsn := func(schema string) (string, error) { return withSearchPath(o.DSN, schema) }

	rawDSN, err := dsn(schemas[0])
	if err != nil {
		return rep, err
	}
	raw, err := openRawPostgres(ctx, rawDSN, o.MaxConns)
	if err != nil {
		return rep, err
	}
	defer raw.pool.Close()
	ledDSN, err := dsn(schemas[1])
	if err != nil {
		return rep, err
	}
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: ledDSN, MaxConns: o.MaxConns, ApplicationName: "connhost-bench", Logger: quiet})
	if err != nil {
		return rep, err
	}
	defer led.Close()
	var seq atomic.Int64
	write := func() error { return pgCreateApply(ctx, led, seq.Add(1)) }
	rawOp := func() error { return raw.op(ctx) }

	lo.Progress("opening the executor on the ledger (building the noop connector)")
	exDSN, err := dsn(schemas[4])
	if err != nil {
		return rep, err
	}
	execute, closeEx, err := pgExecutor(ctx, exDSN, o.MaxConns, lo.Concurrency)
	if err != nil {
		return rep, err
	}
	defer closeEx()

	walStart, err := walLSN(ctx, admin)
	if err != nil {
		return rep, err
	}
	// Warm both pools and both write paths.
	if _, err := parallel(2*lo.Concurrency, lo.Concurrency, rawOp); err != nil {
		return rep, err
	}
	if _, err := parallel(2*lo.Concurrency, lo.Concurrency, write); err != nil {
		return rep, err
	}
	if _, err := parallel(2*lo.Concurrency, lo.Concurrency, execute); err != nil {
		return rep, err
	}
	var rawUs, ledUs, seqRatios, rawPerS, ledPerS, parRatios []float64
	var exeUs, exeSeqRatios, exePerS, exeParRatios []float64
	var commits, exeCommits, commitOps float64
	seqOps, parOps := max(1, lo.SeqOps/lo.Rounds), max(lo.Concurrency, lo.ParOps/lo.Rounds)
	for r := range lo.Rounds {
		lo.Progress(fmt.Sprintf("round %d of %d: raw, ledger and execute, sequential and with %d callers", r+1, lo.Rounds, lo.Concurrency))
		// Alternate which runs first, so that neither always inherits the
		// server's background work (checkpoints, autovacuum) from the
		// previous run.
		var rUs, lUs, rRate, lRate, eUs, eRate float64
		var xids, exeXids int64
		steps := []func() error{
			func() (err error) { rUs, err = sequential(seqOps, rawOp); return err },
			func() (err error) { lUs, xids, err = sequentialCommits(ctx, admin, seqOps, write); return err },
			func() (err error) { rRate, err = parallel(parOps, lo.Concurrency, rawOp); return err },
			func() (err error) { lRate, err = parallel(parOps, lo.Concurrency, write); return err },
			func() (err error) { eUs, exeXids, err = sequentialCommits(ctx, admin, seqOps, execute); return err },
			func() (err error) { eRate, err = parallel(parOps, lo.Concurrency, execute); return err },
		}
		if r%2 == 1 {
			steps[0], steps[1], steps[2], steps[3] = steps[1], steps[0], steps[3], steps[2]
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return rep, err
			}
		}
		commits += float64(xids)
		exeCommits += float64(exeXids)
		commitOps += float64(seqOps)
		rawUs, ledUs, seqRatios = append(rawUs, rUs), append(ledUs, lUs), append(seqRatios, lUs/rUs)
		rawPerS, ledPerS, parRatios = append(rawPerS, rRate), append(ledPerS, lRate), append(parRatios, lRate/rRate)
		exeUs, exeSeqRatios = append(exeUs, eUs), append(exeSeqRatios, eUs/rUs)
		exePerS, exeParRatios = append(exePerS, eRate), append(exeParRatios, eRate/rRate)
	}
	rep.ExecuteSeqMicros, rep.ExecuteSeqRatio = median(exeUs), median(exeSeqRatios)
	rep.ExecuteParPerSecond, rep.ExecuteParRatio = median(exePerS), median(exeParRatios)
	rep.RawSeqMicros, rep.LedgerSeqMicros, rep.SeqRatio = median(rawUs), median(ledUs), median(seqRatios)
	rep.RawParPerSecond, rep.LedgerParPerSecond, rep.ParRatio = median(rawPerS), median(ledPerS), median(parRatios)
	rep.CommitsPerExecution = commits / commitOps
	rep.ExecuteCommitsPerExecution = exeCommits / commitOps
	walEnd, err := walLSN(ctx, admin)
	if err != nil {
		return rep, err
	}
	total := float64(seq.Load())
	var size int64
	if err := admin.QueryRow(ctx, `SELECT sum(pg_total_relation_size(c.oid))::BIGINT FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schemas[1]).Scan(&size); err != nil {
		return rep, err
	}
	rep.BytesPerExecution = float64(size) / total
	// The WAL of the whole run, raw operations included, is charged to
	// the executions only in proportion: raw wrote as many operations.
	var rawTotal int64
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+schemas[0]+".bench_raw").Scan(&rawTotal); err != nil {
		return rep, err
	}
	ledgerWAL, err := ledgerShareOfWAL(ctx, admin, walStart, walEnd, schemas[0], rawTotal)
	if err != nil {
		return rep, err
	}
	rep.WALBytesPerExecution = ledgerWAL / total

	// The pools measured so far hold up to 3 × MaxConns connections: close
	// them, so that the witness's two ledgers fit the server's
	// max_connections (100 by default) too.
	raw.pool.Close()
	_ = led.Close()
	closeEx()
	if rep.HOTUpdateShare, err = hotShare(ctx, admin, schemas[4]); err != nil {
		return rep, err
	}
	if err := measurePostgresWitness(ctx, lo, o.MaxConns, &rep, dsn, schemas[5], schemas[6]); err != nil {
		return rep, err
	}

	lo.Progress(fmt.Sprintf("recovery: loading %d pending only", lo.Pending))
	pendDSN, err := dsn(schemas[2])
	if err != nil {
		return rep, err
	}
	if err := loadPostgres(ctx, pendDSN, 0, lo.Pending); err != nil {
		return rep, err
	}
	lo.Progress(fmt.Sprintf("recovery: loading %d pending + %d history", lo.Pending, lo.History))
	histDSN, err := dsn(schemas[3])
	if err != nil {
		return rep, err
	}
	if err := loadPostgres(ctx, histDSN, lo.History, lo.Pending); err != nil {
		return rep, err
	}
	lo.Progress("recovery: opening each ledger")
	rep.RecoverPendingOnlyMs, rep.RecoverWithHistoryMs, rep.RecoverRatio, err = compareOpens(func(dsn string) (float64, error) {
		return timeRecoverPostgres(ctx, dsn, lo.Pending)
	}, pendDSN, histDSN)
	return rep, err
}

var quiet = slog.New(slog.DiscardHandler)

// dbosCommitsPerStep is DBOS's documented shape of a one-step workflow on
// PostgreSQL (see PostgresReport.DBOSCommitsPerStep).
const dbosCommitsPerStep = 3

// withSearchPath returns dsn with its connections' search_path set to
// schema (pgx passes unknown URL parameters to the server).
func withSearchPath(dsn, schema string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("bench: --dsn: %w", err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " search_path=" + schema, nil
}

// rawPostgres is the baseline: a table of 600-byte rows, each operation an
// INSERT and then an UPDATE of one row, each its own committed
// transaction.
type rawPostgres struct {
	pool       *pgxpool.Pool
	next       atomic.Int64
	row, other []byte
}

func openRawPostgres(ctx context.Context, dsn string, maxConns int32) (*rawPostgres, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_raw (id BYTEA PRIMARY KEY, body BYTEA NOT NULL)`); err != nil {
		pool.Close()
		return nil, err
	}
	r := &rawPostgres{pool: pool, row: make([]byte, 600), other: make([]byte, 600)}
	for i := range r.row {
		r.row[i], r.other[i] = byte('a'+i%26), byte('A'+i%26)
	}
	return r, nil
}

func (r *rawPostgres) op(ctx context.Context) error {
	id := ledger.ExecutionID("bench", "raw", fmt.Sprint(r.next.Add(1)))
	if _, err := r.pool.Exec(ctx, `INSERT INTO bench_raw (id, body) VALUES ($1, $2)`, []byte(id), r.row); err != nil {
		return err
	}
	_, err := r.pool.Exec(ctx, `UPDATE bench_raw SET body = $2 WHERE id = $1`, []byte(id), r.other)
	return err
}

// pgCreateApply is the ledger side of one ungated execution, as in the
// Pebble benchmarks: Create (dispatched, ~600-byte record), then Apply
// (succeeded).
// measurePostgresWitness alternates runs of the ledger's writes with and
// without a witness (see PostgresReport), each execution in a session of
// its own, on two more schemas.
func measurePostgresWitness(ctx context.Context, lo LedgerOptions, maxConns int32, rep *PostgresReport, dsn func(string) (string, error), withSchema, withoutSchema string) error {
	dir, err := os.MkdirTemp("", "connhost-bench-witness-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	open := func(schema, witness string) (*pgledger.DB, error) {
		d, err := dsn(schema)
		if err != nil {
			return nil, err
		}
		return pgledger.Open(ctx, pgledger.Options{DSN: d, MaxConns: maxConns, ApplicationName: "connhost-bench-witness", Logger: quiet, WitnessPath: witness})
	}
	with, err := open(withSchema, filepath.Join(dir, "node.witness"))
	if err != nil {
		return err
	}
	defer with.Close()
	without, err := open(withoutSchema, "")
	if err != nil {
		return err
	}
	defer without.Close()
	var seq atomic.Int64
	writer := func(l ledger.Ledger) func() error {
		return func() error {
			i := seq.Add(1)
			return pgCreateApplyIn(ctx, l, i, fmt.Sprint("bench-", i))
		}
	}
	writeWith, writeWithout := writer(with), writer(without)
	for _, w := range []func() error{writeWith, writeWithout} {
		if _, err := parallel(2*lo.Concurrency, lo.Concurrency, w); err != nil {
			return err
		}
	}
	c, err := compareWitness(lo, writeWith, writeWithout)
	if err != nil {
		return err
	}
	rep.WitnessSeqMicros, rep.NoWitnessSeqMicros, rep.WitnessSeqRatio = c.withUs, c.withoutUs, c.seqRatio
	rep.WitnessParPerSecond, rep.NoWitnessParPerSecond, rep.WitnessParRatio = c.withPerS, c.withoutPerS, c.parRatio
	return nil
}

func pgCreateApply(ctx context.Context, l ledger.Ledger, i int64) error {
	return pgCreateApplyIn(ctx, l, i, "bench")
}

func pgCreateApplyIn(ctx context.Context, l ledger.Ledger, i int64, session string) error {
	id := ledger.ExecutionID(ledger.DefaultNamespace, session, fmt.Sprint(i))
	r := benchRecord(id, session)
	if _, err := l.Create(ctx, r, ledger.Event{Decision: "intent", Actor: "executor"}); err != nil {
		return err
	}
	_, err := l.Apply(ctx, id, ledger.Transition{From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
		Outcome: &ledger.Outcome{Kind: "ok", Source: "connector", Attempt: 1, Receipt: "pi_123", Result: []byte(`{"ok":true}`)},
		Event:   ledger.Event{Decision: "outcome", Actor: "executor"}})
	return err
}

var benchArgs = []byte(`"` + strings.Repeat("a", 398) + `"`)

func benchRecord(id, session string) ledger.Record {
	return ledger.Record{ID: id, Namespace: ledger.DefaultNamespace, SessionID: session, ToolCallID: id,
		Connector: "payments", Operation: "create_payment", Effect: "external", Policy: "idempotent-retry",
		PolicyVersion: "pv1", Args: benchArgs, ArgsDigest: strings.Repeat("d", 64),
		IdempotencyKey: ledger.IdempotencyKey(ledger.DefaultNamespace, "payments", id),
		State:          ledger.StateDispatched, Attempt: 1, MaxAttempts: 3}
}

func walLSN(ctx context.Context, conn *pgx.Conn) (string, error) {
	var lsn string
	err := conn.QueryRow(ctx, "SELECT pg_current_wal_lsn()::TEXT").Scan(&lsn)
	return lsn, err
}

// ledgerShareOfWAL returns the WAL bytes between two positions less the
// raw baseline's share, estimated as its operations times the WAL one raw
// operation writes (measured here on 200 more).
func ledgerShareOfWAL(ctx context.Context, conn *pgx.Conn, from, to, rawSchema string, rawOps int64) (float64, error) {
	var total float64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::TEXT::pg_lsn, $2::TEXT::pg_lsn)", to, from).Scan(&total); err != nil {
		return 0, err
	}
	start, err := walLSN(ctx, conn)
	if err != nil {
		return 0, err
	}
	const probe = 200
	id := make([]byte, 16)
	for range probe {
		_, _ = rand.Read(id)
		if _, err := conn.Exec(ctx, "INSERT INTO "+rawSchema+".bench_raw (id, body) VALUES ($1, $2)", id, make([]byte, 600)); err != nil {
			return 0, err
		}
		if _, err := conn.Exec(ctx, "UPDATE "+rawSchema+".bench_raw SET body = $2 WHERE id = $1", id, make([]byte, 600)); err != nil {
			return 0, err
		}
	}
	end, err := walLSN(ctx, conn)
	if err != nil {
		return 0, err
	}
	var perRaw float64
	if err := conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff($1::TEXT::pg_lsn, $2::TEXT::pg_lsn) / $3", end, start, float64(probe)).Scan(&perRaw); err != nil {
		return 0, err
	}
	return max(0, total-perRaw*float64(rawOps)), nil
}

// hotShare returns the share of the updates of schema's
// connhost_executions that were HOT updates. Closed connections report
// their statistics as they end, so it reads them until two reads agree
// (at most two seconds).
func hotShare(ctx context.Context, conn *pgx.Conn, schema string) (float64, error) {
	var upd, hot, lastUpd int64 = 0, 0, -1
	for range 20 {
		err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
WHERE schemaname = $1 AND relname = 'connhost_executions'`, schema).Scan(&upd, &hot)
		if err != nil {
			return 0, fmt.Errorf("bench: read the statistics of %s.connhost_executions: %w", schema, err)
		}
		if upd > 0 && upd == lastUpd {
			break
		}
		lastUpd = upd
		time.Sleep(100 * time.Millisecond)
	}
	if upd == 0 {
		return 0, nil
	}
	return float64(hot) / float64(upd), nil
}

// sequentialCommits is sequential(ops, fn), and the write transactions
// the server committed meanwhile (transaction ids consumed).
func sequentialCommits(ctx context.Context, admin *pgx.Conn, ops int, fn func() error) (us float64, xids int64, err error) {
	before, err := nextXID(ctx, admin)
	if err != nil {
		return 0, 0, err
	}
	if us, err = sequential(ops, fn); err != nil {
		return 0, 0, err
	}
	after, err := nextXID(ctx, admin)
	return us, after - before, err
}

// nextXID returns the next transaction id the server will assign (it
// consumes none itself: a read-only query).
func nextXID(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var x int64
	err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::TEXT::BIGINT").Scan(&x)
	return x, err
}

// loadPostgres fills a new ledger with history terminal executions and
// pending ones awaiting approval, through the ledger itself (so the rows
// are exactly what it writes), many writers at a time, then vacuums and
// analyzes its tables as a live database's autovacuum would have.
func loadPostgres(ctx context.Context, dsn string, history, pending int) error {
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, ApplicationName: "connhost-bench-load", Logger: quiet})
	if err != nil {
		return err
	}
	defer led.Close()
	// The pending executions are spread evenly through the history, as
	// the calls of a live ledger finish out of order.
	var next atomic.Int64
	n := history + pending
	stride := n / pending
	_, err = parallel(n, 32, func() error {
		i := int(next.Add(1)) - 1
		id := ledger.ExecutionID("bench", fmt.Sprint("s", i%1000), fmt.Sprint("t", i))
		if i%stride != stride-1 || i/stride >= pending {
			return pgCreateApply(ctx, led, int64(i))
		}
		r := benchRecord(id, fmt.Sprint("s", i%1000))
		r.State, r.Attempt = ledger.StateAwaitingApproval, 0
		_, err := led.Create(ctx, r, ledger.Event{Decision: "intent", Actor: "bench"})
		return err
	})
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, t := range []string{"connhost_executions", "connhost_pending", "connhost_sessions"} {
		if _, err := conn.Exec(ctx, "VACUUM ANALYZE "+t); err != nil {
			return err
		}
	}
	return nil
}

// timeRecoverPostgres measures recovery's ledger work on a database: open
// the ledger (connect, check the schema) and read every pending execution
// (Pending), in milliseconds.
func timeRecoverPostgres(ctx context.Context, dsn string, pending int) (float64, error) {
	start := time.Now()
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, ApplicationName: "connhost-bench-recover", Logger: quiet})
	if err != nil {
		return 0, err
	}
	n := 0
	err = led.Pending(ctx, func(ledger.Record) error { n++; return nil })
	ms := float64(time.Since(start)) / float64(time.Millisecond)
	_ = led.Close()
	if err != nil {
		return 0, err
	}
	if n != pending {
		return 0, fmt.Errorf("bench: recovery saw %d pending executions, loaded %d", n, pending)
	}
	return ms, nil
}

// pgExecutor opens an executor, one node of a fleet, on the PostgreSQL
// ledger dsn with the no-op connector, and returns a function that runs
// one new execution through it (noop.echo: ungated, its outcome synced).
func pgExecutor(ctx context.Context, dsn string, maxConns int32, concurrency int) (func() error, func(), error) {
	modPath, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		return nil, nil, err
	}
	m, err := manifests.Parse("noop.toml", fmt.Appendf(nil, noopManifest, digest, min(concurrency, 256)))
	if err != nil {
		return nil, nil, err
	}
	m.Connector.Module = modPath
	cache, err := os.MkdirTemp("", "connhost-bench-cache-")
	if err != nil {
		return nil, nil, err
	}
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, MaxConns: maxConns, ApplicationName: "connhost-bench-execute", Logger: quiet})
	if err != nil {
		os.RemoveAll(cache)
		return nil, nil, err
	}
	ex, err := host.Open(ctx, host.Options{Ledger: led, CloseLedger: true, Node: "bench", CacheDir: cache,
		ConsumedDir: filepath.Join(cache, "consumed"), Manifests: []*manifests.Manifest{m}, ModuleDir: "/", Logger: quiet})
	if err != nil {
		os.RemoveAll(cache)
		return nil, nil, err
	}
	if err := waitForPool(ctx, ex); err != nil {
		_ = ex.Close(context.WithoutCancel(ctx))
		os.RemoveAll(cache)
		return nil, nil, err
	}
	var seq atomic.Int64
	run := func() error {
		i := seq.Add(1)
		res, err := ex.Execute(ctx, host.ToolCall{SessionID: "bench", ToolCallID: fmt.Sprint("t", i), Tool: "noop.echo",
			Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err == nil && res.Status != host.StatusSucceeded {
			err = fmt.Errorf("bench: execute on PostgreSQL: status %s: %s", res.Status, res.Error)
		}
		return err
	}
	return run, func() {
		_ = ex.Close(context.WithoutCancel(ctx))
		os.RemoveAll(cache)
	}, nil
}
