package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// ExampleExecutor_Execute executes a tool call, then repeats it with the
// same session and tool-call ids, as a runtime does when it replays a turn:
// the second answer is the recorded one and the provider sees no second
// effect. The same ids with other arguments are refused.
func ExampleExecutor_Execute() {
	ctx := context.Background()
	env := newExampleEnv(ctx, "idempotent-retry", false)
	defer env.cleanup()
	ex := env.open(ctx)
	defer ex.Close(ctx)

	call := host.ToolCall{SessionID: "session-1", ToolCallID: "call-1", Tool: "effect.apply",
		Arguments: json.RawMessage(`{"n":42,"note":"refund order 1042"}`)}
	res, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Receipt, string(res.Result))

	again, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println(again.Status, again.Receipt, "recorded:", again.Recorded)
	fmt.Println("effects:", env.prov.effectCount())

	call.Arguments = json.RawMessage(`{"n":43}`)
	_, err = ex.Execute(ctx, call)
	var mismatch *host.IntentMismatchError
	fmt.Println("other arguments, same ids:", errors.As(err, &mismatch), errors.Is(err, host.ErrIntentMismatch))
	fmt.Println("effects:", env.prov.effectCount())
	// Output:
	// succeeded r-1 {"receipt":"r-1","args":{"n":42,"note":"refund order 1042"}}
	// succeeded r-1 recorded: true
	// effects: 1
	// other arguments, same ids: true true
	// effects: 1
}

// ExampleExecutor_Approve runs an approval round trip: a call of an
// operation that requires approval is recorded as awaiting_approval without
// calling the connector; a reviewer approves it with the argument digest
// they were shown; the runtime re-drives the call (Execute with the same ids
// and arguments), which dispatches it once.
func ExampleExecutor_Approve() {
	ctx := context.Background()
	env := newExampleEnv(ctx, "idempotent-retry", true)
	defer env.cleanup()
	ex := env.open(ctx)
	defer ex.Close(ctx)

	call := host.ToolCall{SessionID: "session-1", ToolCallID: "call-1", Tool: "effect.apply",
		Arguments: json.RawMessage(`{"n":500,"note":"wire transfer"}`)}
	res, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	var pending *host.ApprovalRequiredError
	fmt.Println(res.Status, errors.As(res.Err(), &pending))
	fmt.Println("effects:", env.prov.effectCount())

	// The reviewer is shown the arguments and their digest
	// (pending.ArgsDigest, also res.Approval.ArgsDigest) and approves
	// exactly those.
	approved, err := ex.Approve(ctx, pending.ApprovalID, host.Decision{By: "rita", ArgsDigest: pending.ArgsDigest, Reason: "matches the invoice"})
	if err != nil {
		panic(err)
	}
	fmt.Println("after approval:", approved.Status, approved.Approval.Decision)

	done, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println("re-driven:", done.Status, done.Receipt)
	fmt.Println("effects:", env.prov.effectCount())

	// The approval was consumed by that dispatch; it cannot be given twice.
	_, err = ex.Approve(ctx, pending.ApprovalID, host.Decision{By: "rita", ArgsDigest: pending.ArgsDigest})
	fmt.Println("approve again:", errors.Is(err, host.ErrNotAwaitingApproval))
	// Output:
	// awaiting_approval true
	// effects: 0
	// after approval: pending approved
	// re-driven: succeeded r-1
	// effects: 1
	// approve again: true
}

// ExampleOpen_recovery stops an executor right after the connector returned
// but before the outcome was recorded, as a crash would, and opens a new
// executor on the same data directory. Open runs recovery before admitting
// new work: the operation's policy is idempotent-retry, so recovery
// dispatches attempt 2 with the same idempotency key, and the provider,
// which deduplicates by key, applies nothing twice.
func ExampleOpen_recovery() {
	ctx := context.Background()
	env := newExampleEnv(ctx, "idempotent-retry", false)
	defer env.cleanup()

	call := host.ToolCall{SessionID: "session-1", ToolCallID: "call-1", Tool: "effect.apply",
		Arguments: json.RawMessage(`{"n":7}`)}
	first := env.open(ctx)
	stopped := exampleStopAt(crash.AfterPluginReturn, func() { _, _ = first.Execute(ctx, call) })
	_ = first.Close(ctx) // a crashed process closes nothing; the ledger holds every synced write
	fmt.Println("stopped at", crash.AfterPluginReturn+":", stopped)
	fmt.Println("effects before restart:", env.prov.effectCount())

	var handled int
	env.opts.RecoveryProgress = func(done int) { handled = done }
	ex := env.open(ctx)
	defer ex.Close(ctx)
	fmt.Println("recovery on open handled:", handled)

	res, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Receipt, "attempt:", res.Attempt, "recorded:", res.Recorded)
	_, events, err := ex.Get(ctx, res.ExecutionID)
	if err != nil {
		panic(err)
	}
	for _, ev := range events {
		fmt.Printf("  %s → %s, attempt %d, by %s\n", ev.Decision, ev.To, ev.Attempt, ev.Actor)
	}
	requests, effects := env.prov.counts()
	fmt.Println("provider requests:", requests, "effects:", effects)
	// Output:
	// stopped at after_plugin_return: true
	// effects before restart: 1
	// recovery on open handled: 1
	// succeeded r-1 attempt: 2 recorded: true
	//   dispatch → dispatched, attempt 1, by executor
	//   recover_retry → dispatched, attempt 2, by recovery
	//   outcome → succeeded, attempt 2, by executor
	// provider requests: 2 effects: 1
}

// ExampleExecutor_Resolve handles a call whose outcome is unknown under the
// manual policy: after the same crash as in the Open example, recovery does
// not re-dispatch it but parks it as recovery_required, and its session is
// fenced. An operator checks the provider, resolves the call as applied,
// and the session admits new work again.
func ExampleExecutor_Resolve() {
	ctx := context.Background()
	env := newExampleEnv(ctx, "manual", false)
	defer env.cleanup()

	call := host.ToolCall{SessionID: "session-1", ToolCallID: "call-1", Tool: "effect.apply",
		Arguments: json.RawMessage(`{"n":7}`)}
	first := env.open(ctx)
	exampleStopAt(crash.AfterPluginReturn, func() { _, _ = first.Execute(ctx, call) })
	_ = first.Close(ctx)

	ex := env.open(ctx) // recovery: manual policy, so no automatic retry
	defer ex.Close(ctx)
	res, err := ex.Execute(ctx, call)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, errors.Is(res.Err(), host.ErrRecoveryRequired))
	fmt.Println("why:", res.Error)

	next := host.ToolCall{SessionID: "session-1", ToolCallID: "call-2", Tool: "effect.apply",
		Arguments: json.RawMessage(`{"n":8}`)}
	_, err = ex.Execute(ctx, next)
	var fenced *host.FencedError
	fmt.Println("fenced:", errors.As(err, &fenced), errors.Is(err, host.ErrSessionFenced))
	fmt.Println("uncertain:", len(fenced.Calls), fenced.Calls[0].ToolCallID, fenced.Calls[0].Tool)

	// The operator finds the effect at the provider and records it.
	resolved, err := ex.Resolve(ctx, fenced.Calls[0].ExecutionID, host.Resolution{
		Applied: true, Receipt: "r-1", Result: json.RawMessage(`{"receipt":"r-1"}`),
		By: "oscar", Reason: "payment r-1 found in the provider dashboard",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("resolved:", resolved.Status, resolved.Source, resolved.Receipt)

	after, err := ex.Execute(ctx, next)
	if err != nil {
		panic(err)
	}
	fmt.Println("new work:", after.Status, after.Receipt)
	fmt.Println("effects:", env.prov.effectCount())
	// Output:
	// recovery_required true
	// why: manual_policy: dispatched attempt 1 has no recorded outcome
	// fenced: true true
	// uncertain: 1 call-1 effect.apply
	// resolved: succeeded operator r-1
	// new work: succeeded r-2
	// effects: 2
}

// exampleProvider stands in for the service behind the "effect" test
// connector (POST /apply). It counts the effects it applies and, like an
// idempotent payments API, applies a repeated idempotency key (header
// X-Key) once, answering later requests with the first receipt.
type exampleProvider struct {
	mu       sync.Mutex
	requests int
	effects  int
	byKey    map[string]string // key → receipt of its effect
	srv      *httptest.Server
}

func newExampleProvider() *exampleProvider {
	p := &exampleProvider{byKey: map[string]string{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *exampleProvider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/apply" {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("X-Key")
	p.mu.Lock()
	p.requests++
	receipt, seen := p.byKey[key]
	if !seen || key == "" {
		p.effects++
		receipt = fmt.Sprintf("r-%d", p.effects)
		if key != "" {
			p.byKey[key] = receipt
		}
	}
	p.mu.Unlock()
	w.Header().Set("X-Receipt", receipt)
	fmt.Fprintf(w, `{"receipt":%q,"args":%s}`, receipt, body)
}

func (p *exampleProvider) counts() (requests, effects int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.effects
}

func (p *exampleProvider) effectCount() int {
	_, n := p.counts()
	return n
}

// exampleManifest declares the effect connector's "apply" operation with
// the recovery policy and approval setting an example needs.
const exampleManifest = `
[connector]
name = "effect"
version = "1.0.0"
abi = 1
module = %q
sha256 = %q

[capabilities]
http = [%q]
config = ["base_url"]

[limits]
timeout = "5s"

[[operation]]
name = "apply"
description = "Apply one countable effect."
effect = "external"
recovery = %q
requires_approval = %t
approval_ttl = "1h"
input_schema = '''{"type":"object","properties":{"n":{"type":"integer"},"note":{"type":"string"}},"required":["n"],"additionalProperties":false}'''
`

// exampleEnv is what one example runs on: a data directory, a provider, and
// the options that open an executor over both. Opening a second executor on
// the same directory is what a restarted process does.
type exampleEnv struct {
	dir  string
	prov *exampleProvider
	opts host.Options
}

func newExampleEnv(ctx context.Context, recovery string, requiresApproval bool) *exampleEnv {
	// Tests build connectors on demand; a deployment has a built .wasm.
	path, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/effect")
	if err != nil {
		panic(err)
	}
	dir, err := os.MkdirTemp("", "connhost-example-")
	if err != nil {
		panic(err)
	}
	prov := newExampleProvider()
	text := fmt.Sprintf(exampleManifest, filepath.Base(path), digest, prov.srv.URL, recovery, requiresApproval)
	m, err := manifests.Parse(filepath.Join(dir, "effect.toml"), []byte(text))
	if err != nil {
		panic(err)
	}
	return &exampleEnv{dir: dir, prov: prov, opts: host.Options{
		DataDir:   dir,
		Manifests: []*manifests.Manifest{m},
		ModuleDir: filepath.Dir(path),
		// One compilation cache shared by the examples, as by processes.
		CacheDir: filepath.Join(os.TempDir(), "connhost-example-cache"),
		Config: func(connector, key string) (string, bool) {
			if connector == "effect" && key == "base_url" {
				return prov.srv.URL, true
			}
			return "", false
		},
		Logger: slog.New(slog.DiscardHandler),
	}}
}

// open opens an executor on the environment's data directory; Open runs
// recovery before it returns.
func (env *exampleEnv) open(ctx context.Context) *host.Executor {
	ex, err := host.Open(ctx, env.opts)
	if err != nil {
		panic(err)
	}
	return ex
}

func (env *exampleEnv) cleanup() {
	env.prov.srv.Close()
	_ = os.RemoveAll(env.dir)
}

// exampleStopAt runs fn with the crash point armed in-process and reports
// whether fn reached it. The executor stops dead at the point: every ledger
// write before it is synced, nothing after it runs. (The crash tests do the
// same with a real SIGKILL; see package internal/crash.)
func exampleStopAt(point string, fn func()) (stopped bool) {
	type stop struct{}
	restore := crash.SetHook(func(p string) {
		if p == point {
			panic(stop{})
		}
	})
	defer restore()
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stop); !ok {
				panic(r)
			}
			stopped = true
		}
	}()
	fn()
	return false
}
