package runtimes_test

import (
	"strings"
	"testing"
)

// A runtime is an agent runtime people use, driven by its scenario script
// in clients/js/test.
type runtime struct {
	name   string
	script string
	// state is the option naming the saved state's file.
	state string
	// again is the phase that issues the gated call again after the
	// out-of-band approval: @openai/agents restores the RunState saved
	// before the call, LangGraph replays the thread from the checkpoint
	// before its tool node.
	again string
	// plainAgain is the phase of a restart without the adapter: the
	// agents' mcpServers integration has no pause to save a run at, so the
	// run starts over; LangGraph resumes its thread from the checkpoint.
	plainAgain string
}

var runtimes = []runtime{
	{name: "openai-agents", script: "agents-scenario.mjs", state: "state", again: "resume", plainAgain: "first"},
	{name: "langgraph", script: "langgraph-scenario.mjs", state: "db", again: "replay", plainAgain: "resume"},
}

const payment = "payments_create_payment"

// scenario is the configuration of one run of rt's script. The session
// (thread) is the test's: the emulator outlives the tests, and the same
// ids would make the same idempotency key there.
func scenario(c *connhost, rt runtime, t *testing.T, phase string, adapter bool, callID string) map[string]any {
	conv := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	cfg := map[string]any{
		"adapter": adapter, "phase": phase, "session": "conv-" + conv, "thread": "thread-" + conv,
		"callId": callID, "tool": payment,
		"arguments": map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"},
	}
	cfg[rt.state] = c.data + "/" + rt.name + "-state"
	c.target(cfg)
	return cfg
}

// TestKillAndReissue: a runtime with the adapter calls an ungated
// payment; the runtime is killed (SIGKILL) while the charge is at the
// provider; restarted from its saved state (RunState, the LangGraph
// checkpoint), it issues the same call again. The provider charged once,
// and the re-issue answered with the recorded outcome.
func TestKillAndReissue(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		for _, kind := range []string{"stdio", "serve"} {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				c := newConnhost(t, kind, shared.ungated)
				before := charges()
				holdNextCharge(t)
				first := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, "call_kill_1"))
				awaitHeld(t, first)
				first.kill(t)
				releaseHeld(t)
				c.awaitStdioExit(t)
				rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, "call_kill_1")).wait(t)
				if len(rep.Outputs) != 1 || !strings.HasPrefix(rep.Outputs[0], "Succeeded") || !strings.Contains(rep.Outputs[0], "recorded outcome") {
					t.Fatalf("the re-issued call answered %q, want the recorded success", rep.Outputs)
				}
				if got := charges() - before; got != 1 {
					t.Fatalf("the provider charged %d times for one call killed and issued again, want 1", got)
				}
				t.Logf("kill + re-issue with the adapter: %d charge at the provider", charges()-before)
			})
		}
	}
}

// TestGatedApprovedOutOfBand: a gated payment answers awaiting_approval
// (and tells the model not to issue it again); a reviewer approves it
// outside the runtime (serve's API, connhost approve on the ledger for
// stdio); the runtime issues the same call again from its saved state and
// it runs, once.
func TestGatedApprovedOutOfBand(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		for _, kind := range []string{"stdio", "serve"} {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				c := newConnhost(t, kind, shared.gated)
				before := charges()
				rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, "call_gated_1")).wait(t)
				if len(rep.Outputs) != 1 {
					t.Fatalf("outputs %q, want one", rep.Outputs)
				}
				m := approvalRE.FindStringSubmatch(rep.Outputs[0])
				if m == nil || !strings.Contains(rep.Outputs[0], "A human must approve") || !strings.Contains(rep.Outputs[0], "Do not issue this call again") {
					t.Fatalf("the gated call answered %q, want awaiting approval with its id and digest", rep.Outputs[0])
				}
				if strings.Contains(rep.Outputs[0], "_meta") {
					t.Errorf("the text for the model asks for _meta, which a model cannot set: %q", rep.Outputs[0])
				}
				c.approve(t, m[1], m[2])
				again := startRuntime(t, node, rt.script, scenario(c, rt, t, rt.again, true, "call_gated_1")).wait(t)
				last := again.Outputs[len(again.Outputs)-1]
				if !strings.HasPrefix(last, "Succeeded") {
					t.Fatalf("the gated call issued again after approval answered %q, want success", again.Outputs)
				}
				if got := charges() - before; got != 1 {
					t.Fatalf("the provider charged %d times, want 1", got)
				}
			})
		}
	}
}

// TestWithoutAdapterServeRefuses: the runtime's own MCP integration
// (@openai/agents' mcpServers, @langchain/mcp-adapters' loadMcpTools)
// sends no ids; serve and a configured connhost mcp refuse the payment,
// naming what to pass, and nothing is charged.
func TestWithoutAdapterServeRefuses(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		for _, kind := range []string{"stdio", "serve"} {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				c := newConnhost(t, kind, shared.ungated)
				before := charges()
				rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, "call_plain_1")).wait(t)
				if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "identity_required") ||
					!strings.Contains(rep.Outputs[0], "io.connhost/tool_call_id") || !strings.Contains(rep.Outputs[0], "Do not issue this call again") {
					t.Fatalf("without the adapter the call answered %q, want the identity_required refusal", rep.Outputs)
				}
				if got := charges() - before; got != 0 {
					t.Fatalf("the provider charged %d times for a refused call", got)
				}
			})
		}
	}
}

// TestWithoutAdapterDevWarns: against dev (no config), the same runtime
// without the adapter keeps working, and the weak promise is loud: each
// result warns the model not to repeat a call whose outcome it did not
// see, and the log warns once. Killed mid-call and run again, the call is
// a new one and the provider charges twice: what the adapter prevents.
func TestWithoutAdapterDevWarns(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			c := newConnhost(t, "dev", shared.ungated)
			before := charges()
			holdNextCharge(t)
			first := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, "call_dev_1"))
			awaitHeld(t, first)
			first.kill(t)
			releaseHeld(t)
			rep := startRuntime(t, node, rt.script, scenario(c, rt, t, rt.plainAgain, false, "call_dev_1")).wait(t)
			// @langchain/mcp-adapters hands the model the result's
			// content block as JSON; the texts are in it either way.
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "Succeeded (") || !strings.Contains(rep.Outputs[0], "passed no identity") {
				t.Fatalf("without the adapter dev answered %q, want success with the warning", rep.Outputs)
			}
			if n := count(c.log.String(), "came without a stable identity"); n != 1 {
				t.Fatalf("dev logged the warning %d times, want once:\n%s", n, c.log.String())
			}
			got := charges() - before
			if got != 2 {
				t.Fatalf("the provider charged %d times, want the 2 that per-request identity allows", got)
			}
			t.Logf("kill + re-issue without the adapter on dev: %d charges at the provider, each result warned", got)
		})
	}
}

// TestWithoutAdapterDevHoldsGated: a gated payment from a runtime without
// the adapter (per-request identity, so no retry could find its approval
// again) is held open on dev until a reviewer approves it through the
// API, and then the same tools/call finishes: one charge, one approval.
func TestWithoutAdapterDevHoldsGated(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			c := newConnhost(t, "dev", shared.gated)
			before := charges()
			p := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, "call_held_1"))
			ex := c.awaitAwaiting(t, p)
			// dev has no tokens: the loopback reviewer approves.
			c.approveVia(t, "", ex.Approval.ID, ex.Approval.ArgsDigest)
			rep := p.wait(t)
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "Succeeded (") {
				t.Fatalf("the held call answered %q, want success", rep.Outputs)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
			if n := c.countExecutions(t); n != 1 {
				t.Fatalf("%d executions, want the one held call", n)
			}
		})
	}
}
