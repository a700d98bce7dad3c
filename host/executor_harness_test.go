package host_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// provider is the fault-injecting service behind the "effect" test
// connector. It counts every effect it applies, so a test can assert what
// the outside world saw, not what the host believes.
type provider struct {
	mu sync.Mutex
	// dedup makes it honour keys like an idempotent provider: a repeated
	// key replays the first receipt and applies nothing.
	dedup   bool
	effects int
	byKey   map[string]string // key → receipt of the first effect
	keyless int
	// faults is consumed one per /apply request: "" (normal), "503",
	// "400", "409", "apply_then_503", "apply_then_hang", "hold" (park the
	// request, its key claimed, until release; meanwhile a request with
	// the same key is answered 409 as by an idempotent provider; then
	// apply, whether or not the client is still there).
	faults []string
	// inflight holds the keys of held requests; held is signalled when a
	// request parks, release lets the parked ones go.
	inflight map[string]bool
	held     chan struct{}
	release  chan struct{}
	// lookup overrides /lookup: "" (normal), "500".
	lookup string
	// readHang makes every /read hang until the client gives up.
	readHang bool
	reads    int
	srv      *httptest.Server
}

func newProvider(t *testing.T) *provider {
	p := &provider{byKey: map[string]string{}, inflight: map[string]bool{}, held: make(chan struct{}, 16), release: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	// A test that fails while a request is held must not hang in Close.
	t.Cleanup(p.releaseHeld)
	return p
}

func (p *provider) inject(faults ...string) {
	p.mu.Lock()
	p.faults = append(p.faults, faults...)
	p.mu.Unlock()
}

// waitHeld waits until a request is parked by a "hold" fault.
func (p *provider) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-p.held:
	case <-time.After(30 * time.Second):
		t.Fatal("no request was held")
	}
}

// releaseHeld lets every parked request go on and apply its effect.
func (p *provider) releaseHeld() {
	p.mu.Lock()
	close(p.release)
	p.release = make(chan struct{})
	p.mu.Unlock()
}

// hangReads sets whether every /read hangs until its client gives up.
func (p *provider) hangReads(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.readHang = on
}

// readCount is the number of /read requests received.
func (p *provider) readCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.effects
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	switch r.URL.Path {
	case "/apply":
		body, _ := io.ReadAll(r.Body)
		fault := ""
		if len(p.faults) > 0 {
			fault, p.faults = p.faults[0], p.faults[1:]
		}
		key := r.Header.Get("X-Key")
		if p.dedup && key != "" && p.inflight[key] {
			p.mu.Unlock()
			http.Error(w, "a request with this key is in progress", 409)
			return
		}
		switch fault {
		case "503", "400", "409":
			p.mu.Unlock()
			code := map[string]int{"503": 503, "400": 400, "409": 409}[fault]
			http.Error(w, "injected", code)
			return
		case "hold":
			p.inflight[key] = true
			release := p.release
			p.mu.Unlock()
			p.held <- struct{}{}
			<-release
			p.mu.Lock()
			delete(p.inflight, key)
		}
		receipt, replay := p.byKey[key]
		if !(p.dedup && replay && key != "") {
			p.effects++
			receipt = fmt.Sprintf("r-%d", p.effects)
			if key != "" {
				if _, seen := p.byKey[key]; !seen {
					p.byKey[key] = receipt
				}
			} else {
				p.keyless++
			}
		}
		p.mu.Unlock()
		switch fault {
		case "apply_then_503":
			http.Error(w, "applied, then failed", 503)
			return
		case "apply_then_hang":
			<-r.Context().Done()
			return
		}
		w.Header().Set("X-Receipt", receipt)
		_, _ = w.Write([]byte(`{"receipt":"` + receipt + `","args":` + string(body) + `}`))
	case "/lookup":
		mode, receipt, ok := p.lookup, "", false
		receipt, ok = p.byKey[r.URL.Query().Get("key")]
		p.mu.Unlock()
		switch {
		case mode == "500":
			http.Error(w, "injected", 500)
		case ok:
			w.Header().Set("X-Receipt", receipt)
			_, _ = w.Write([]byte(`{"receipt":"` + receipt + `","found":true}`))
		default:
			http.NotFound(w, r)
		}
	case "/read":
		p.reads++
		hang := p.readHang
		p.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(`{"read":true}`))
	default:
		p.mu.Unlock()
		http.NotFound(w, r)
	}
}

var (
	effectOnce   sync.Once
	effectPath   string
	effectDigest string
	effectErr    error
)

func effectModule(t *testing.T) (string, string) {
	t.Helper()
	effectOnce.Do(func() {
		effectPath, effectDigest, effectErr = wasmbuild.Cached(context.Background(), "devkit/testing/testconnectors/effect")
	})
	require.NoError(t, effectErr)
	return effectPath, effectDigest
}

const effectManifest = `
[connector]
name = "effect"
version = "1.0.0"
abi = 1
module = "effect.wasm"
sha256 = "%s"

[capabilities]
http = ["%s"]
config = ["base_url"]

[limits]
timeout = "%s"
instances = 2

[[operation]]
name = "apply"
description = "Apply one countable effect."
effect = "external"
recovery = "%s"
requires_approval = %t
approval_ttl = "1h"
max_attempts = %d
input_schema = '''{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"],"additionalProperties":false}'''

[[operation]]
name = "read"
description = "Read without effect."
effect = "read"
max_attempts = 3
input_schema = '''{"type":"object","additionalProperties":false}'''
`

// harness is one executor over one data directory and one provider. reopen
// simulates a restart: close, open again on the same directory (which runs
// recovery).
type harness struct {
	t        *testing.T
	dir      string
	prov     *provider
	policy   string
	approval bool
	attempts int
	// extra is appended to the manifest (e.g. a [provider] table).
	extra string
	// applyFields are set on the "apply" operation of the manifest.
	applyFields map[string]any
	// timeout is the connector's [limits] timeout ("2s" when empty).
	timeout string
	ex      *host.Executor
	now     time.Time
	mu      sync.Mutex
}

type harnessOpt func(*harness)

func withApproval() harnessOpt      { return func(h *harness) { h.approval = true } }
func withAttempts(n int) harnessOpt { return func(h *harness) { h.attempts = n } }
func withDedup() harnessOpt         { return func(h *harness) { h.prov.dedup = true } }

// withManifestText appends text to the harness's manifest.
func withManifestText(text string) harnessOpt { return func(h *harness) { h.extra = text } }

// withTimeout sets the connector's [limits] timeout.
func withTimeout(d string) harnessOpt { return func(h *harness) { h.timeout = d } }

// withApplyField sets key = value on the manifest's "apply" operation.
func withApplyField(key string, value any) harnessOpt {
	return func(h *harness) {
		if h.applyFields == nil {
			h.applyFields = map[string]any{}
		}
		h.applyFields[key] = value
	}
}

func newHarness(t *testing.T, policy string, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), prov: newProvider(t), policy: policy, attempts: 3,
		now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	for _, o := range opts {
		o(h)
	}
	h.open()
	t.Cleanup(func() {
		if h.ex != nil {
			_ = h.ex.Close(context.Background())
		}
	})
	return h
}

func (h *harness) clock() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *harness) advance(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

func (h *harness) manifest() *manifests.Manifest {
	path, digest := effectModule(h.t)
	timeout := h.timeout
	if timeout == "" {
		timeout = "2s"
	}
	text := []byte(fmt.Sprintf(effectManifest, digest, h.prov.srv.URL, timeout, h.policy, h.approval, h.attempts) + h.extra)
	for k, v := range h.applyFields {
		var err error
		text, err = manifests.SetOperationField(text, "apply", k, v)
		require.NoError(h.t, err)
	}
	m, err := manifests.Parse(h.dir+"/effect.toml", text)
	require.NoError(h.t, err)
	m.Connector.Module = path // absolute: resolved as is
	return m
}

// options are the Options open uses: the harness's clock and provider,
// millisecond retry and in-flight backoffs and a one-second inline wait.
func (h *harness) options() host.Options {
	return host.Options{
		DataDir: h.dir,
		// One compilation cache for every harness: compiling the module
		// again for each test costs seconds (tens under -race).
		CacheDir:  filepath.Join(os.TempDir(), "connhost-example-cache"),
		Manifests: []*manifests.Manifest{h.manifest()},
		ModuleDir: "/",
		Now:       h.clock,
		Config: func(connector, key string) (string, bool) {
			if connector == "effect" && key == "base_url" {
				return h.prov.srv.URL, true
			}
			return "", false
		},
		RetryBackoff:       func(int) time.Duration { return time.Millisecond },
		InFlightBackoff:    func(int) time.Duration { return time.Millisecond },
		MaxInlineRetryWait: time.Second,
	}
}

func (h *harness) open() {
	h.t.Helper()
	ex, err := host.Open(context.Background(), h.options())
	require.NoError(h.t, err)
	h.ex = ex
}

// reopenWith closes the executor and opens a new one on the same data
// directory with open's options changed by adjust.
func (h *harness) reopenWith(adjust func(*host.Options)) {
	h.t.Helper()
	require.NoError(h.t, h.ex.Close(context.Background()))
	h.ex = nil
	o := h.options()
	adjust(&o)
	ex, err := host.Open(context.Background(), o)
	require.NoError(h.t, err)
	h.ex = ex
}

// reopen closes the executor and opens a new one on the same data
// directory, as a restarted process would; Open runs recovery.
func (h *harness) reopen() {
	h.t.Helper()
	require.NoError(h.t, h.ex.Close(context.Background()))
	h.ex = nil
	h.open()
}

func call(session, toolCall string, args string) host.ToolCall {
	return host.ToolCall{SessionID: session, ToolCallID: toolCall, Tool: "effect.apply", Arguments: json.RawMessage(args)}
}

func (h *harness) exec(c host.ToolCall) host.Result {
	h.t.Helper()
	res, err := h.ex.Execute(context.Background(), c)
	require.NoError(h.t, err)
	return res
}

// crashed is the panic value of an in-process crash point.
type crashed struct{ point string }

// execCrashAt runs c with the crash point armed in-process: the executor
// stops dead at the point (every ledger write before it is synced, nothing
// after it runs). The real SIGKILL version of this lives in the crash
// matrix suite.
func (h *harness) execCrashAt(point string, c host.ToolCall) {
	h.t.Helper()
	h.crashDuring(point, func() { _, _ = h.ex.Execute(context.Background(), c) })
}

func (h *harness) crashDuring(point string, fn func()) {
	h.t.Helper()
	restore := crash.SetHook(func(p string) {
		if p == point {
			panic(crashed{p})
		}
	})
	defer restore()
	hit := func() (hit bool) {
		defer func() {
			if r := recover(); r != nil {
				if c, ok := r.(crashed); ok && c.point == point {
					hit = true
					return
				}
				panic(r)
			}
		}()
		fn()
		return false
	}()
	require.True(h.t, hit, "crash point %s was never reached", point)
}

func (h *harness) events(id string) []string {
	h.t.Helper()
	_, evs, err := h.ex.Get(context.Background(), id)
	require.NoError(h.t, err)
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = fmt.Sprintf("%s>%s#%d", ev.Decision, ev.To, ev.Attempt)
	}
	return out
}

func joined(s []string) string { return strings.Join(s, " ") }
