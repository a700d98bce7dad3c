package testenv

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := StopSharedPostgres(); err != nil {
		os.Stderr.WriteString("stop PostgreSQL: " + err.Error() + "\n")
		code = 1
	}
	os.Exit(code)
}

// A private cluster serves fresh databases, survives an immediate
// shutdown with its committed data, and is removed by Stop.
func TestPostgres(t *testing.T) {
	ctx := context.Background()
	p, err := StartPostgres(PostgresOptions{Durable: true})
	if err != nil {
		PostgresSkipOrFail(t, err)
	}
	defer p.Stop()
	dsn, err := p.CreateDatabase(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE x (v int); INSERT INTO x VALUES (42)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, p.Crash())
	require.NoError(t, p.Start())
	conn, err = pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	var v int
	require.NoError(t, conn.QueryRow(ctx, "SELECT v FROM x").Scan(&v))
	require.Equal(t, 42, v)
	require.NoError(t, conn.Close(ctx))

	dir := p.dir
	require.NoError(t, p.Stop())
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "cluster directory left behind: %v", err)
}

// Without PostgreSQL a test skips locally and fails in CI; any other
// failure to start fails.
func TestPostgresUnavailablePolicy(t *testing.T) {
	for _, c := range []struct {
		name, ci string
		err      error
		wantSkip bool
	}{
		{"local, not installed: skip", "", PostgresUnavailable, true},
		{"CI, not installed: fail", "true", PostgresUnavailable, false},
		{"local, broken: fail", "", errors.New("initdb: boom"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			r := &recorder{TB: t}
			PostgresSkipOrFail(r, c.err)
			require.Equal(t, c.wantSkip, r.skipped, r.msg)
			require.Equal(t, !c.wantSkip, r.failed, r.msg)
		})
	}
}
