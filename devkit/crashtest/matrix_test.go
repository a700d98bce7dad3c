package crashtest_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/crashtest"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

var matrixOut = flag.String("crashmatrix.out", os.Getenv("CONNHOST_CRASHMATRIX_OUT"),
	"also write the crash matrix table to this file (or set $CONNHOST_CRASHMATRIX_OUT)")

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

// TestCrashMatrix is the fault-injection matrix of docs/design.md with real process
// kills: every crash point × every operation of the shipped connectors ×
// gated/ungated, each in a fresh data directory, against `connhost
// sandbox` running as its own process (payments) and a real Mailpit
// (email). A connhost process SIGKILLs itself at the point; the call is
// then re-driven by new processes and the provider's effects are judged
// against the operation's declared recovery policy. It fails on any cell
// that breaks the policy: a duplicate effect, a lost execution, a
// manual call that was re-executed, a receipt naming nothing, a second
// different answer to the same call.
//
// The row "in_flight" kills the process while the provider holds the
// call's request (Stripe: the emulator's hold, key claimed; Mailpit: a
// proxy that keeps the received request) for longer than the host's whole
// retry budget; the call must never answer failed, and the provider must
// see one effect once the request lands.
//
// Mailpit relays released messages to itself, so release_message's
// effect is counted too. Cut to keep it short: read operations run ungated
// only (approval adds nothing a read could get wrong).
func TestCrashMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns hundreds of connhost processes")
	}
	runMatrix(t, nil)
}

// matrixPostgresEnv selects TestCrashMatrixPostgres; .ci/run sets it.
const matrixPostgresEnv = "CONNHOST_CRASHMATRIX_POSTGRES"

// TestCrashMatrixPostgres is TestCrashMatrix on the shared ledger: every
// cell runs on a fresh database of one PostgreSQL cluster (the processes
// get --ledger, and one --node per cell: a restarted process is the same
// node under a new epoch, which takes the killed epoch's calls over at
// once). The promise and the judge are the same. It runs only when
// $CONNHOST_CRASHMATRIX_POSTGRES is 1: it doubles the package's time.
func TestCrashMatrixPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns hundreds of connhost processes")
	}
	if os.Getenv(matrixPostgresEnv) != "1" {
		t.Skip("the crash matrix on PostgreSQL runs with " + matrixPostgresEnv + "=1 (.ci/run sets it)")
	}
	pg := testenv.SharedPostgres(t)
	runMatrix(t, func(ctx context.Context) (string, error) { return pg.CreateDatabase(ctx) })
}

// runMatrix runs the whole matrix for both shipped connectors, on the
// Pebble ledger or (with ledger) on a shared one.
func runMatrix(t *testing.T, ledger func(ctx context.Context) (string, error)) {
	start := time.Now()
	ctx := context.Background()
	env := newEnv(t)
	prov := crashtest.NewProvider(env.paymentsURL, env.emailURL)

	var out bytes.Buffer
	total := crashtest.Totals{}
	for _, conn := range []struct {
		name string
		cfg  map[string]string
	}{
		{"payments", map[string]string{"base_url": env.paymentsURL, "api_key": sandbox.DefaultAPIKey}},
		{"email", map[string]string{"base_url": env.emailURL}},
	} {
		cfgPath := filepath.Join(env.dir, conn.name+".connhost.toml")
		if err := crashtest.WriteConfig(cfgPath, map[string]map[string]string{conn.name: conn.cfg}); err != nil {
			t.Fatal(err)
		}
		rep, err := crashtest.Run(ctx, crashtest.Options{
			Binary:       env.binary,
			Manifest:     env.manifest[conn.name],
			Modules:      env.modules,
			Config:       cfgPath,
			Args:         prov.Args,
			Effects:      prov.Effects,
			CheckReceipt: prov.CheckReceipt,
			Receipts:     prov,
			Clock:        prov,
			Hold:         prov,
			WorkDir:      t.TempDir(),
			Ledger:       ledger,
		})
		if err != nil {
			t.Fatalf("%s: %v", conn.name, err)
		}
		if err := rep.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		out.WriteString("\n")
		for _, row := range rep.Failed() {
			t.Errorf("%s × %s.%s gated=%t: %s", row.Point, conn.name, row.Operation, row.Gated, row.Problem)
		}
		// A matrix whose points never fire proves nothing.
		if rep.Totals.Kills == 0 || rep.Totals.NA == rep.Totals.Cells {
			t.Errorf("%s: no process was killed: the crash points are not wired", conn.name)
		}
		total.Cells += rep.Totals.Cells
		total.NA += rep.Totals.NA
		total.Kills += rep.Totals.Kills
		total.Failed += rep.Totals.Failed
		total.Duplicates += rep.Totals.Duplicates
		total.Lost += rep.Totals.Lost
		total.AppliedButFailed += rep.Totals.AppliedButFailed
		total.SucceededWithoutEffect += rep.Totals.SucceededWithoutEffect
		total.EffectsUndone += rep.Totals.EffectsUndone
		total.WrongReceipts += rep.Totals.WrongReceipts
		total.Other += rep.Totals.Other
	}
	fmt.Fprintf(&out, "total: cells %d (n/a %d), kills survived %d, failed %d, duplicates beyond policy %d, executions lost %d, "+
		"applied but answered failed %d, succeeded without effect %d, effects undone %d, receipts naming another object %d, other failures %d; wall time %s\n",
		total.Cells, total.NA, total.Kills, total.Failed, total.Duplicates, total.Lost,
		total.AppliedButFailed, total.SucceededWithoutEffect, total.EffectsUndone, total.WrongReceipts, total.Other, time.Since(start).Round(time.Second))
	t.Log("\n" + out.String())
	if path := *matrixOut; path != "" {
		if ledger != nil { // matrix.txt → matrix-postgres.txt
			ext := filepath.Ext(path)
			path = strings.TrimSuffix(path, ext) + "-postgres" + ext
		}
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// TestCrashMatrixLosingUnsyncedWrites runs the points where an outcome has
// been written but maybe not synced — after the connector returned, after
// the outcome was recorded, after the answer left — with every kill
// losing the ledger's unsynced writes, as a power loss would. Lazily
// written outcomes (idempotent-retry and reconcile) are then lost, and
// recovery must re-derive them: one effect at the provider, and, where the
// caller saw an answer before the kill, that same answer.
func TestCrashMatrixLosingUnsyncedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns connhost processes")
	}
	ctx := context.Background()
	env := newEnv(t)
	prov := crashtest.NewProvider(env.paymentsURL, env.emailURL)
	var out bytes.Buffer
	for _, conn := range []struct {
		name string
		cfg  map[string]string
		ops  []string
	}{
		{"payments", map[string]string{"base_url": env.paymentsURL, "api_key": sandbox.DefaultAPIKey}, []string{"create_payment", "refund_payment"}},
		{"email", map[string]string{"base_url": env.emailURL}, []string{"send", "release_message"}},
	} {
		cfgPath := filepath.Join(env.dir, conn.name+".lossy.connhost.toml")
		if err := crashtest.WriteConfig(cfgPath, map[string]map[string]string{conn.name: conn.cfg}); err != nil {
			t.Fatal(err)
		}
		rep, err := crashtest.Run(ctx, crashtest.Options{
			Binary: env.binary, Manifest: env.manifest[conn.name], Modules: env.modules, Config: cfgPath,
			Args: prov.Args, Effects: prov.Effects, CheckReceipt: prov.CheckReceipt, Receipts: prov,
			Operations:   conn.ops,
			Points:       []string{crash.AfterPluginReturn, crash.AfterOutcomeRecord, crash.AfterAnswer},
			LoseUnsynced: true,
			WorkDir:      t.TempDir(),
		})
		if err != nil {
			t.Fatalf("%s: %v", conn.name, err)
		}
		if err := rep.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		for _, row := range rep.Failed() {
			t.Errorf("%s × %s.%s gated=%t: %s", row.Point, conn.name, row.Operation, row.Gated, row.Problem)
		}
		if rep.Totals.Kills == 0 {
			t.Errorf("%s: no process was killed", conn.name)
		}
	}
	t.Log("\n" + out.String())
}

// env is what the matrix runs against.
type env struct {
	dir                   string
	binary                string
	modules               string
	manifest              map[string]string
	paymentsURL, emailURL string
}

// newEnv builds connhost, the two shipped modules (pinned in temp copies
// of the manifests), starts `connhost sandbox` as its own process and a
// real Mailpit.
func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: t.TempDir(), manifest: map[string]string{}}
	e.binary = buildConnhost(t, root, e.dir)
	e.modules = filepath.Join(e.dir, "modules")
	if err := os.MkdirAll(filepath.Join(e.dir, "manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"payments", "email"} {
		wasm, digest, err := wasmbuild.Cached(ctx, filepath.Join("plugins", name))
		if err != nil {
			t.Fatal(err)
		}
		e.manifest[name] = pinnedCopy(t, filepath.Join(root, "manifests", name+".toml"), filepath.Join(e.dir, "manifests"), digest)
		copyFile(t, wasm, filepath.Join(e.modules, name+".wasm"))
	}
	e.paymentsURL, _ = startSandbox(t, e.binary)
	// A holding proxy in front of the real Mailpit lets the in-flight row
	// keep a send (or a release) received but unprocessed.
	e.emailURL = testenv.HoldingProxy(t, startMailpit(t, e.dir))
	return e
}

// startMailpit starts a real Mailpit whose SMTP relay is itself: a
// released message comes back as a new stored message, so the effect of
// release_message is counted like every other effect. (testenv picks the
// SMTP port; the later --smtp flag overrides it.)
func startMailpit(t *testing.T, dir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	relay := filepath.Join(dir, "relay.yml")
	if err := os.WriteFile(relay, fmt.Appendf(nil, "host: 127.0.0.1\nport: %d\n", port), 0o644); err != nil {
		t.Fatal(err)
	}
	// --max: Mailpit prunes beyond 500 messages by default, and the
	// matrix stores more than that; a pruned message would hide an effect.
	return testenv.Mailpit(t, "--smtp", fmt.Sprintf("127.0.0.1:%d", port), "--smtp-relay-config", relay, "--max", "1000000")
}

// buildConnhost builds ./cmd/connhost into dir.
func buildConnhost(t *testing.T, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "connhost")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/connhost")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/connhost: %v\n%s", err, out)
	}
	return bin
}

// pinnedCopy writes src, pinned to digest, into dir and returns its path.
func pinnedCopy(t *testing.T, src, dir, digest string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if data, err = manifests.SetSHA256(data, digest); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startSandbox runs `connhost sandbox --json` in its own process group, so
// that no kill aimed at a connhost host process can reach the provider,
// and stops it (the whole group) in t.Cleanup.
func startSandbox(t *testing.T, bin string) (paymentsURL, emailURL string) {
	t.Helper()
	p, err := proc.Start(proc.Cmd{Path: bin, Args: []string{"sandbox", "--json"}, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	var urls struct{ Payments, Email string }
	if err := p.DecodeLine(t.Context(), &urls); err != nil || !strings.HasPrefix(urls.Payments, "http://") {
		t.Fatalf("connhost sandbox printed no address: %+v %v\n%s", urls, err, p.Stderr())
	}
	return urls.Payments, urls.Email
}
