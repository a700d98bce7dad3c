//go:build linux

package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// TestFleetPausedNode pauses a node (SIGSTOP) while it is inside a
// provider call, past its lease, until another node has taken that call
// over; then resumes it (SIGCONT) with the provider's answer waiting in
// its socket and a dispatch request for a second, approved call waiting in
// its listener. The paused node's lease epoch must record nothing after
// the takeover: not the first call's outcome, not the second call's
// dispatch. Both calls end with exactly one payment at the provider.
//
// The provider holds the first call (a Hold rule) until the test releases
// it, so the pause lands mid-call by construction, not by timing.
func TestFleetPausedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	dsn := testenv.NewPostgresDatabase(t)
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := buildBinary(t, root, tmp)
	paymentsURL, emailURL := startSandbox(t, bin, tmp)
	prov := sandbox.NewClient(paymentsURL, emailURL)
	cfg, mans, modules := setupFiles(t, root, tmp, paymentsURL, emailURL)
	env := append(os.Environ(), "FLEET_RUNTIME_TOKEN="+runtimeToken, "FLEET_RITA_TOKEN="+ritaToken)
	var nodes []*node
	for _, name := range []string{"p1", "p2"} {
		data := filepath.Join(tmp, "data-"+name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatal(err)
		}
		n := &node{t: t, name: name, bin: bin, env: env, dir: tmp, args: []string{
			"serve", "--json", "--config", cfg, "--data", data, "--manifests", mans, "--modules", modules,
			"--ledger", dsn, "--node", name, "--lease-ttl", leaseTTL.String(),
		}}
		if err := n.start(""); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	live, paused := nodes[0], nodes[1]
	liveURL, _ := live.current()
	pausedURL, _ := paused.current()
	f := &fleet{t: t, hc: &http.Client{Timeout: 2 * time.Minute}, prov: prov, nodes: nodes}

	// Two approved payments, their intents and approvals through the live
	// node.
	calls := make([]*call, 2)
	for i := range calls {
		c := &call{session: fmt.Sprintf("pause-s%d", i), toolCallID: fmt.Sprintf("pause-c%d", i), tool: "payments.create_payment"}
		c.args, _ = json.Marshal(map[string]any{"amount": 1500 + i, "currency": "usd", "payment_method": "pm_card_visa", "description": "pause " + c.toolCallID})
		res := mustPost(ctx, t, f.hc, liveURL, c)
		if res.Status != host.StatusAwaitingApproval {
			t.Fatalf("call %s: %s, want awaiting_approval", c.toolCallID, res.Status)
		}
		c.execID = res.ExecutionID
		var out host.Result
		if p, err := api(ctx, f.hc, "POST", liveURL+"/v1/approvals/"+url.PathEscape(res.Approval.ID)+"/approve", ritaToken,
			httpapi.DecisionRequest{Digest: res.Approval.ArgsDigest, Reason: "pause"}, &out); err != nil || p != nil {
			t.Fatalf("approve %s: %v %+v", res.Approval.ID, err, p)
		}
		calls[i] = c
	}

	// The first call's dispatch through the node to be paused; the
	// provider holds it once the payment has begun.
	if err := prov.AddPaymentsFault(ctx, fault.Rule{Kind: fault.Hold, Method: "POST", Path: "/v1/payment_intents"}); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		res host.Result
		p   *problem
		err error
	}
	first := make(chan answer, 1)
	go func() {
		var a answer
		a.p, a.err = api(ctx, f.hc, "POST", pausedURL+"/v1/executions", runtimeToken, toolCall(calls[0]), &a.res)
		first <- a
	}()
	if err := waitHeld(ctx, prov, 1); err != nil {
		t.Fatal(err)
	}
	epoch := f.epoch(ctx, paused)
	if epoch == 0 {
		t.Fatalf("%s: no lease epoch in /metrics", paused.name)
	}
	pausedLease := paused.name + "#" + strconv.FormatInt(epoch, 10)
	if err := paused.pause(); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()

	// The second call's dispatch waits in the paused node's listener.
	second := make(chan answer, 1)
	go func() {
		var a answer
		a.p, a.err = api(ctx, f.hc, "POST", pausedURL+"/v1/executions", runtimeToken, toolCall(calls[1]), &a.res)
		second <- a
	}()

	// The live node takes the first call over once the lease is gone.
	var takenAt time.Time
	for takenAt.IsZero() {
		var v httpapi.Execution
		if p, err := api(ctx, f.hc, "GET", liveURL+"/v1/executions/"+url.PathEscape(calls[0].execID), ritaToken, nil, &v); err != nil || p != nil {
			t.Fatalf("get %s: %v %+v", calls[0].execID, err, p)
		}
		for _, ev := range v.Events {
			if n := noteRE.FindStringSubmatch(ev.Reason); n != nil && n[1]+"#"+n[2] == pausedLease {
				takenAt = ev.Time
			}
		}
		if takenAt.IsZero() {
			select {
			case <-ctx.Done():
				t.Fatalf("%s's call was not taken over within the budget", pausedLease)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// The provider answers the held request while the node is stopped: the
	// answer waits in its socket.
	if err := prov.ReleaseHeld(ctx); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	if err := paused.resume(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []chan answer{first, second} {
		a := <-ch
		switch {
		case a.err != nil && !errors.Is(a.err, errTransport):
			t.Errorf("a request waiting on the paused node: %v", a.err)
		case a.p != nil && a.p.Code != "unavailable":
			t.Errorf("a request waiting on the paused node: %s: %s", a.p.Code, a.p.Detail)
		}
	}
	// It registers again under a new epoch and serves.
	for f.epoch(ctx, paused) <= epoch {
		select {
		case <-ctx.Done():
			t.Fatalf("%s did not register again after its pause", paused.name)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Both calls end, driven through the live node.
	for _, c := range calls {
		res := mustPost(ctx, t, f.hc, liveURL, c)
		for res.Status == host.StatusPending {
			time.Sleep(200 * time.Millisecond)
			res = mustPost(ctx, t, f.hc, liveURL, c)
		}
		if res.Status != host.StatusSucceeded {
			t.Errorf("call %s: %s, want succeeded", c.toolCallID, res.Status)
		}
	}
	views := f.ledger(ctx)
	for i, c := range calls {
		v := views[c.execID]
		taken := false
		for _, ev := range v.Events {
			if noteRE.MatchString(ev.Reason) {
				taken = true
			}
			m := leaseRE.FindStringSubmatch(ev.Actor)
			if m == nil || m[1]+"#"+m[2] != pausedLease {
				continue
			}
			switch {
			case i == 1:
				t.Errorf("call %s event %d (%s → %s): its dispatch was sent to %s while paused; the stale epoch recorded it", c.toolCallID, ev.Seq, ev.Decision, ev.To, pausedLease)
			case taken:
				t.Errorf("call %s event %d (%s → %s): recorded by %s after the takeover", c.toolCallID, ev.Seq, ev.Decision, ev.To, pausedLease)
			}
		}
		if !taken && i == 0 {
			t.Errorf("call %s: no takeover note in its history", c.toolCallID)
		}
		if v.State != ledger.StateSucceeded {
			t.Errorf("call %s: %s in the ledger", c.toolCallID, v.State)
		}
	}
	f.checkFencing(views, pausedNode{node: paused.name, epochBefore: epoch, resumed: resumedAt})
	if dups := f.checkEffects(ctx, views); dups != 0 {
		t.Errorf("%d duplicate payments", dups)
	}
	t.Logf("paused %s (%s) mid-call; taken over %s after the pause (lease TTL %s), resumed after %s",
		paused.name, pausedLease, takenAt.Sub(pausedAt).Round(10*time.Millisecond), leaseTTL, resumedAt.Sub(pausedAt).Round(10*time.Millisecond))
}

// toolCall is the request that sends c.
func toolCall(c *call) host.ToolCall {
	return host.ToolCall{SessionID: c.session, ToolCallID: c.toolCallID, Tool: c.tool, Arguments: c.args}
}

// mustPost sends c to the node at u and returns its answer.
func mustPost(ctx context.Context, t *testing.T, hc *http.Client, u string, c *call) host.Result {
	t.Helper()
	var res host.Result
	if p, err := api(ctx, hc, "POST", u+"/v1/executions", runtimeToken, toolCall(c), &res); err != nil || p != nil {
		t.Fatalf("call %s through %s: %v %+v", c.toolCallID, u, err, p)
	}
	return res
}

// waitHeld waits until the providers hold n requests.
func waitHeld(ctx context.Context, prov *sandbox.Client, n int) error {
	for {
		h, err := prov.Held(ctx)
		if err != nil {
			return err
		}
		if h >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the provider holds %d requests, want %d: %w", h, n, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
