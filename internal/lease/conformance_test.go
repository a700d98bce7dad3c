package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/lease"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/ledgertest"
	"github.com/connhost/connhost/ledger/pgledger"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

var (
	quiet = slog.New(slog.DiscardHandler)
	apps  atomic.Int64
)

// store is a PostgreSQL ledger seen through one node's lease: every
// ledger the suite opens on it is node n1 registered again (a new epoch,
// as a restarted server is), which first claims what its former epoch
// left, as the executor's recovery on Open does.
type store struct {
	dsn, app string
}

// bound is a lease ledger with the fleet ledger under it, closed together.
type bound struct {
	*lease.Ledger
	db *pgledger.DB
}

func (b *bound) Close() error { return errors.Join(b.Ledger.Close(), b.db.Close()) }

// Console sessions are not the lease's to fence: the console keeps them
// in the database beneath it (host.Executor.Ledger is the unwrapped
// ledger), so the suite's ConsoleSessions scenario runs there.
var _ ledger.ConsoleSessions = (*bound)(nil)

func (b *bound) AddConsoleSession(ctx context.Context, s ledger.ConsoleSession) error {
	return b.db.AddConsoleSession(ctx, s)
}
func (b *bound) ConsoleSession(ctx context.Context, key [32]byte) (ledger.ConsoleSession, error) {
	return b.db.ConsoleSession(ctx, key)
}
func (b *bound) RevokeConsoleSession(ctx context.Context, key [32]byte, at time.Time) error {
	return b.db.RevokeConsoleSession(ctx, key, at)
}
func (b *bound) RevokeConsoleSessions(ctx context.Context, principal string, at time.Time) (int, error) {
	return b.db.RevokeConsoleSessions(ctx, principal, at)
}

func (s *store) Open(t testing.TB, now func() time.Time) ledger.Ledger {
	t.Helper()
	ctx := context.Background()
	db, err := pgledger.Open(ctx, pgledger.Options{DSN: s.dsn, Now: now, ApplicationName: s.app, Logger: quiet})
	require.NoError(t, err)
	l, err := lease.Open(ctx, db, lease.Options{Node: "n1", TTL: time.Hour, Logger: quiet})
	if err != nil {
		_ = db.Close()
		t.Fatalf("open the lease: %v", err)
	}
	if _, err := l.Claim(ctx); err != nil {
		_ = l.Close()
		_ = db.Close()
		t.Fatalf("claim: %v", err)
	}
	return &bound{Ledger: l, db: db}
}

// Crash ends the ledger's sessions from the server's side, as the death
// of its process would, and abandons its lease without releasing it.
func (s *store) Crash(t testing.TB, l ledger.Ledger) {
	t.Helper()
	err := testenv.SharedPostgres(t).Exec(context.Background(),
		`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, s.app)
	require.NoError(t, err)
	b := l.(*bound)
	b.Freeze()
	_ = b.db.Close()
}

// TestConformance runs the ledger conformance suite against the lease
// ledger: bound to a node's lease, a fleet ledger is a ledger like the
// others, with the same grammar, races and crash behaviour.
func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Backend{
		New: func(t testing.TB) ledgertest.Store {
			return &store{dsn: testenv.NewPostgresDatabase(t), app: fmt.Sprint("lease-test-", apps.Add(1))}
		},
	})
}
