//go:build unix

package soak

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
)

var (
	seedFlag     = flag.Uint64("soak.seed", 0, "seed of the kill-storm soak (0: time-based); printed in every failure")
	durationFlag = flag.Duration("soak.duration", 60*time.Second, "how long the soak issues new calls and kills the host")
	killsFlag    = flag.Int("soak.kills", 20, "how many times the soak SIGKILLs the host during the storm (at most)")
	callsFlag    = flag.Int("soak.calls", 3000, "how many calls the soak issues (at most)")
	latencyFlag  = flag.Duration("soak.latency", 150*time.Millisecond, "mean latency the providers add after applying an effect (0: none)")
	lossyFlag    = flag.Bool("soak.lose-unsynced", true, "every kill loses the ledger's unsynced writes, as a power loss would (lazily written outcomes must be re-derived)")
	holdFlag     = flag.Duration("soak.hold", 8*time.Second, "how long a provider keeps the request of a call whose host is killed in flight (0: no in-flight kills)")
)

const (
	workers  = 8
	sessions = 6
	// budget bounds everything after the build: the storm, the final
	// restart, recovery, the operator's pass and the checks. Reaching it
	// fails the test (something hung); it is not a performance target.
	budget = 4 * time.Minute
	// maxSteps bounds how many requests one call may take to reach a
	// final status (each kill costs a few).
	maxSteps = 400
)

// The operations the soak drives, with the policy the manifests declare
// for each (manifests/*.toml).
const (
	opCreate  = "payments.create_payment" // idempotent-retry: <= 1 PaymentIntent
	opRefund  = "payments.refund_payment" // reconcile: <= 1 refund
	opSend    = "email.send"              // reconcile: <= 1 message
	opRelease = "email.release_message"   // manual: never re-dispatched automatically
)

// call is one tool call the test issued: what a runtime remembers to
// resume it. Only one goroutine drives a call at a time (a worker during
// the storm, then the final phases after the workers are done).
type call struct {
	session, toolCallID, tool string
	args                      json.RawMessage

	execID   string
	deferred bool         // refused with session_fenced: left for the end
	first    *host.Result // first terminal answer
	last     host.Result
	rrSeen   bool // was recovery_required at some point
	// approvalExpiry is the expiry of the approval request the test was
	// shown; approved is set once an approve was answered. A recreated
	// request, or a request waiting again after approval, means the ledger
	// lost a state it had answered.
	approvalExpiry time.Time
	approved       bool
}

func (c *call) String() string {
	return fmt.Sprintf("%s/%s (%s, %s)", c.session, c.toolCallID, c.tool, c.execID)
}

func (c *call) request() host.ToolCall {
	return host.ToolCall{SessionID: c.session, ToolCallID: c.toolCallID, Tool: c.tool, Arguments: c.args}
}

// soak is one run: the processes, what the test issued and was told, the
// pools of objects later calls refer to, and the figures reported at the
// end. Workers share it; the fields below mu are guarded by it, counters
// are atomic.
type soak struct {
	t    *testing.T
	seed uint64
	api  *apiClient
	host *devHost
	prov *sandbox.Client

	mu       sync.Mutex
	calls    []*call
	fenced   map[string]bool
	payments []string // succeeded PaymentIntents not refunded yet
	messages []string // stored messages (Mailpit ids) of succeeded sends

	issued, transport, approvals, refusals atomic.Int64
	kills, restarts, dupResults            atomic.Int64
	inFlightKills                          atomic.Int64 // kills while a provider held a call
	forgotten                              atomic.Int64 // answers the ledger lost
	perTool                                sync.Map     // tool → *atomic.Int64

	// problems, when set, collects what errorf reports instead of failing
	// the test (the checkers' own tests).
	pmu      sync.Mutex
	problems *[]string
}

func (s *soak) errorf(format string, args ...any) {
	s.t.Helper()
	msg := fmt.Sprintf("[seed %d] "+format, append([]any{s.seed}, args...)...)
	s.pmu.Lock()
	collect := s.problems != nil
	if collect {
		*s.problems = append(*s.problems, msg)
	}
	s.pmu.Unlock()
	if !collect {
		s.t.Error(msg)
	}
}

func (s *soak) fatalf(format string, args ...any) {
	s.t.Helper()
	s.t.Fatalf("[seed %d] "+format, append([]any{s.seed}, args...)...)
}

// TestKillStorm is the bounded kill-storm soak of issue #5; see the package
// documentation and RATIONALE.md ("Kill-storm soak").
func TestKillStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("kill-storm soak: skipped with -short")
	}
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &soak{t: t, seed: seed, api: newAPIClient(), fenced: map[string]bool{}}
	t.Logf("seed %d (rerun: go test ./devkit/testing/soak/ -run TestKillStorm -v -soak.seed=%d)", seed, seed)
	began := time.Now()

	// Setup: the binary, the modules, the provider sandbox in its own
	// process, and the first generation of the host.
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		s.fatalf("%v", err)
	}
	tmp := t.TempDir()
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() {
		if t.Failed() && s.host != nil {
			t.Logf("FAILED with seed %d; host log tail:\n%s", seed, s.host.logTail())
		}
	})
	bin, err := buildBinary(t.Context(), root, tmp)
	if err != nil {
		s.fatalf("%v", err)
	}
	modules := filepath.Join(tmp, "modules")
	if err := os.Mkdir(modules, 0o755); err != nil {
		s.fatalf("%v", err)
	}
	for _, name := range []string{"payments", "email"} {
		wasm, _, err := wasmbuild.Cached(t.Context(), "plugins/"+name)
		if err != nil {
			s.fatalf("build %s module: %v", name, err)
		}
		if err := copyFile(wasm, filepath.Join(modules, name+".wasm")); err != nil {
			s.fatalf("%v", err)
		}
	}
	var urls sandbox.URLs
	sbProc, err := startProc(t, bin, root, filepath.Join(tmp, "sandbox.log"), &urls, "sandbox", "--json", "--listen", "127.0.0.1:0")
	if err != nil {
		s.fatalf("start sandbox: %v", err)
	}
	if urls.Payments == "" || urls.Email == "" {
		s.fatalf("sandbox startup line without URLs: %+v", urls)
	}
	s.prov = sandbox.NewClient(urls.Payments, urls.Email)
	s.addLatency(t.Context(), rand.New(rand.NewPCG(seed, 0x6c6174)))
	if *lossyFlag {
		// Inherited by every dev process: each kill then loses what the
		// ledger had not synced, and recovery must re-derive lazily written
		// outcomes, with the answers the workers were given.
		t.Setenv(crash.LoseUnsyncedEnv, "1")
	}
	s.host = &devHost{t: t, bin: bin, dir: root, logDir: tmp, args: []string{
		"dev", "--json", "--data", filepath.Join(tmp, "data"),
		"--manifests", filepath.Join(root, "manifests"), "--modules", modules,
		"--payments-url", urls.Payments, "--email-url", urls.Email,
	}}
	if err := s.host.start(); err != nil {
		s.fatalf("start dev: %v", err)
	}
	s.restarts.Add(1)
	setupTook := time.Since(began)

	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()

	// The storm: workers issue calls until the deadline or the call budget;
	// the killer SIGKILLs and restarts the host at random moments.
	stormEnd := time.Now().Add(*durationFlag)
	stormCtx, stopStorm := context.WithDeadline(ctx, stormEnd)
	defer stopStorm()
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		wg.Go(func() { s.worker(ctx, stormCtx, w, rng) })
	}
	var kerr error
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		kerr = s.killer(stormCtx, rand.New(rand.NewPCG(seed, 0x6b696c6c)))
	}()
	<-killerDone
	// The storm is over: no more faults, and requests still held land now,
	// so the workers can finish their calls.
	if err := s.prov.ClearFaults(ctx); err != nil {
		s.errorf("clear faults: %v", err)
	}
	if err := s.prov.ReleaseHeld(ctx); err != nil {
		s.errorf("release held requests: %v", err)
	}
	if kerr != nil {
		cancel()
		wg.Wait()
		s.fatalf("killer: %v", kerr)
	}
	wg.Wait()
	stormTook := time.Since(began) - setupTook
	if ctx.Err() != nil {
		s.fatalf("the storm did not finish within the %s budget", budget)
	}

	// A final kill and restart, then recovery before new work.
	stormKills := s.kills.Load()
	s.host.kill()
	s.kills.Add(1)
	if err := s.host.start(); err != nil {
		s.fatalf("final restart: %v", err)
	}
	s.restarts.Add(1)
	api, _ := s.host.current()
	rep, p, err := s.api.recoverAll(ctx, api)
	if err != nil || p != nil {
		s.fatalf("POST /v1/recover: %v %+v", err, p)
	}
	t.Logf("recover: pending %d, decisions %v, uncertain %d, skipped %d", rep.Pending, rep.Decisions, len(rep.Uncertain), rep.Skipped)

	byExec := map[string]*call{}
	for _, c := range s.calls {
		if c.execID != "" {
			byExec[c.execID] = c
		}
	}

	// The operator resolves what recovery could not decide, from the
	// providers' evidence; then the calls fenced sessions refused run.
	rr, err := s.api.list(ctx, api, string(ledger.StateRecoveryRequired))
	if err != nil {
		s.fatalf("%v", err)
	}
	resolutions := s.operator(ctx, api, rr, byExec)
	deferred := 0
	for _, c := range s.calls {
		if c.deferred {
			deferred++
			if !s.drive(ctx, c, false) {
				s.errorf("deferred call %s did not finish after the operator's pass (last %s)", c, c.last.Status)
			}
			if c.execID != "" {
				byExec[c.execID] = c
			}
		}
	}

	// Lost or stuck: every call the test issued must be in the ledger, in
	// a terminal state or recovery_required, before it is re-issued.
	recs, err := s.api.list(ctx, api, "")
	if err != nil {
		s.fatalf("%v", err)
	}
	lost := s.checkLedger(recs, byExec)

	// Re-issue every call once more: the same status and receipt as
	// before, no second effect.
	s.reissueAll(ctx)

	// The ledger and the providers.
	recs, err = s.api.list(ctx, api, "")
	if err != nil {
		s.fatalf("%v", err)
	}
	states := map[ledger.State]int{}
	for _, r := range recs {
		states[r.State]++
	}
	events := s.events(ctx, api, recs)
	decisions := map[string]int{}
	for _, evs := range events {
		for _, e := range evs {
			if e.Actor != "executor" {
				decisions[e.Decision]++
			}
		}
	}
	ev, err := s.evidence(ctx)
	if err != nil {
		s.fatalf("read the providers: %v", err)
	}
	dups := s.checkProviders(ev, recs, events, byExec)

	// Figures. Answers the ledger forgot count as lost calls.
	lost += int(s.forgotten.Load())
	perTool := []string{}
	s.perTool.Range(func(k, v any) bool {
		perTool = append(perTool, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(perTool)
	rrSeen := 0
	for _, c := range s.calls {
		if c.rrSeen {
			rrSeen++
		}
	}
	if sbProc.Exited() {
		s.errorf("connhost sandbox exited during the soak; log tail:\n%s", tail(sbProc.logPath, 2000))
	}
	t.Logf("seed %d: calls issued %d (%s); kills survived %d (storm %d, of them %d while a provider held a call, + final 1), restarts %d; approvals %d, transport errors %d, fenced refusals %d (deferred calls %d)",
		seed, s.issued.Load(), strings.Join(perTool, ", "), s.kills.Load(), stormKills, s.inFlightKills.Load(), s.restarts.Load(), s.approvals.Load(), s.transport.Load(), s.refusals.Load(), deferred)
	t.Logf("seed %d: decisions not taken by the executor's normal path %v; recovery_required seen %d, operator resolutions %v; final states %v",
		seed, decisions, rrSeen, resolutions, states)
	t.Logf("seed %d: duplicates %d (provider) + %d (results), lost %d; dev's notification mails set aside %d; wall time %s (setup %s, storm %s)",
		seed, dups, s.dupResults.Load(), lost, len(ev.notices), time.Since(began).Round(time.Millisecond), setupTook.Round(time.Millisecond), stormTook.Round(time.Millisecond))
	if dups != 0 || s.dupResults.Load() != 0 || lost != 0 {
		s.errorf("duplicates %d + %d, lost %d: want 0, 0, 0", dups, s.dupResults.Load(), lost)
	}
}
