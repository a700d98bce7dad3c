//go:build linux

package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/devkit/testing/trail"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.StopSharedPostgres(); err != nil {
		fmt.Fprintln(os.Stderr, "stop PostgreSQL:", err)
		code = 1
	}
	os.Exit(code)
}

const (
	workers = 6
	// leaseTTL is the nodes' lease: the others take a dead node's calls
	// over this long after its last renewal.
	leaseTTL = 3 * time.Second
	// restartDelay: a dead node comes back (same id, a new epoch) only
	// after the others had time to take its calls over.
	restartDelay = 2*leaseTTL + time.Second
	// storm is how long workers issue new calls while nodes die.
	storm = 30 * time.Second
	// budget bounds everything after the setup; reaching it fails the
	// test (something hung). It is not a performance target.
	budget = 4 * time.Minute
	// maxSteps bounds the requests one call may take to be final.
	maxSteps = 300

	runtimeToken = "fleet-runtime-token-0123456789"
	ritaToken    = "fleet-rita-token-0123456789"
)

// call is one tool call a worker issued, what a runtime remembers of it.
type call struct {
	session, toolCallID, tool string
	args                      json.RawMessage

	execID string
	// first is the first final answer; lastNode the node that gave it.
	first    *host.Result
	lastNode int
}

// fleet is one run: the nodes, the providers and what the workers issued.
type fleet struct {
	t     *testing.T
	nodes []*node
	hc    *http.Client
	prov  *sandbox.Client

	mu    sync.Mutex
	calls []*call

	sent, transport, unavailable, approvals atomic.Int64
	final                                   atomic.Bool // the storm is over: restart dead nodes at once
}

// TestFleetKill is the fleet kill test; see the package documentation.
func TestFleetKill(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet kill test: skipped with -short")
	}
	began := time.Now()
	dsn := testenv.NewPostgresDatabase(t)
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := buildBinary(t, root, tmp)
	paymentsURL, emailURL := startSandbox(t, bin, tmp)
	f := &fleet{t: t, hc: &http.Client{Timeout: time.Minute}, prov: sandbox.NewClient(paymentsURL, emailURL)}
	cfg, mans, modules := setupFiles(t, root, tmp, paymentsURL, emailURL)
	// The providers answer late, after applying the effect, so that kills
	// land mid-call: applied at the provider, not yet recorded.
	for _, r := range []struct {
		payments bool
		path     string
	}{{true, "/v1/payment_intents"}, {false, "/api/v1/send"}} {
		rule := fault.Rule{Kind: fault.Hang, Method: "POST", Path: r.path, Count: -1, Apply: true, Delay: fault.Duration(250 * time.Millisecond)}
		add := f.prov.AddEmailFault
		if r.payments {
			add = f.prov.AddPaymentsFault
		}
		if err := add(t.Context(), rule); err != nil {
			t.Fatal(err)
		}
	}
	env := append(os.Environ(), "FLEET_RUNTIME_TOKEN="+runtimeToken, "FLEET_RITA_TOKEN="+ritaToken)
	// Each node's crash points, one per generation: n3 kills itself after
	// a provider applied its 3rd call; n1's second generation (after the
	// test's SIGKILL) after recording its 2nd dispatch.
	arms := map[string][]string{"n3": {crash.AfterPluginReturn + ":3"}, "n1": {"", crash.AfterDispatchRecord + ":2"}}
	for i := range 3 {
		name := fmt.Sprintf("n%d", i+1)
		data := filepath.Join(tmp, "data-"+name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		f.nodes = append(f.nodes, &node{t: t, name: name, bin: bin, env: env, dir: tmp, args: []string{
			"serve", "--json", "--config", cfg, "--data", data, "--manifests", mans, "--modules", modules,
			"--ledger", dsn, "--node", name, "--lease-ttl", leaseTTL.String(),
		}})
	}
	// The first start compiles the modules into the machine's cache.
	for i, n := range f.nodes {
		if err := n.start(next(arms, n.name)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			t.Logf("first node up after %s", time.Since(began).Round(time.Millisecond))
		}
	}
	setup := time.Since(began)

	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	var restarters sync.WaitGroup
	for _, n := range f.nodes {
		restarters.Go(func() { f.restarter(ctx, n, arms) })
	}
	stormCtx, stopStorm := context.WithTimeout(ctx, storm)
	defer stopStorm()
	var wg sync.WaitGroup
	for w := range workers {
		rng := rand.New(rand.NewPCG(uint64(w), 0x666c656574))
		wg.Go(func() { f.worker(ctx, stormCtx, w, rng) })
	}
	var killed pausedNode
	paused := f.killer(stormCtx, &killed)
	<-stormCtx.Done()
	f.final.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the calls did not finish within the %s budget", budget)
	}
	f.waitAllUp(ctx)

	// Every call once more, through another node than the one that
	// answered it: the same answer, no second effect.
	changed := 0
	for _, c := range f.calls {
		res, ok := f.drive(ctx, c, rand.New(rand.NewPCG(7, uint64(len(c.toolCallID)))), c.lastNode)
		switch {
		case !ok:
			t.Errorf("call %s/%s: no final answer when sent again", c.session, c.toolCallID)
		case c.first == nil:
		case res.Status != c.first.Status || res.Receipt != c.first.Receipt || res.ExecutionID != c.first.ExecutionID:
			changed++
			t.Errorf("call %s/%s: first answered %s %q, again %s %q", c.session, c.toolCallID, c.first.Status, c.first.Receipt, res.Status, res.Receipt)
		}
	}

	// The ledger, the audit trails and the providers.
	views := f.ledger(ctx)
	lost := f.checkLost(views)
	takeovers, byOthers := f.checkTakeovers(views)
	f.checkFencing(views, paused)
	dups := f.checkEffects(ctx, views)
	killedTO, pausedTO := takeoverDelays(views, killed), takeoverDelays(views, paused)
	kills, crashes := 0, 0
	for _, n := range f.nodes {
		kills += n.kills()
	}
	crashes = kills - 1 // one SIGKILL is the test's own; the others are crash points
	states := map[ledger.State]int{}
	for _, v := range views {
		states[v.State]++
	}
	t.Logf("calls %d (requests %d, transport errors %d, unavailable %d, approvals %d); nodes killed %d (by SIGKILL 1, at crash points %d), paused past the lease 1 (%s, epoch %d → %d)",
		len(f.calls), f.sent.Load(), f.transport.Load(), f.unavailable.Load(), f.approvals.Load(), kills, crashes,
		paused.node, paused.epochBefore, paused.epochAfter)
	t.Logf("takeovers %d (by another node %d); final states %v; duplicates %d, changed answers %d, lost %d; wall time %s (setup %s)",
		takeovers, byOthers, states, dups, changed, lost, time.Since(began).Round(time.Millisecond), setup.Round(time.Millisecond))
	t.Logf("takeover after the SIGKILL of %s#%d: %s; after the pause of %s#%d: %s (lease TTL %s)",
		killed.node, killed.epochBefore, killedTO, paused.node, paused.epochBefore, pausedTO, leaseTTL)
	if byOthers == 0 {
		t.Errorf("no call was taken over by another node: the kills never left a call in flight")
	}
	if crashes < 1 {
		t.Errorf("no node died at a crash point")
	}
	if dups != 0 || lost != 0 || changed != 0 {
		t.Errorf("duplicates %d, lost %d, changed answers %d: want 0, 0, 0", dups, lost, changed)
	}
	cancel()
	restarters.Wait()
}

// next pops the crash point of a node's next generation ("" for none).
func next(arms map[string][]string, name string) string {
	a := arms[name]
	if len(a) == 0 {
		return ""
	}
	arms[name] = a[1:]
	return a[0]
}

// setupFiles writes the manifests (pinned to the built modules; email's
// reconcile_settle cut to 8s, which keeps the run short), the modules and the config every node reads.
func setupFiles(t *testing.T, root, dir, paymentsURL, emailURL string) (cfg, mans, modules string) {
	t.Helper()
	mans, modules = filepath.Join(dir, "manifests"), filepath.Join(dir, "modules")
	for _, d := range []string{mans, modules} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"payments", "email"} {
		wasm, digest, err := wasmbuild.Cached(t.Context(), "plugins/"+name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(wasm)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(modules, name+".wasm"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join(root, "manifests", name+".toml"))
		if err != nil {
			t.Fatal(err)
		}
		if src, err = manifests.SetSHA256(src, digest); err != nil {
			t.Fatal(err)
		}
		if name == "email" {
			if src, err = manifests.SetOperationField(src, "send", "reconcile_settle", "8s"); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(mans, name+".toml"), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	origin := func(u string) string {
		p, _ := url.Parse(u)
		return strconv.Quote(p.Scheme + "://" + p.Host)
	}
	cfg = filepath.Join(dir, "connhost.toml")
	text := fmt.Sprintf(`[server]
token_env = "FLEET_RUNTIME_TOKEN"

[[principals]]
name = "rita"
roles = ["approver", "operator"]
token_env = "FLEET_RITA_TOKEN"

[connectors.payments]
base_url = %q
api_key = %q
allow_http = [%s]

[connectors.email]
base_url = %q
allow_http = [%s]
`, paymentsURL, sandbox.DefaultAPIKey, origin(paymentsURL), emailURL, origin(emailURL))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, mans, modules
}

// pausedNode is what the killer did to the paused node (and, for the
// killed one, node, epochBefore and at alone).
type pausedNode struct {
	node                    string
	epochBefore, epochAfter int64
	// at is when it was killed or paused.
	at time.Time
	// resumed is when it was resumed: nothing its former epoch recorded
	// may be stamped later.
	resumed time.Time
}

// killer SIGKILLs n1 early in the storm (its calls in flight are taken
// over by the others; it comes back restartDelay later, armed with a crash
// point), then pauses n2 for three lease TTLs and resumes it.
func (f *fleet) killer(storm context.Context, killed *pausedNode) pausedNode {
	sleep := func(d time.Duration) bool {
		select {
		case <-storm.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	var p pausedNode
	if !sleep(4 * time.Second) {
		return p
	}
	killed.node, killed.epochBefore = f.nodes[0].name, f.epoch(storm, f.nodes[0])
	killed.at = time.Now()
	f.nodes[0].kill()
	if !sleep(10 * time.Second) {
		return p
	}
	n2 := f.nodes[1]
	p.node = n2.name
	p.epochBefore = f.epoch(storm, n2)
	p.at = time.Now()
	if err := n2.pause(); err != nil {
		f.t.Errorf("pause %s: %v", n2.name, err)
		return p
	}
	time.Sleep(3 * leaseTTL) // the pause itself: past its lease, whatever happens to the storm
	p.resumed = time.Now()
	if err := n2.resume(); err != nil {
		f.t.Errorf("resume %s: %v", n2.name, err)
		return p
	}
	// It notices, stops taking work and registers again (a new epoch).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if e := f.epoch(ctx, n2); e > p.epochBefore {
			p.epochAfter = e
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if p.epochAfter == 0 {
		f.t.Errorf("%s did not register again after its pause", n2.name)
	}
	var metrics string
	u, _ := n2.current()
	if _, err := api(ctx, f.hc, "GET", u+"/metrics", ritaToken, nil, &metrics); err != nil ||
		!regexp.MustCompile(`(?m)^`+httpapi.MetricLeasesLost+` [1-9]`).MatchString(metrics) {
		f.t.Errorf("%s's /metrics does not count its lost lease (%v)", n2.name, err)
	}
	return p
}

// epoch reads a node's lease epoch from its /metrics (0 if unreadable).
func (f *fleet) epoch(ctx context.Context, n *node) int64 {
	u, up := n.current()
	if !up {
		return 0
	}
	var metrics string
	if _, err := api(ctx, f.hc, "GET", u+"/metrics", ritaToken, nil, &metrics); err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^` + httpapi.MetricLeaseEpoch + `\{node="` + n.name + `"\} (\d+)`).FindStringSubmatch(metrics)
	if m == nil {
		return 0
	}
	e, _ := strconv.ParseInt(m[1], 10, 64)
	return e
}

// restarter restarts a node restartDelay after each death (at once in
// the final phase), with the crash point of its next generation.
func (f *fleet) restarter(ctx context.Context, n *node, arms map[string][]string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.exited():
		}
		if !f.final.Load() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(restartDelay):
			}
		}
		f.mu.Lock()
		arm := next(arms, n.name)
		f.mu.Unlock()
		if err := n.start(arm); err != nil {
			f.t.Errorf("restart %s: %v", n.name, err)
			return
		}
	}
}

// waitAllUp waits until every node serves and is healthy.
func (f *fleet) waitAllUp(ctx context.Context) {
	for _, n := range f.nodes {
		for {
			u, up := n.current()
			if up {
				if p, err := api(ctx, f.hc, "GET", u+"/healthz", "", nil, nil); err == nil && p == nil {
					break
				}
			}
			if ctx.Err() != nil {
				f.t.Fatalf("node %s not healthy within the budget", n.name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// pick returns a node that runs, other than not when another one does.
func (f *fleet) pick(ctx context.Context, rng *rand.Rand, not int) (int, string) {
	for {
		var ups []int
		for i, n := range f.nodes {
			if _, up := n.current(); up {
				ups = append(ups, i)
			}
		}
		if len(ups) > 1 {
			for j, i := range ups {
				if i == not {
					ups = append(ups[:j], ups[j+1:]...)
					break
				}
			}
		}
		if len(ups) > 0 {
			i := ups[rng.IntN(len(ups))]
			u, _ := f.nodes[i].current()
			return i, u
		}
		if ctx.Err() != nil {
			return -1, ""
		}
		time.Sleep(50 * time.Millisecond) // every node is down: wait for a restart
	}
}

// worker issues new calls until the storm ends, then finishes the one it
// holds.
func (f *fleet) worker(ctx, storm context.Context, w int, rng *rand.Rand) {
	for n := 0; storm.Err() == nil; n++ {
		c := &call{session: fmt.Sprintf("w%d-s%d", w, n), toolCallID: fmt.Sprintf("w%d-c%d", w, n), lastNode: -1}
		var args any
		if rng.IntN(2) == 0 {
			c.tool = "payments.create_payment"
			args = map[string]any{"amount": 1000 + rng.IntN(9000), "currency": "usd", "payment_method": "pm_card_visa",
				"description": "fleet " + c.toolCallID}
		} else {
			c.tool = "email.send"
			args = map[string]any{"to": fmt.Sprintf("fleet-%d@example.com", w), "subject": "fleet " + c.toolCallID, "text": "fleet kill test"}
		}
		c.args, _ = json.Marshal(args)
		f.mu.Lock()
		f.calls = append(f.calls, c)
		f.mu.Unlock()
		if res, ok := f.drive(ctx, c, rng, -1); ok && c.first == nil {
			r := res
			c.first = &r
		} else if !ok {
			f.t.Errorf("call %s/%s: no final answer", c.session, c.toolCallID)
		}
	}
}

// drive sends the call, each request to a random node (another than the
// last one that answered, and than avoid at first), approves it through
// another node when it awaits approval, and returns once its status is
// final. A request without an answer, or refused by a node without a
// lease, is sent again to another node.
func (f *fleet) drive(ctx context.Context, c *call, rng *rand.Rand, avoid int) (host.Result, bool) {
	last := avoid
	req := host.ToolCall{SessionID: c.session, ToolCallID: c.toolCallID, Tool: c.tool, Arguments: c.args}
	for range maxSteps {
		i, u := f.pick(ctx, rng, last)
		if i < 0 {
			return host.Result{}, false
		}
		last = i
		f.sent.Add(1)
		var res host.Result
		p, err := api(ctx, f.hc, "POST", u+"/v1/executions", runtimeToken, req, &res)
		switch {
		case errors.Is(err, errTransport):
			f.transport.Add(1)
			continue
		case err != nil:
			f.t.Errorf("call %s/%s: %v", c.session, c.toolCallID, err)
			return host.Result{}, false
		case p != nil && p.Code == "unavailable":
			f.unavailable.Add(1)
			continue
		case p != nil:
			f.t.Errorf("call %s/%s: node %d answered %s: %s; the node's logged errors:\n%s", c.session, c.toolCallID, i+1, p.Code, p.Detail, f.nodes[i].errorLines())
			return host.Result{}, false
		}
		c.execID = res.ExecutionID
		switch res.Status {
		case host.StatusAwaitingApproval:
			f.approve(ctx, c, res, rng, i)
		case host.StatusPending:
			wait := 200 * time.Millisecond
			if d := time.Until(res.NextAttemptAt); d > 0 {
				wait = min(d, time.Second)
			}
			time.Sleep(wait)
		default:
			c.lastNode = i
			return res, true
		}
	}
	return host.Result{}, false
}

// approve approves a call through another node than the one that
// answered (until one answers).
func (f *fleet) approve(ctx context.Context, c *call, res host.Result, rng *rand.Rand, answered int) {
	last := answered
	for range maxSteps {
		i, u := f.pick(ctx, rng, last)
		if i < 0 {
			return
		}
		last = i
		var out host.Result
		p, err := api(ctx, f.hc, "POST", u+"/v1/approvals/"+url.PathEscape(res.Approval.ID)+"/approve", ritaToken,
			httpapi.DecisionRequest{Digest: res.Approval.ArgsDigest, Reason: "fleet"}, &out)
		switch {
		case errors.Is(err, errTransport):
			f.transport.Add(1)
			continue
		case err != nil:
			f.t.Errorf("approve %s: %v", res.Approval.ID, err)
			return
		case p != nil && p.Code == "unavailable":
			f.unavailable.Add(1)
			continue
		case p != nil && p.Code != "not_awaiting_approval": // an earlier approve landed, its answer lost
			f.t.Errorf("approve %s: node %d answered %s: %s", res.Approval.ID, i+1, p.Code, p.Detail)
		}
		f.approvals.Add(1)
		return
	}
}

// ledger reads every execution and its audit trail through the nodes.
func (f *fleet) ledger(ctx context.Context) map[string]httpapi.Execution {
	rng := rand.New(rand.NewPCG(1, 2))
	_, u := f.pick(ctx, rng, -1)
	views := map[string]httpapi.Execution{}
	q := url.Values{"limit": {"1000"}}
	for {
		var l httpapi.ListResponse
		if p, err := api(ctx, f.hc, "GET", u+"/v1/executions?"+q.Encode(), ritaToken, nil, &l); err != nil || p != nil {
			f.t.Fatalf("list executions: %v %+v", err, p)
		}
		for _, r := range l.Executions {
			var v httpapi.Execution
			if p, err := api(ctx, f.hc, "GET", u+"/v1/executions/"+url.PathEscape(r.ExecutionID), ritaToken, nil, &v); err != nil || p != nil {
				f.t.Fatalf("get execution %s: %v %+v", r.ExecutionID, err, p)
			}
			views[r.ExecutionID] = v
		}
		if l.Next == "" {
			return views
		}
		q.Set("after", l.Next)
	}
}

// checkLost: every call the workers issued is in the ledger, final
// (terminal or recovery_required), as the runtime was told; the ledger
// holds nothing else. It returns the number of lost or stuck calls.
func (f *fleet) checkLost(views map[string]httpapi.Execution) int {
	lost := 0
	issued := map[string]bool{}
	for _, c := range f.calls {
		issued[c.execID] = true
		v, ok := views[c.execID]
		switch {
		case c.execID == "" || !ok:
			lost++
			f.t.Errorf("call %s/%s is not in the ledger", c.session, c.toolCallID)
		case !v.State.Terminal() && v.State != ledger.StateRecoveryRequired:
			lost++
			f.t.Errorf("call %s/%s is stuck %s", c.session, c.toolCallID, v.State)
		case c.first != nil && string(v.State) != string(c.first.Status):
			f.t.Errorf("call %s/%s: the runtime was told %s, the ledger holds %s", c.session, c.toolCallID, c.first.Status, v.State)
		}
	}
	for id := range views {
		if !issued[id] {
			f.t.Errorf("the ledger holds execution %s, which no worker issued", id)
		}
	}
	return lost
}

// leaseRE reads the lease an executor event names: executor@n1#2.
var leaseRE = regexp.MustCompile(`^(?:executor|recovery)@(.+)#(\d+)$`)

// noteRE reads a takeover note: taken over from node n1 epoch 2 (lease
// gone) by node n3 epoch 1.
var noteRE = regexp.MustCompile(`taken over from node (\S+) epoch (\d+) \(lease gone\) by node (\S+) epoch (\d+)`)

// checkTakeovers: whenever an attempt dispatched under one lease is next
// decided under another, that decision's event names the node that
// recovered it (its actor) and the lease it was taken from (its note). It
// returns the takeovers and those by another node than the dead one.
func (f *fleet) checkTakeovers(views map[string]httpapi.Execution) (takeovers, byOthers int) {
	for id, v := range views {
		var lastDispatch string // the lease of the last dispatch, while no executor event followed
		for _, ev := range v.Events {
			m := leaseRE.FindStringSubmatch(ev.Actor)
			if m == nil {
				continue // a person: the reviewer, an operator
			}
			lease := m[1] + "#" + m[2]
			if n := noteRE.FindStringSubmatch(ev.Reason); n != nil {
				if n[3]+"#"+n[4] != lease {
					f.t.Errorf("execution %s event %d: actor %s, but the note says %q", id, ev.Seq, ev.Actor, n[0])
				}
				takeovers++
				if n[1] != n[3] {
					byOthers++
				}
			}
			if lastDispatch != "" && lease != lastDispatch && noteRE.FindStringSubmatch(ev.Reason) == nil {
				f.t.Errorf("execution %s event %d (%s by %s): the attempt dispatched by %s was taken over without a note naming where it came from; its trail:\n%s",
					id, ev.Seq, ev.Decision, ev.Actor, lastDispatch, trail.Of(v.Events))
			}
			lastDispatch = ""
			if ev.To == ledger.StateDispatched {
				lastDispatch = lease
			}
		}
	}
	return takeovers, byOthers
}

// checkFencing: nothing is recorded under a lease after a takeover from
// it, and nothing the paused node's former epoch recorded is stamped
// after its resume.
func (f *fleet) checkFencing(views map[string]httpapi.Execution, p pausedNode) {
	pausedLease := p.node + "#" + strconv.FormatInt(p.epochBefore, 10)
	for id, v := range views {
		gone := map[string]bool{}
		for _, ev := range v.Events {
			m := leaseRE.FindStringSubmatch(ev.Actor)
			if m != nil {
				lease := m[1] + "#" + m[2]
				if gone[lease] {
					f.t.Errorf("execution %s event %d (%s): recorded by %s after its calls were taken over", id, ev.Seq, ev.Decision, lease)
				}
				if lease == pausedLease && p.epochBefore > 0 && !p.resumed.IsZero() && ev.Time.After(p.resumed) {
					f.t.Errorf("execution %s event %d (%s): recorded by the paused node's former epoch after its resume", id, ev.Seq, ev.Decision)
				}
			}
			if n := noteRE.FindStringSubmatch(ev.Reason); n != nil {
				gone[n[1]+"#"+n[2]] = true
			}
		}
	}
}

// checkEffects counts the providers' effects per execution: a succeeded
// call has exactly one, a failed call none, a recovery_required call at
// most one, and no effect belongs to no execution. It returns the
// duplicates.
func (f *fleet) checkEffects(ctx context.Context, views map[string]httpapi.Execution) int {
	pis, err := f.prov.PaymentIntents(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	msgs, err := f.prov.Messages(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	effects := map[string]int{}
	piOf := map[string]string{}
	byMessageID := map[string]string{}
	for id, v := range views {
		byMessageID[messageID(v.IdempotencyKey)] = id
	}
	dups := 0
	for _, p := range pis {
		id := p.Metadata["connhost_execution_id"]
		if _, ok := views[id]; !ok {
			dups++
			f.t.Errorf("PaymentIntent %s belongs to no execution", p.ID)
			continue
		}
		effects[id]++
		piOf[id] = p.ID
	}
	for _, m := range msgs {
		id, ok := byMessageID[strings.Trim(m.MessageID, "<>")]
		if !ok {
			dups++
			f.t.Errorf("message %s (%s) belongs to no execution", m.ID, m.MessageID)
			continue
		}
		effects[id]++
	}
	ids := make([]string, 0, len(views))
	for id := range views {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		v, n := views[id], effects[id]
		if n > 1 {
			dups += n - 1
		}
		switch st := v.State; {
		case n > 1:
			f.t.Errorf("execution %s (%s, %s): %d effects at the provider", id, v.Tool, st, n)
		case st == ledger.StateSucceeded && n != 1:
			f.t.Errorf("execution %s succeeded with %d effects", id, n)
		case st == ledger.StateSucceeded && strings.HasPrefix(v.Tool, "payments.") && v.Receipt != piOf[id]:
			f.t.Errorf("execution %s: receipt %q, the PaymentIntent tagged with it is %s", id, v.Receipt, piOf[id])
		case st == ledger.StateFailed && n != 0:
			f.t.Errorf("execution %s failed, but the provider holds its effect", id)
		}
	}
	return dups
}

// messageID is the Message-ID the email connector derives from an
// idempotency key (plugins/email): the key when it is made of
// [A-Za-z0-9_-] (at most 128 bytes), else "sha256."+hex(sha256(key)); then
// "@connhost.invalid".
func messageID(key string) string {
	verbatim := key != "" && len(key) <= 128
	for i := 0; i < len(key) && verbatim; i++ {
		c := key[i]
		verbatim = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if verbatim {
		return key + "@connhost.invalid"
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256." + hex.EncodeToString(sum[:]) + "@connhost.invalid"
}

// takeoverDelays says how long after a node was killed or paused its calls
// were taken over (the takeover events' times, stamped by the recovering
// node with this machine's clock): "n calls, first after …, last after
// …", or "none in flight".
func takeoverDelays(views map[string]httpapi.Execution, p pausedNode) string {
	lease := p.node + "#" + strconv.FormatInt(p.epochBefore, 10)
	var ds []time.Duration
	for _, v := range views {
		for _, ev := range v.Events {
			if n := noteRE.FindStringSubmatch(ev.Reason); n != nil && n[1]+"#"+n[2] == lease {
				ds = append(ds, ev.Time.Sub(p.at))
			}
		}
	}
	if p.epochBefore == 0 || len(ds) == 0 {
		return "none in flight"
	}
	slices.Sort(ds)
	return fmt.Sprintf("%d calls, first after %s, last after %s", len(ds), ds[0].Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond))
}
