package runtimes_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/internal/devkit/testing/testenv"
)

// The Vercel AI SDK (ai 7) through @connhost/runtimes/ai-sdk: the
// conversation's messages stored by the application after each step, as
// the SDK's documentation shows, and the adapter's tools; the scripted
// model issues a new tool-call id whenever it is asked without a result,
// as a model API does.

const aisdkScript = "aisdk-scenario.mjs"

func needAISDK(t *testing.T) string {
	t.Helper()
	return testenv.Node(t, shared.jsDir, "ai", "@ai-sdk/mcp", "@modelcontextprotocol/sdk")
}

// TestAISDKCrash: (a) the runtime process is killed (SIGKILL) while the
// payment is held at the provider; restarted, it loads the conversation
// it stored, the adapter settles the unanswered call by its original ids
// before the model is asked again, and the run continues with the
// charge's receipt: one charge, no new tool call, nobody asked. (d) the
// SDK's own MCP tools (@ai-sdk/mcp) against serve are refused for want of
// an identity, and nothing is charged.
func TestAISDKCrash(t *testing.T) {
	node := needAISDK(t)
	serve := newConnhost(t, "serve", shared.ungated)
	for _, kind := range []string{"serve", "stdio"} {
		t.Run("kill/"+kind, func(t *testing.T) {
			start := time.Now()
			c := serve
			if kind == "stdio" {
				c = newConnhost(t, "stdio", shared.ungated)
			}
			before := charges()
			holdNextCharge(t)
			cfg := jsScenario(c, t, "aisdk", "first", true, "call_aikill_1")
			first := startRuntime(t, node, aisdkScript, cfg)
			awaitHeld(t, first)
			first.kill(t)
			releaseHeld(t)
			c.awaitStdioExit(t)
			rep := startRuntime(t, node, aisdkScript, jsScenario(c, t, "aisdk", "resume", true, "call_aikill_1")).waitJS(t)
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times for one call killed mid-charge and resumed, want 1", got)
			}
			receipt := newestIntent(t)
			if !strings.Contains(rep.Final, receipt) {
				t.Fatalf("the resumed run's answer %q does not carry the charge's receipt %s", rep.Final, receipt)
			}
			if len(rep.Issued) != 0 || rep.ModelRequests != 1 {
				t.Fatalf("the resumed run asked the model %d times and it issued %q; want one request (the answer) and no new call", rep.ModelRequests, rep.Issued)
			}
			if c.kind == "serve" && c.awaitingIn(t, sessionOf(cfg)) != 0 {
				t.Fatal("the resumed call is held for a human")
			}
			t.Logf("kill + resume over %s: %d charge, %d model request after the restart, %.1fs", kind, charges()-before, rep.ModelRequests, time.Since(start).Seconds())
		})
	}
	t.Run("without-adapter", func(t *testing.T) {
		before := charges()
		rep := startRuntime(t, node, aisdkScript, jsScenario(serve, t, "aisdk", "first", false, "call_aiplain_1")).waitJS(t)
		if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "identity_required") {
			t.Fatalf("@ai-sdk/mcp's tool answered %q, want the identity_required refusal", rep.Outputs)
		}
		if got := charges() - before; got != 0 {
			t.Fatalf("the provider charged %d times for a refused call", got)
		}
	})
}

// TestAISDKApproval: a gated payment, through the adapter, on serve.
// (b) approved through the API while the SDK waits in needsApproval
// (io.connhost/wait): the same request runs it. (b) approved while the
// runtime is stopped, paused on the SDK's tool-approval-request: the
// resumed conversation settles the same call, which runs once, and the
// model is asked only for its answer. (c) rejected while stopped: nothing
// is charged and the model reads the refusal.
func TestAISDKApproval(t *testing.T) {
	node := needAISDK(t)
	c := newConnhost(t, "serve", shared.gated)

	t.Run("approved-while-waiting", func(t *testing.T) {
		start := time.Now()
		before := charges()
		cfg := jsScenario(c, t, "aisdk", "first", true, "call_aiwait_1")
		cfg["wait"] = 300
		p := startRuntime(t, node, aisdkScript, cfg)
		ex := c.gatedCall(t, p, sessionOf(cfg), "call_aiwait_1")
		c.approveVia(t, tokenRita, ex.Approval.ID, ex.Approval.ArgsDigest)
		rep := p.waitJS(t)
		if got := charges() - before; got != 1 {
			t.Fatalf("the provider charged %d times, want 1", got)
		}
		if !strings.Contains(rep.Final, newestIntent(t)) {
			t.Fatalf("the answer %q does not carry the charge's receipt", rep.Final)
		}
		if !slices.Equal(rep.Issued, []string{"call_aiwait_1"}) || rep.ModelRequests != 2 {
			t.Fatalf("the model got %d requests and issued %q; want 2 (the call, the answer) and the one call", rep.ModelRequests, rep.Issued)
		}
		t.Logf("approved while waiting: %d charge, %.1fs", charges()-before, time.Since(start).Seconds())
	})

	t.Run("approved-while-stopped", func(t *testing.T) {
		start := time.Now()
		before := charges()
		cfg := jsScenario(c, t, "aisdk", "first", true, "call_aistop_1")
		first := startRuntime(t, node, aisdkScript, cfg).waitJS(t)
		if !slices.Equal(first.Paused, []string{"call_aistop_1"}) {
			t.Fatalf("the run paused on %q, want the SDK's approval request for call_aistop_1", first.Paused)
		}
		ex := c.gatedCall(t, nil, sessionOf(cfg), "call_aistop_1")
		c.approveVia(t, tokenRita, ex.Approval.ID, ex.Approval.ArgsDigest)
		rep := startRuntime(t, node, aisdkScript, jsScenario(c, t, "aisdk", "resume", true, "call_aistop_1")).waitJS(t)
		if got := charges() - before; got != 1 {
			t.Fatalf("the provider charged %d times, want 1", got)
		}
		if !strings.Contains(rep.Final, newestIntent(t)) {
			t.Fatalf("the resumed answer %q does not carry the charge's receipt", rep.Final)
		}
		if len(rep.Issued) != 0 || rep.ModelRequests != 1 {
			t.Fatalf("after the approval the model got %d requests and issued %q; want 1 (the answer) and no call", rep.ModelRequests, rep.Issued)
		}
		if n := c.awaitingIn(t, sessionOf(cfg)); n != 0 {
			t.Fatalf("%d approvals still asked of a human", n)
		}
		t.Logf("approved while stopped: %d charge, %.1fs", charges()-before, time.Since(start).Seconds())
	})

	t.Run("rejected", func(t *testing.T) {
		before := charges()
		cfg := jsScenario(c, t, "aisdk", "first", true, "call_aireject_1")
		first := startRuntime(t, node, aisdkScript, cfg).waitJS(t)
		if !slices.Equal(first.Paused, []string{"call_aireject_1"}) {
			t.Fatalf("the run paused on %q, want the SDK's approval request for call_aireject_1", first.Paused)
		}
		ex := c.gatedCall(t, nil, sessionOf(cfg), "call_aireject_1")
		c.rejectVia(t, ex.Approval.ID, ex.Approval.ArgsDigest, "not this customer")
		rep := startRuntime(t, node, aisdkScript, jsScenario(c, t, "aisdk", "resume", true, "call_aireject_1")).waitJS(t)
		if got := charges() - before; got != 0 {
			t.Fatalf("the provider charged %d times for a rejected call", got)
		}
		if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "rejected") || !strings.Contains(rep.Outputs[0], "not issue it again") {
			t.Fatalf("the model read %q, want the rejection and not to issue it again", rep.Outputs)
		}
		if len(rep.Issued) != 0 {
			t.Fatalf("the model issued %q after the rejection", rep.Issued)
		}
	})
}
