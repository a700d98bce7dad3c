package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/wasmbuild"
)

// env is what every test and benchmark of the package shares, set up once
// by TestMain: the connector modules built from plugins/, one sandbox (the
// Stripe emulator, and the Mailpit emulator used only for faults a real
// Mailpit cannot produce), one real Mailpit, and the SMTP sink that Mailpit
// relays released messages to.
type env struct {
	root string // module root (holds go.mod and manifests/)

	paymentsWasm, paymentsDigest string
	emailWasm, emailDigest       string

	sb  *sandbox.Sandbox
	sbc *sandbox.Client // PaymentsURL = Stripe emulator, EmailURL = Mailpit emulator

	mailpitURL  string          // real Mailpit
	mailpit     *sandbox.Client // EmailURL = real Mailpit (read endpoints only)
	mailpitSkip string          // why the real Mailpit is unavailable (local opt-out only)
	relay       *smtpSink

	// wazeroCache is the on-disk compilation cache of every runtime the
	// tests create, so each Load compiles from the cache.
	wazeroCache string
}

var shared env

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ptb := &processTB{name: "e2e.TestMain"}
	defer ptb.runCleanups()
	if err := setup(ptb); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: setup: %v\n", err)
		return 1
	}
	return m.Run()
}

func setup(ptb *processTB) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		return err
	}
	shared.root = root
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	shared.wazeroCache = filepath.Join(cache, "connhost", "wazero-e2e")

	// Build both modules while Mailpit starts.
	var wg sync.WaitGroup
	var perr, eerr error
	wg.Go(func() { shared.paymentsWasm, shared.paymentsDigest, perr = wasmbuild.Cached(ctx, "plugins/payments") })
	wg.Go(func() { shared.emailWasm, shared.emailDigest, eerr = wasmbuild.Cached(ctx, "plugins/email") })

	// The sandbox lives until TestMain's cleanups (Start ties it to ctx).
	sb, err := sandbox.Start(context.Background(), sandbox.Options{})
	if err != nil {
		wg.Wait()
		return err
	}
	ptb.Cleanup(func() { _ = sb.Close() })
	shared.sb = sb
	shared.sbc = sb.Client()
	shared.sbc.APIKey = apiKey

	relay, err := startSMTPSink()
	if err != nil {
		wg.Wait()
		return err
	}
	ptb.Cleanup(relay.close)
	shared.relay = relay
	relayConf := filepath.Join(ptb.TempDir(), "relay.yaml")
	conf := fmt.Sprintf("host: 127.0.0.1\nport: %d\n", relay.port())
	if err := os.WriteFile(relayConf, []byte(conf), 0o600); err != nil {
		wg.Wait()
		return err
	}
	// --max 0: no pruning, so message counts only change by our sends.
	url, skip, err := ptb.try(func() string {
		return testenv.Mailpit(ptb, "--max", "0", "--smtp-relay-config", relayConf)
	})
	wg.Wait()
	if err := errors.Join(perr, eerr, err); err != nil {
		return err
	}
	shared.mailpitURL, shared.mailpitSkip = url, skip
	if url != "" {
		shared.mailpit = sandbox.NewClient("", url)
	}
	return nil
}

// needMailpit returns the real Mailpit's base URL. It skips the test only
// when testenv allowed it (CONNHOST_SKIP_MAILPIT=1 outside CI); otherwise
// TestMain has already failed the run.
func needMailpit(tb testing.TB) string {
	tb.Helper()
	if shared.mailpitURL == "" {
		tb.Skipf("real Mailpit unavailable: %s", shared.mailpitSkip)
	}
	return shared.mailpitURL
}

// processTB lets TestMain use helpers that take a testing.TB
// (testenv.Mailpit) for resources that live as long as the test binary.
// Fatal and Skip end the helper by panicking with a value try recovers.
// Methods the helpers do not use fall through to the nil embedded TB.
type processTB struct {
	testing.TB
	name     string
	mu       sync.Mutex
	cleanups []func()
}

type tbFatal struct{ msg string }
type tbSkip struct{ msg string }

// try runs f, turning a Fatal into an error and a Skip into a reason.
func (p *processTB) try(f func() string) (v, skip string, err error) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case tbFatal:
			err = errors.New(r.msg)
		case tbSkip:
			skip = r.msg
		default:
			panic(r)
		}
	}()
	return f(), "", nil
}

func (p *processTB) Helper()      {}
func (p *processTB) Name() string { return p.name }
func (p *processTB) Failed() bool { return false }
func (p *processTB) Cleanup(f func()) {
	p.mu.Lock()
	p.cleanups = append(p.cleanups, f)
	p.mu.Unlock()
}
func (p *processTB) TempDir() string {
	dir, err := os.MkdirTemp("", "connhost-e2e-")
	if err != nil {
		panic(tbFatal{err.Error()})
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
func (p *processTB) Context() context.Context   { return context.Background() }
func (p *processTB) Log(args ...any)            { fmt.Fprintln(os.Stderr, args...) }
func (p *processTB) Logf(f string, args ...any) { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (p *processTB) Fatal(args ...any)          { panic(tbFatal{fmt.Sprint(args...)}) }
func (p *processTB) Fatalf(f string, args ...any) {
	panic(tbFatal{fmt.Sprintf(f, args...)})
}
func (p *processTB) Skip(args ...any) { panic(tbSkip{fmt.Sprint(args...)}) }
func (p *processTB) Skipf(f string, args ...any) {
	panic(tbSkip{fmt.Sprintf(f, args...)})
}

// runCleanups runs the cleanups in reverse order, like testing does.
func (p *processTB) runCleanups() {
	p.mu.Lock()
	cs := p.cleanups
	p.cleanups = nil
	p.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}
