package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvPostgresBin names the directory of the PostgreSQL server binaries
// (initdb, postgres) to use instead of the newest of Debian's
// /usr/lib/postgresql/*/bin.
const EnvPostgresBin = "CONNHOST_PG_BIN"

// PostgresOptions configures StartPostgres.
type PostgresOptions struct {
	// Durable keeps PostgreSQL's defaults: fsync, full-page writes and
	// synchronous commit. Benchmarks and server-crash tests need them.
	// The default (false) turns the three off: tests that only kill
	// connections or clients never lose the operating system's page
	// cache, and on a shared 2-core machine the fsyncs cost seconds.
	Durable bool
}

// Postgres is a private PostgreSQL cluster: a data directory of its own in
// a temporary directory, served on a free loopback port with trust
// authentication for the superuser "postgres". Its methods are safe for
// concurrent use.
type Postgres struct {
	bin, dir string
	port     int
	opts     PostgresOptions
	// asUser runs initdb and the server as the unprivileged user uid:gid
	// ("postgres") when this process is root: both refuse to run as root.
	asUser   bool
	uid, gid int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	next atomic.Int64
}

// PostgresUnavailable is StartPostgres's error when no PostgreSQL server is
// installed.
var PostgresUnavailable = errors.New("testenv: PostgreSQL is not installed (apt-get install postgresql, or set " + EnvPostgresBin + ")")

// StartPostgres initialises a cluster in a new temporary directory
// (initdb) and starts its server (postgres) as a child process that the
// kernel stops if this process dies. The caller must Stop it, which also
// removes the directory. Without a server installed it returns an error
// matching PostgresUnavailable.
func StartPostgres(o PostgresOptions) (*Postgres, error) {
	if !postgresSupported {
		return nil, fmt.Errorf("%w: the test clusters run on Linux only", PostgresUnavailable)
	}
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin, opts: o}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("testenv: running as root, and initdb refuses root: no user \"postgres\" to run PostgreSQL as (Debian's postgresql package creates it): %w", err)
		}
		p.uid, _ = strconv.Atoi(u.Uid)
		p.gid, _ = strconv.Atoi(u.Gid)
		p.asUser = true
	}
	p.dir, err = os.MkdirTemp("", "connhost-pg-")
	if err != nil {
		return nil, err
	}
	if p.asUser {
		if err := os.Chown(p.dir, p.uid, p.gid); err != nil {
			_ = os.RemoveAll(p.dir)
			return nil, fmt.Errorf("testenv: chown %s to postgres: %w", p.dir, err)
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", p.data(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.SysProcAttr = p.procAttr(false)
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(p.dir)
		return nil, fmt.Errorf("testenv: initdb: %w\n%s", err, out)
	}
	var startErr error
	for range 3 { // a free port can be taken before the server binds it
		if p.port, err = freePort(); err != nil {
			_ = os.RemoveAll(p.dir)
			return nil, err
		}
		if startErr = p.Start(); startErr == nil {
			return p, nil
		}
	}
	_ = os.RemoveAll(p.dir)
	return nil, startErr
}

func (p *Postgres) data() string { return filepath.Join(p.dir, "data") }

// postgresBin finds the directory holding initdb and postgres.
func postgresBin() (string, error) {
	if d := os.Getenv(EnvPostgresBin); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("testenv: %s=%s: %w", EnvPostgresBin, d, err)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { // newest major version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", PostgresUnavailable
}

// Start starts the server on the cluster's directory and port and waits
// until it accepts connections (it was started by StartPostgres; Start
// restarts it after Crash or Stop).
func (p *Postgres) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return errors.New("testenv: PostgreSQL is already running")
	}
	args := []string{"-D", p.data(), "-c", "listen_addresses=127.0.0.1", "-c", "port=" + strconv.Itoa(p.port),
		"-c", "unix_socket_directories=" + p.dir, "-c", "max_connections=300", "-c", "log_min_messages=warning"}
	if !p.opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	log, err := os.OpenFile(filepath.Join(p.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(filepath.Join(p.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// The kernel stops the server if this process dies without stopping
	// it (see procAttr).
	cmd.SysProcAttr = p.procAttr(true)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, p.DSN("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			p.cmd, p.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("testenv: postgres exited at start: %s\n%s", cmd.ProcessState, p.logTail())
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("testenv: postgres did not accept connections within 60s: %w\n%s", err, p.logTail())
		case <-time.After(20 * time.Millisecond): // poll the server's readiness
		}
	}
}

func (p *Postgres) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop signals the server and waits for it to exit.
func (p *Postgres) stop(sig os.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
	return nil
}

// Crash stops the server as a crash would: SIGQUIT, PostgreSQL's
// immediate shutdown, which writes no checkpoint, so that Start replays
// the write-ahead log. Start starts it again.
func (p *Postgres) Crash() error { return p.stop(syscall.SIGQUIT) }

// Stop shuts the server down (SIGINT, a fast shutdown) and removes its
// directory.
func (p *Postgres) Stop() error {
	err := p.stop(syscall.SIGINT)
	return errors.Join(err, os.RemoveAll(p.dir))
}

// DSN returns the connection string of database db on the cluster.
func (p *Postgres) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port, db)
}

// CreateDatabase creates a new, empty database with a unique name and
// returns its connection string.
func (p *Postgres) CreateDatabase(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	name := fmt.Sprintf("t%d", p.next.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("testenv: create database %s: %w", name, err)
	}
	return p.DSN(name), nil
}

// Exec runs sql on database "postgres" as the superuser (e.g. to end other
// sessions with pg_terminate_backend).
func (p *Postgres) Exec(ctx context.Context, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// Shared PostgreSQL cluster of a test binary.
var (
	sharedMu  sync.Mutex
	sharedPG  *Postgres
	sharedErr error
)

// SharedPostgres returns the test binary's private cluster (not durable:
// see PostgresOptions), starting it on first use. A package that calls it
// must stop it from TestMain with StopSharedPostgres. Without PostgreSQL
// installed the test is skipped, or fails when the CI environment variable
// is set (CI installs Debian's postgresql package).
func SharedPostgres(tb testing.TB) *Postgres {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedPG == nil && sharedErr == nil {
		sharedPG, sharedErr = StartPostgres(PostgresOptions{})
	}
	if sharedErr != nil {
		PostgresSkipOrFail(tb, sharedErr)
	}
	return sharedPG
}

// StopSharedPostgres stops the cluster SharedPostgres started, if any.
func StopSharedPostgres() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedPG == nil {
		return nil
	}
	err := sharedPG.Stop()
	sharedPG = nil
	return err
}

// PostgresSkipOrFail ends a test that cannot have PostgreSQL: it skips
// when PostgreSQL is not installed and CI is unset, and fails otherwise.
func PostgresSkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if errors.Is(err, PostgresUnavailable) && os.Getenv("CI") == "" {
		tb.Skipf("%v; skipping (in CI this fails)", err)
		return
	}
	tb.Fatalf("testenv: no PostgreSQL for this test: %v", err)
}

// NewPostgresDatabase creates a fresh database on the shared cluster and
// returns its connection string.
func NewPostgresDatabase(tb testing.TB) string {
	tb.Helper()
	dsn, err := SharedPostgres(tb).CreateDatabase(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return dsn
}

// ExecDSN runs sql on the database dsn names.
func ExecDSN(ctx context.Context, dsn, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// ExpireNodeLease ends a fleet node's lease on the ledger in database dsn
// now, as if the node had stopped renewing it long enough: the database's
// clock decides expiry, so a test moves the lease's row, not a clock.
func ExpireNodeLease(tb testing.TB, dsn, node string) {
	tb.Helper()
	if err := ExecDSN(context.Background(), dsn,
		`UPDATE connhost_nodes SET expires_at = clock_timestamp() - INTERVAL '1 second' WHERE node_id = $1`, node); err != nil {
		tb.Fatalf("testenv: expire the lease of node %s: %v", node, err)
	}
}

// QueryDSN runs a query that returns one row on the database dsn names
// and scans it into dest.
func QueryDSN(ctx context.Context, dsn, sql string, dest ...any) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dest...)
}

// DumpDSN dumps the database dsn names with PostgreSQL's own pg_dump, as
// an operator's backup would: a plain SQL script that drops and re-creates
// every object it holds (--clean --if-exists).
func DumpDSN(ctx context.Context, dsn string) ([]byte, error) {
	bin, err := postgresBin()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--clean", "--if-exists", "--no-owner", "-d", dsn)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("testenv: pg_dump: %w: %s", err, stderr.String())
	}
	return out, nil
}

// RestoreDSN restores a DumpDSN script into the database dsn names with
// psql, stopping at the first error, as an operator restoring a backup
// would.
func RestoreDSN(ctx context.Context, dsn string, dump []byte) error {
	bin, err := postgresBin()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-")
	cmd.Stdin = bytes.NewReader(dump)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testenv: psql restore: %w: %s", err, out)
	}
	return nil
}
