//go:build unix

package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/httpapi"
	"github.com/connhost/connhost/internal/sandbox"
	"github.com/connhost/connhost/internal/sandbox/fault"
	"github.com/connhost/connhost/internal/sandbox/mailpit"
	"github.com/connhost/connhost/internal/sandbox/stripe"
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
	t.Logf("seed %d (rerun: go test ./internal/testing/soak/ -run TestKillStorm -v -soak.seed=%d)", seed, seed)
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
	t.Logf("seed %d: duplicates %d (provider) + %d (results), lost %d; wall time %s (setup %s, storm %s)",
		seed, dups, s.dupResults.Load(), lost, time.Since(began).Round(time.Millisecond), setupTook.Round(time.Millisecond), stormTook.Round(time.Millisecond))
	if dups != 0 || s.dupResults.Load() != 0 || lost != 0 {
		s.errorf("duplicates %d + %d, lost %d: want 0, 0, 0", dups, s.dupResults.Load(), lost)
	}
}

// addLatency makes every effectful provider endpoint answer late, after
// the effect is applied (fault.Hang with Apply): a kill then often lands in
// the window that matters most, where the provider applied the call and the
// ledger has not heard of it. Without it a SIGKILL at a random moment
// almost always hits the host between calls.
func (s *soak) addLatency(ctx context.Context, rng *rand.Rand) {
	if *latencyFlag <= 0 {
		return
	}
	for _, r := range []struct {
		payments     bool
		method, path string
	}{
		{true, "POST", "/v1/payment_intents"},
		{true, "POST", "/v1/refunds"},
		{false, "POST", "/api/v1/send"},
		{false, "POST", "/api/v1/message/"}, // release
	} {
		d := time.Duration(float64(*latencyFlag) * (0.5 + rng.Float64()))
		rule := fault.Rule{Kind: fault.Hang, Method: r.method, Path: r.path, Count: -1, Apply: true, Delay: fault.Duration(d)}
		add := s.prov.AddEmailFault
		if r.payments {
			add = s.prov.AddPaymentsFault
		}
		if err := add(ctx, rule); err != nil {
			s.fatalf("provider latency on %s %s: %v", r.method, r.path, err)
		}
	}
}

func receiptOf(r httpapi.RecordView) string {
	if r.Outcome == nil {
		return ""
	}
	return r.Outcome.Receipt
}

// checkLedger checks the ledger against what the test issued and was
// told, before the final re-issue: every call is recorded, final (terminal
// or recovery_required), with the ids, tool and arguments the test sent
// and the status and receipt the runtime was given; the ledger holds
// nothing else. It returns the number of lost or stuck calls.
func (s *soak) checkLedger(recs []httpapi.RecordView, byExec map[string]*call) int {
	recByID := map[string]httpapi.RecordView{}
	for _, r := range recs {
		recByID[r.ID] = r
		if byExec[r.ID] == nil {
			s.errorf("ledger holds execution %s (%s/%s, %s.%s) that the test never issued", r.ID, r.SessionID, r.ToolCallID, r.Connector, r.Operation)
		}
	}
	lost := 0
	for _, c := range s.calls {
		r, ok := recByID[c.execID]
		switch {
		case c.execID == "":
			lost++
			s.errorf("call %s never got an answer (last %+v)", c, c.last)
		case !ok:
			lost++
			s.errorf("call %s is missing from the ledger (last seen %s)", c, c.last.Status)
		case !final(r.State):
			lost++
			s.errorf("call %s is stuck in %s after recovery", c, r.State)
		case r.SessionID != c.session || r.ToolCallID != c.toolCallID || r.Connector+"."+r.Operation != c.tool || !sameJSON(r.Args, c.args):
			s.errorf("call %s: the ledger recorded %s/%s %s.%s %s", c, r.SessionID, r.ToolCallID, r.Connector, r.Operation, r.Args)
		case c.first != nil && (string(r.State) != string(c.first.Status) || receiptOf(r) != c.first.Receipt):
			s.errorf("call %s: the runtime was told %s with receipt %q, the ledger holds %s with %q", c, c.first.Status, c.first.Receipt, r.State, receiptOf(r))
		}
	}
	return lost
}

// final reports whether a ledger state is terminal or recovery_required.
func final(st ledger.State) bool {
	switch st {
	case ledger.StateSucceeded, ledger.StateFailed, ledger.StateRejected, ledger.StateExpired,
		ledger.StateAbandoned, ledger.StateCancelled, ledger.StateRecoveryRequired:
		return true
	}
	return false
}

func terminal(st host.Status) bool {
	switch st {
	case host.StatusSucceeded, host.StatusFailed, host.StatusRejected, host.StatusExpired,
		host.StatusAbandoned, host.StatusCancelled:
		return true
	}
	return false
}

// killer SIGKILLs the host at random moments and restarts it on the same
// data directory, until ctx is done or the kill budget is spent.
func (s *soak) killer(ctx context.Context, rng *rand.Rand) error {
	// Leave room for the restarts, so that the whole budget of kills
	// usually fits in the storm.
	mean := *durationFlag / time.Duration(max(*killsFlag, 1)+2)
	for range *killsFlag {
		wait := time.Duration(float64(mean) * (0.2 + 1.6*rng.Float64()))
		tm := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil
		case <-tm.C:
		}
		// About one kill in three lands while a provider holds a call's
		// request, received and not yet processed, and the request stays
		// held for longer than the host's whole retry budget before it
		// lands: a runtime must never be told "failed" for it.
		if *holdFlag > 0 && rng.IntN(3) == 0 {
			s.holdInFlight(ctx, rng)
		}
		if s.host.kill() {
			return fmt.Errorf("connhost dev exited on its own; log tail:\n%s", s.host.logTail())
		}
		s.kills.Add(1)
		if err := s.host.start(); err != nil {
			return fmt.Errorf("restart after kill %d: %w", s.kills.Load(), err)
		}
		s.restarts.Add(1)
	}
	return nil
}

// holdInFlight makes one effectful provider endpoint hold its next request
// and waits (briefly) until one is held; the request is released, and
// takes effect, holdFlag later.
func (s *soak) holdInFlight(ctx context.Context, rng *rand.Rand) {
	eps := []struct {
		payments bool
		path     string
	}{{true, "/v1/payment_intents"}, {true, "/v1/refunds"}, {false, "/api/v1/send"}, {false, "/api/v1/message/"}}
	ep := eps[rng.IntN(len(eps))]
	rule := fault.Rule{Kind: fault.Hold, Method: "POST", Path: ep.path}
	add := s.prov.AddEmailFault
	if ep.payments {
		add = s.prov.AddPaymentsFault
	}
	// Rules are tried in order: the hold goes before the latency rules,
	// which match every request.
	if err := s.prov.ClearFaults(ctx); err != nil {
		s.errorf("clear faults: %v", err)
		return
	}
	if err := add(ctx, rule); err != nil {
		s.errorf("arm a hold on %s: %v", ep.path, err)
		return
	}
	s.addLatency(ctx, rng)
	time.AfterFunc(*holdFlag, func() { _ = s.prov.ReleaseHeld(context.WithoutCancel(ctx)) })
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if n, err := s.prov.Held(ctx); err == nil && n > 0 {
			s.inFlightKills.Add(1)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// worker issues new calls, like one agent runtime, until the storm ends,
// then finishes the call it holds (under ctx).
func (s *soak) worker(ctx, storm context.Context, w int, rng *rand.Rand) {
	for n := 0; ; n++ {
		// A model's turn between calls.
		tm := time.NewTimer(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		select {
		case <-storm.Done():
			tm.Stop()
			return
		case <-tm.C:
		}
		if s.issued.Add(1) > int64(*callsFlag) {
			s.issued.Add(-1)
			return
		}
		c := s.newCall(w, n, rng)
		if c == nil {
			s.issued.Add(-1)
			return // every session is fenced
		}
		s.drive(ctx, c, true)
	}
}

// newCall picks a session that is not known to be fenced, an operation and
// its arguments, and registers the call.
func (s *soak) newCall(w, n int, rng *rand.Rand) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var open []string
	for i := range sessions {
		if id := fmt.Sprintf("soak-s%d", i); !s.fenced[id] {
			open = append(open, id)
		}
	}
	if len(open) == 0 {
		return nil
	}
	c := &call{session: open[rng.IntN(len(open))], toolCallID: fmt.Sprintf("w%d-c%d", w, n)}
	var args any
	switch r := rng.IntN(100); {
	case r < 15 && len(s.payments) > 0:
		i := rng.IntN(len(s.payments))
		pi := s.payments[i]
		s.payments = slices.Delete(s.payments, i, i+1) // one refund per payment
		c.tool = opRefund
		args = map[string]any{"payment_intent": pi, "amount": 100 + rng.IntN(400), "reason": "requested_by_customer"}
	case r < 25 && len(s.messages) > 0:
		c.tool = opRelease
		args = map[string]any{"id": s.messages[rng.IntN(len(s.messages))], "to": fmt.Sprintf("relay-%d@example.com", w)}
	case r < 65:
		c.tool = opCreate
		args = map[string]any{"amount": 1000 + rng.IntN(9000), "currency": "usd", "payment_method": "pm_card_visa",
			"description": fmt.Sprintf("soak %s", c.toolCallID)}
	default:
		c.tool = opSend
		args = map[string]any{"to": fmt.Sprintf("soak-%d@example.com", w), "subject": "soak " + c.toolCallID,
			"text": fmt.Sprintf("kill-storm soak, seed %d, call %s", s.seed, c.toolCallID)}
	}
	c.args, _ = json.Marshal(args)
	s.calls = append(s.calls, c)
	v, _ := s.perTool.LoadOrStore(c.tool, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	return c
}

// drive issues c until it is terminal or recovery_required, as a runtime
// resuming it would: same ids, same arguments, approving it when it waits
// for approval and re-driving it after, re-issuing after every transport
// error (a kill). A session_fenced refusal marks c deferred when
// allowDefer, and is an error otherwise. It reports whether c reached a
// final status.
func (s *soak) drive(ctx context.Context, c *call, allowDefer bool) bool {
	for step := 0; ; step++ {
		if ctx.Err() != nil {
			return false
		}
		if step == maxSteps {
			s.errorf("call %s: no final status after %d requests (last %+v)", c, maxSteps, c.last)
			return false
		}
		api, gen := s.host.current()
		res, p, err := s.api.execute(ctx, api, c.request())
		switch {
		case isTransport(err):
			s.transport.Add(1)
			s.host.waitNewer(ctx, gen, 2*time.Second)
			continue
		case err != nil:
			if ctx.Err() == nil {
				s.errorf("call %s: %v", c, err)
			}
			return false
		case p != nil && p.Code == httpapi.CodeSessionFenced:
			s.refusals.Add(1)
			s.mu.Lock()
			s.fenced[c.session] = true
			s.mu.Unlock()
			if !allowDefer {
				s.errorf("call %s: session still fenced: %s", c, p.Detail)
				return false
			}
			c.deferred = true
			return false
		case p != nil && p.Code == httpapi.CodeUnavailable:
			s.host.waitNewer(ctx, gen, 2*time.Second)
			continue
		case p != nil:
			s.errorf("call %s refused: %s: %s", c, p.Code, p.Detail)
			return false
		}
		c.deferred = false
		s.observe(c, res)
		switch {
		case res.Status == host.StatusAwaitingApproval:
			if res.Approval == nil || res.Approval.ID == "" || res.Approval.ArgsDigest == "" {
				s.errorf("call %s: awaiting_approval without an approval: %+v", c, res)
				return false
			}
			_, p, err := s.api.approve(ctx, api, res.Approval.ID, res.Approval.ArgsDigest)
			switch {
			case isTransport(err):
				s.transport.Add(1)
				s.host.waitNewer(ctx, gen, 2*time.Second)
			case err != nil:
				if ctx.Err() == nil {
					s.errorf("approve %s: %v", c, err)
				}
				return false
			case p == nil:
				s.approvals.Add(1)
				c.approved = true
			case p.Code == httpapi.CodeNotAwaitingApproval:
				// Approved before a kill lost the answer.
				c.approved = true
			default:
				s.errorf("approve %s: %s: %s", c, p.Code, p.Detail)
				return false
			}
		case res.Status == host.StatusPending:
			// Approved or waiting for a scheduled retry: re-drive when due.
			d := 10 * time.Millisecond
			if !res.NextAttemptAt.IsZero() {
				d = min(max(time.Until(res.NextAttemptAt), d), 5*time.Second)
			}
			tm := time.NewTimer(d)
			select {
			case <-ctx.Done():
				tm.Stop()
				return false
			case <-tm.C:
			}
		case res.Status == host.StatusRecoveryRequired || terminal(res.Status):
			return true
		default:
			s.errorf("call %s: unexpected status %q", c, res.Status)
			return false
		}
	}
}

// observe records an answer for c: the execution id never changes, and a
// terminal answer, once given, is given again unchanged (no duplicate
// result).
func (s *soak) observe(c *call, res host.Result) {
	if res.ExecutionID == "" {
		s.errorf("call %s: answer without an execution id: %+v", c, res)
		return
	}
	if c.execID == "" {
		c.execID = res.ExecutionID
	} else if c.execID != res.ExecutionID {
		s.errorf("call %s: execution id changed to %s", c, res.ExecutionID)
	}
	c.last = res
	if a := res.Approval; a != nil {
		switch {
		case c.approvalExpiry.IsZero():
			c.approvalExpiry = a.ExpiresAt
		case !c.approvalExpiry.Equal(a.ExpiresAt):
			s.forgotten.Add(1)
			s.errorf("call %s: approval request recreated (expiry %s, was %s): the ledger lost the intent it had answered", c, a.ExpiresAt, c.approvalExpiry)
		}
	}
	if c.approved && res.Status == host.StatusAwaitingApproval {
		s.forgotten.Add(1)
		s.errorf("call %s: awaiting approval again after an answered approve: the ledger lost the approval", c)
	}
	if res.Status == host.StatusRecoveryRequired {
		c.rrSeen = true
	}
	if !terminal(res.Status) {
		if c.first != nil {
			s.dupResults.Add(1)
			s.errorf("call %s: was %s (receipt %q), now %s", c, c.first.Status, c.first.Receipt, res.Status)
		}
		return
	}
	if c.first == nil {
		r := res
		c.first = &r
		if res.Status == host.StatusSucceeded {
			s.mu.Lock()
			switch c.tool {
			case opCreate:
				s.payments = append(s.payments, res.Receipt)
			case opSend:
				s.messages = append(s.messages, res.Receipt)
			}
			s.mu.Unlock()
		}
		return
	}
	// The outcome must not change: status, receipt and result. Its source
	// may change from connector to reconciled: a lazily written outcome
	// lost at a kill (every kill loses unsynced writes here) is re-derived
	// by reconcile, and the answer says so.
	rederived := c.first.Source == "connector" && res.Source == "reconciled"
	if f := c.first; f.Status != res.Status || f.Receipt != res.Receipt || (f.Source != res.Source && !rederived) || !sameJSON(f.Result, res.Result) {
		s.dupResults.Add(1)
		s.errorf("call %s: a second, different result: first %s %q %s, now %s %q %s",
			c, f.Status, f.Receipt, f.Result, res.Status, res.Receipt, res.Result)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// reissueAll re-issues every call once more (several at a time).
func (s *soak) reissueAll(ctx context.Context) {
	ch := make(chan *call)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c := range ch {
				before := c.first
				if !s.drive(ctx, c, false) {
					s.errorf("re-issued call %s did not reach a final status (last %s)", c, c.last.Status)
				}
				if before == nil && c.first != nil && !c.rrSeen {
					s.errorf("re-issued call %s became %s only now: it was not final before", c, c.first.Status)
				}
			}
		})
	}
	for _, c := range s.calls {
		ch <- c
	}
	close(ch)
	wg.Wait()
}

// operator resolves every recovery_required execution from the providers'
// evidence, as the person on call would: the effect tagged with the
// execution exists → applied (its id is the receipt); it does not →
// not applied, dispatch again with the same key; a release (manual, the
// emulator has no release endpoint, so nothing was relayed) → abandoned.
func (s *soak) operator(ctx context.Context, api string, rr []httpapi.RecordView, byExec map[string]*call) map[string]int {
	out := map[string]int{}
	if len(rr) == 0 {
		return out
	}
	ev, err := s.evidence(ctx)
	if err != nil {
		s.fatalf("read the providers: %v", err)
	}
	for _, r := range rr {
		c := byExec[r.ID]
		if c == nil {
			s.errorf("recovery_required execution %s was never issued by the test", r.ID)
			continue
		}
		c.rrSeen = true
		req := httpapi.ResolveRequest{By: "soak-operator"}
		applied := false
		var receipt string
		var ids []string
		switch c.tool {
		case opCreate:
			ids = ev.pis[r.ID]
		case opRefund:
			ids = ev.refunds[r.ID]
		case opSend:
			ids = ev.msgs[messageID(r.IdempotencyKey)]
		case opRelease:
			req.Reason = "the provider has no release endpoint: nothing was relayed"
		}
		switch {
		case c.tool == opRelease:
		case len(ids) == 1:
			applied, receipt = true, ids[0]
			req.Receipt, req.Result = receipt, json.RawMessage(fmt.Sprintf(`{"id":%q}`, receipt))
			req.Reason = "found the effect tagged with the execution at the provider"
		case len(ids) == 0:
			req.Retry = true
			req.Reason = "no effect tagged with the execution at the provider"
		default:
			s.errorf("recovery_required %s has %d effects at the provider: %v", c, len(ids), ids)
			continue
		}
		req.Applied = &applied
		decision := "abandon"
		switch {
		case applied:
			decision = "applied"
		case req.Retry:
			decision = "retry"
		}
		res, p, err := s.api.resolve(ctx, api, r.ID, req)
		if err != nil || p != nil {
			s.errorf("resolve %s (%s): %v %+v", c, decision, err, p)
			continue
		}
		out[decision]++
		s.observe(c, res)
		if res.Status == host.StatusPending {
			s.drive(ctx, c, false)
		}
	}
	return out
}

// events reads every execution's audit trail (several at a time).
func (s *soak) events(ctx context.Context, api string, recs []httpapi.RecordView) map[string][]ledger.Event {
	var mu sync.Mutex
	out := map[string][]ledger.Event{}
	ch := make(chan string)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for id := range ch {
				v, p, err := s.api.get(ctx, api, id)
				if err != nil || p != nil {
					s.errorf("GET /v1/executions/%s: %v %+v", id, err, p)
					continue
				}
				mu.Lock()
				out[id] = v.Events
				mu.Unlock()
			}
		})
	}
	for _, r := range recs {
		ch <- r.ID
	}
	close(ch)
	wg.Wait()
	return out
}

// evidence is what the providers hold, indexed by execution: payment
// intents and refunds by metadata[connhost_execution_id], messages by
// Message-ID. Objects without the tag are listed under "".
type evidence struct {
	pis, refunds, msgs map[string][]string
	pi                 map[string]stripe.PaymentIntent
	refund             map[string]stripe.Refund
	msg                map[string]mailpit.MessageSummary
}

func newEvidence() *evidence {
	return &evidence{pis: map[string][]string{}, refunds: map[string][]string{}, msgs: map[string][]string{},
		pi: map[string]stripe.PaymentIntent{}, refund: map[string]stripe.Refund{}, msg: map[string]mailpit.MessageSummary{}}
}

func (ev *evidence) addPI(p stripe.PaymentIntent) {
	x := p.Metadata["connhost_execution_id"]
	ev.pis[x] = append(ev.pis[x], p.ID)
	ev.pi[p.ID] = p
}

func (ev *evidence) addRefund(r stripe.Refund) {
	x := r.Metadata["connhost_execution_id"]
	ev.refunds[x] = append(ev.refunds[x], r.ID)
	ev.refund[r.ID] = r
}

func (ev *evidence) addMessage(m mailpit.MessageSummary) {
	ev.msgs[m.MessageID] = append(ev.msgs[m.MessageID], m.ID)
	ev.msg[m.ID] = m
}

// evidence reads everything the providers hold, through their list APIs
// (read-after-write consistent, unlike Stripe search).
func (s *soak) evidence(ctx context.Context) (*evidence, error) {
	ev := newEvidence()
	pis, err := s.prov.PaymentIntents(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range pis {
		ev.addPI(p)
	}
	rs, err := s.prov.Refunds(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		ev.addRefund(r)
	}
	ms, err := s.prov.Messages(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		ev.addMessage(m)
	}
	return ev, nil
}

// checkProviders checks, per execution, what the providers hold against
// the policy and the ledger, and returns the number of duplicate effects.
//
//   - create_payment (idempotent-retry), refund_payment and send
//     (reconcile): at most one effect tagged with the execution; a
//     succeeded execution's receipt names that effect, and the effect
//     carries the execution's key; a failed one has none.
//   - release_message (manual): never dispatched twice (the ledger's
//     events), since nothing can tell whether a lost release happened.
//   - No effect at the providers that no execution accounts for.
func (s *soak) checkProviders(ev *evidence, recs []httpapi.RecordView, events map[string][]ledger.Event, byExec map[string]*call) int {
	dups := 0
	seenPI, seenRefund, seenMsg := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range recs {
		c := byExec[r.ID]
		if c == nil {
			continue // reported already
		}
		approvals := 0
		for _, e := range events[r.ID] {
			if e.Decision == "approved" {
				approvals++
			}
		}
		if approvals > 1 {
			s.errorf("%s was approved %d times: an answered approval gate was re-armed", c, approvals)
		}
		var ids []string
		var key func(id string) string // the connhost_key the effect carries
		switch c.tool {
		case opCreate:
			ids = ev.pis[r.ID]
			key = func(id string) string { return ev.pi[id].Metadata["connhost_key"] }
			for _, id := range ids {
				seenPI[id] = true
			}
		case opRefund:
			ids = ev.refunds[r.ID]
			key = func(id string) string { return ev.refund[id].Metadata["connhost_key"] }
			for _, id := range ids {
				seenRefund[id] = true
				var a struct {
					PaymentIntent string `json:"payment_intent"`
				}
				if err := json.Unmarshal(c.args, &a); err != nil || ev.refund[id].PaymentIntent != a.PaymentIntent {
					s.errorf("%s: refund %s is of %s, the call named %s", c, id, ev.refund[id].PaymentIntent, a.PaymentIntent)
				}
			}
		case opSend:
			ids = ev.msgs[messageID(r.IdempotencyKey)]
			key = func(string) string { return r.IdempotencyKey } // the Message-ID is derived from it
			for _, id := range ids {
				seenMsg[id] = true
			}
		case opRelease:
			dispatches := 0
			for _, e := range events[r.ID] {
				if e.To == ledger.StateDispatched {
					dispatches++
				}
			}
			if dispatches > 1 || r.Attempt > 1 {
				dups += dispatches - 1
				s.errorf("manual %s was dispatched %d times (attempt %d): %+v", c, dispatches, r.Attempt, events[r.ID])
			}
			continue
		}
		if len(ids) > 1 {
			dups += len(ids) - 1
			s.errorf("%s (%s): %d effects at the provider: %v", c, r.State, len(ids), ids)
		}
		switch r.State {
		case ledger.StateSucceeded:
			receipt := ""
			if r.Outcome != nil {
				receipt = r.Outcome.Receipt
			}
			switch {
			case len(ids) == 0:
				s.errorf("%s succeeded with receipt %q, but the provider holds no effect tagged with it", c, receipt)
			case !slices.Contains(ids, receipt):
				s.errorf("%s succeeded with receipt %q, but the effect tagged with it is %v", c, receipt, ids)
			case key(receipt) != r.IdempotencyKey:
				s.errorf("%s: effect %s carries key %q, the ledger recorded %q", c, receipt, key(receipt), r.IdempotencyKey)
			}
		case ledger.StateFailed:
			if len(ids) > 0 {
				s.errorf("%s failed, but the provider holds %v tagged with it", c, ids)
			}
		}
	}
	for id, p := range ev.pi {
		if !seenPI[id] {
			dups++
			s.errorf("payment intent %s (metadata %v) belongs to no execution", id, p.Metadata)
		}
	}
	for id, r := range ev.refund {
		if !seenRefund[id] {
			dups++
			s.errorf("refund %s (metadata %v) belongs to no execution", id, r.Metadata)
		}
	}
	for id, m := range ev.msg {
		if !seenMsg[id] {
			dups++
			s.errorf("message %s (Message-ID %s) belongs to no execution", id, m.MessageID)
		}
	}
	return dups
}
