package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/connhost/connhost/devkit/bench"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/pgledger"
	"github.com/connhost/connhost/manifests"
)

// maxConns is every PostgreSQL client's pool size (DBOS's default): more
// than the callers, so no caller waits for a connection.
const maxConns = 20

var quiet = slog.New(slog.DiscardHandler)

func init() {
	register(system{name: "postgres-raw", postgres: true, open: openPostgresRaw})
	register(system{name: "connhost-postgres", postgres: true, floor: "postgres-raw", open: openConnhostPostgres})
	register(system{name: "dbos", postgres: true, floor: "postgres-raw", open: openDBOS})
	register(system{name: "pebble-raw", open: openPebbleRaw})
	register(system{name: "connhost-pebble", floor: "pebble-raw", open: openConnhostPebble})
	register(system{name: "restate", floor: "pebble-raw", open: openRestate})
	register(system{name: "temporal", floor: "pebble-raw", open: openTemporal})
}

// createDatabase creates database name on the server of dsn and returns
// its connection string.
func createDatabase(ctx context.Context, dsn, name string) (string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	u := *cfg
	u.Database = name
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", u.User, u.Host, u.Port, name), nil
}

// openPostgresRaw is the PostgreSQL floor, as connhost bench ledger
// --backend postgres measures it: two committed single-row transactions
// per operation (an INSERT of a ~600-byte row, then an UPDATE of it).
func openPostgresRaw(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	dsn, err := e.dsn(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE bench_raw (id BYTEA PRIMARY KEY, body BYTEA NOT NULL)`); err != nil {
		pool.Close()
		return nil, nil, err
	}
	row, other := make([]byte, 600), make([]byte, 600)
	for i := range row {
		row[i], other[i] = byte('a'+i%26), byte('A'+i%26)
	}
	var next atomic.Int64
	op := func(ctx context.Context) error {
		id := []byte(ledger.ExecutionID("bench", "raw", strconv.FormatInt(next.Add(1), 10)))
		if _, err := pool.Exec(ctx, `INSERT INTO bench_raw (id, body) VALUES ($1, $2)`, id, row); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, `UPDATE bench_raw SET body = $2 WHERE id = $1`, id, other)
		return err
	}
	return op, pool.Close, nil
}

// openPebbleRaw is the Pebble floor: connhost's own raw baseline
// (bench.OpenRawBench), two synced batches per operation, in a Pebble
// database configured as the ledger's, on the disk under test.
func openPebbleRaw(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	rb, err := bench.OpenRawBench(filepath.Join(e.dir, "pebble-raw"))
	if err != nil {
		return nil, nil, err
	}
	op := func(ctx context.Context) error {
		_, _, err := rb.Run(ctx, 1, 1)
		return err
	}
	return op, func() { _ = rb.Close() }, nil
}

// noopManifest is connhost bench's no-op connector: echo is ungated,
// effect external, recovery manual, so its outcome is synced.
const noopManifest = `
[connector]
name = "noop"
version = "1.0.0"
abi = 1
module = "noop.wasm"
sha256 = "%s"
[limits]
instances = %d
[[operation]]
name = "echo"
description = "Echo the arguments."
effect = "external"
recovery = "manual"
max_attempts = 1
input_schema = '''{"type":"object","properties":{"i":{"type":"integer"}},"additionalProperties":false}'''
`

func noopConnector(ctx context.Context, e *env) (*manifests.Manifest, error) {
	modPath, digest, err := wasmbuild.Cached(ctx, filepath.Join(e.repo, "devkit/testing/testconnectors/noop"))
	if err != nil {
		return nil, fmt.Errorf("building the no-op connector from %s (--repo): %w", e.repo, err)
	}
	m, err := manifests.Parse("noop.toml", fmt.Appendf(nil, noopManifest, digest, e.callers))
	if err != nil {
		return nil, err
	}
	m.Connector.Module = modPath
	return m, nil
}

func openConnhostPostgres(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	dsn, err := e.dsn(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := noopConnector(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	led, err := pgledger.Open(ctx, pgledger.Options{DSN: dsn, MaxConns: maxConns, ApplicationName: "peerbench", Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	cache := filepath.Join(e.dir, "connhost-postgres-cache")
	ex, err := host.Open(ctx, host.Options{Ledger: led, CloseLedger: true, Node: "bench", CacheDir: cache,
		ConsumedDir: filepath.Join(cache, "consumed"), Manifests: []*manifests.Manifest{m}, ModuleDir: "/", Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	return executorOp(ctx, ex)
}

func openConnhostPebble(ctx context.Context, e *env) (func(context.Context) error, func(), error) {
	m, err := noopConnector(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	ex, err := host.Open(ctx, host.Options{DataDir: filepath.Join(e.dir, "connhost-pebble"), Manifests: []*manifests.Manifest{m},
		ModuleDir: "/", Logger: quiet})
	if err != nil {
		return nil, nil, err
	}
	return executorOp(ctx, ex)
}

// executorOp waits for ex's connector pool to fill, so that no measured
// call shares the CPUs with instantiation, and returns one new execution
// of noop.echo through it.
func executorOp(ctx context.Context, ex *host.Executor) (func(context.Context) error, func(), error) {
	stop := func() { _ = ex.Close(context.WithoutCancel(ctx)) }
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		st, _ := ex.PoolStats("noop")
		if st.Idle+st.Busy >= st.Size {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return nil, nil, fmt.Errorf("the no-op connector's pool did not fill (%d of %d)", st.Idle+st.Busy, st.Size)
		}
	}
	var seq atomic.Int64
	op := func(ctx context.Context) error {
		i := seq.Add(1)
		res, err := ex.Execute(ctx, host.ToolCall{SessionID: "bench", ToolCallID: "t" + strconv.FormatInt(i, 10), Tool: "noop.echo",
			Arguments: json.RawMessage(`{"i":` + strconv.FormatInt(i, 10) + `}`)})
		if err == nil && res.Status != host.StatusSucceeded {
			err = fmt.Errorf("execute: status %s: %s", res.Status, res.Error)
		}
		return err
	}
	return op, stop, nil
}
