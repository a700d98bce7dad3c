package runtimes_test

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// A runtime is an agent runtime people use, driven by its scenario script
// in clients/js/test. Each script takes the phases "first" (a new run)
// and "resume" (the run restarted from the runtime's own saved state, as
// its documentation says, and continued), and prints a report.
type runtime struct {
	name   string
	script string
	// state is the option naming the saved state's file (the agents'
	// RunState, LangGraph's SQLite checkpointer).
	state string
}

var runtimes = []runtime{
	{name: "openai-agents", script: "agents-scenario.mjs", state: "state"},
	{name: "langgraph", script: "langgraph-scenario.mjs", state: "db"},
}

const payment = "payments_create_payment"

// receiptRE finds the receipt of a succeeded call in the text the model
// read (the emulator's payment intent).
var receiptRE = regexp.MustCompile(`receipt (pi_[A-Za-z0-9_]+)`)

// scenario is the configuration of one run of rt's script. The session
// (thread) is the test's: the emulator outlives the tests, and the same
// ids would make the same idempotency key there. extra holds further
// options (wait).
func scenario(c *connhost, rt runtime, t *testing.T, phase string, adapter bool, extra map[string]any) map[string]any {
	cfg := map[string]any{
		"adapter": adapter, "phase": phase, "session": testSession(t), "thread": testSession(t),
		"callId": "call_" + strings.ReplaceAll(testSession(t), "-", "_"), "tool": payment,
		"arguments": map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"},
	}
	cfg[rt.state] = c.data + "/" + testSession(t) + "-state"
	for k, v := range extra {
		cfg[k] = v
	}
	c.target(cfg)
	return cfg
}

// testSession is the session (and thread) id of test t's run.
func testSession(t *testing.T) string {
	return "s-" + strings.NewReplacer("/", "-", " ", "-", "_", "-").Replace(t.Name())
}

// succeededWithReceipt checks that the run read one succeeded call and
// answered with its receipt, and returns the receipt.
func succeededWithReceipt(t *testing.T, rep report) string {
	t.Helper()
	if len(rep.Outputs) != 1 || !strings.HasPrefix(rep.Outputs[0], "Succeeded") {
		t.Fatalf("the model read %q, want one succeeded call", rep.Outputs)
	}
	m := receiptRE.FindStringSubmatch(rep.Outputs[0])
	if m == nil {
		t.Fatalf("the succeeded call %q names no receipt", rep.Outputs[0])
	}
	if !strings.Contains(rep.Final, m[1]) {
		t.Fatalf("the run ended with %q, want it to go on with the receipt %s", rep.Final, m[1])
	}
	return m[1]
}

// TestResumeAfterKill: a runtime with the adapter calls an ungated
// payment; it is killed (SIGKILL) while the charge is held at the
// provider; the provider then applies the charge. Restarted from its own
// saved state (the agents' RunState restored and run again, LangGraph's
// thread from its checkpoint), the run settles the call by its original
// ids before the model is asked anything: the provider charged once, the
// model read the receipt in its one request of the restarted process, and
// no human was asked.
func TestResumeAfterKill(t *testing.T) {
	node := needNode(t)
	for _, kind := range []string{"stdio", "serve"} {
		c := newConnhost(t, kind, shared.ungated)
		for _, rt := range runtimes {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				before := charges()
				holdNextCharge(t)
				first := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, nil))
				awaitHeld(t, first)
				first.kill(t)
				releaseHeld(t)
				c.awaitStdioExit(t)
				rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, nil)).wait(t)
				receipt := succeededWithReceipt(t, rep)
				if rep.ModelCalls != 1 {
					t.Errorf("the restarted run made %d model requests, want 1 (the answer with the receipt): the model was asked about the call again", rep.ModelCalls)
				}
				if len(rep.Awaiting) != 0 {
					t.Errorf("the restarted run waits for a human: %+v", rep.Awaiting)
				}
				if kind == "serve" {
					for _, ex := range c.executions(t, "") {
						if ex.SessionID == testSession(t) && ex.Approval != nil {
							t.Errorf("execution %s asks a human: %+v", ex.ExecutionID, ex.Approval)
						}
					}
				}
				if got := charges() - before; got != 1 {
					t.Fatalf("the provider charged %d times for one call killed mid-charge and resumed, want 1", got)
				}
				t.Logf("kill mid-charge + resume from the runtime's saved state: 1 charge, receipt %s, %d model request after the restart", receipt, rep.ModelCalls)
			})
		}
	}
}

// TestResumeNeverSent: the runtime dies (SIGKILL) once its run is saved
// with a call and before the call leaves it. Resumed from its saved
// state, the run settles the call: connhost never saw its ids, records
// them cancelled and answers that it did not run, the one case where the
// model is asked again; it issues the call under a new id, which runs
// once.
func TestResumeNeverSent(t *testing.T) {
	node := needNode(t)
	c := newConnhost(t, "serve", shared.ungated)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			before := charges()
			startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, map[string]any{"killBeforeSend": true})).waitKilled(t)
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times before the call was sent", got)
			}
			rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, nil)).wait(t)
			if len(rep.Outputs) != 2 || !strings.Contains(rep.Outputs[0], "did not run") {
				t.Fatalf("the model read %q, want the settled call's \"did not run\", then the new call's outcome", rep.Outputs)
			}
			succeededWithReceipt(t, report{Outputs: rep.Outputs[1:], Final: rep.Final})
			if rep.ModelCalls != 2 {
				t.Errorf("the resumed run made %d model requests, want 2 (the call issued again, the receipt read)", rep.ModelCalls)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
		})
	}
}

// TestApprovedWhileWaiting: a gated payment is held while the runtime
// waits (io.connhost/wait); a reviewer approves it through serve's API;
// the same call runs in the same request: one charge, and the run goes on
// with the receipt in two model requests (the call, the answer).
func TestApprovedWhileWaiting(t *testing.T) {
	node := needNode(t)
	c := newConnhost(t, "serve", shared.gated)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			before := charges()
			p := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, map[string]any{"wait": 120}))
			ex := c.awaitAwaitingIn(t, p, testSession(t))
			c.decide(t, ex.Approval.ID, ex.Approval.ArgsDigest, true)
			rep := p.wait(t)
			succeededWithReceipt(t, rep)
			if rep.ModelCalls != 2 {
				t.Errorf("the run made %d model requests, want 2: one for the call, one reading its receipt", rep.ModelCalls)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
		})
	}
}

// TestApprovedWhileStopped: a gated payment pauses the run at the
// runtime's own pause (the agents' interruption, LangGraph's interrupt)
// and the process ends; a reviewer approves it out of band (serve's API,
// connhost approve on the ledger for stdio); the run is resumed from the
// runtime's saved state and the same call id runs, once, with no model
// request about it: the restarted process asks the model once, to read
// the receipt. Resumed before the decision, it stays paused.
func TestApprovedWhileStopped(t *testing.T) {
	node := needNode(t)
	for _, kind := range []string{"serve", "stdio"} {
		c := newConnhost(t, kind, shared.gated)
		for _, rt := range runtimes {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				before := charges()
				rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, nil)).wait(t)
				ap := pausedFor(t, rep)
				if kind == "serve" {
					// Resumed before anyone decided: it stays paused.
					early := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, nil)).wait(t)
					if len(early.Awaiting) != 1 || early.Awaiting[0].ApprovalID != ap.ApprovalID || len(early.Outputs) != 0 || early.ModelCalls != 0 {
						t.Fatalf("resumed before the decision, the run answered %+v, want it paused for %s with no model request", early, ap.ApprovalID)
					}
				}
				c.approve(t, ap.ApprovalID, ap.ArgsDigest)
				again := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, nil)).wait(t)
				succeededWithReceipt(t, again)
				if again.ModelCalls != 1 {
					t.Errorf("the resumed run made %d model requests, want 1 (reading the receipt)", again.ModelCalls)
				}
				if got := charges() - before; got != 1 {
					t.Fatalf("the provider charged %d times, want 1", got)
				}
			})
		}
	}
}

// TestRejectedWhileStopped: the same as TestApprovedWhileStopped, but the
// reviewer rejects the call: nothing is charged, and the resumed run tells
// the model it was rejected and not to issue it again.
func TestRejectedWhileStopped(t *testing.T) {
	node := needNode(t)
	c := newConnhost(t, "serve", shared.gated)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			before := charges()
			rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", true, nil)).wait(t)
			ap := pausedFor(t, rep)
			c.decide(t, ap.ApprovalID, ap.ArgsDigest, false)
			again := startRuntime(t, node, rt.script, scenario(c, rt, t, "resume", true, nil)).wait(t)
			if len(again.Outputs) != 1 || !strings.Contains(again.Outputs[0], "rejected") || !strings.Contains(again.Outputs[0], "Do not issue") {
				t.Fatalf("the model read %q, want the rejection and not to issue the call again", again.Outputs)
			}
			if !strings.Contains(again.Final, "rejected") {
				t.Fatalf("the run ended with %q, want the model told of the rejection", again.Final)
			}
			if again.ModelCalls != 1 {
				t.Errorf("the resumed run made %d model requests, want 1", again.ModelCalls)
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a rejected call", got)
			}
		})
	}
}

// pausedFor checks that a run paused for one approval without a tool
// result for the model, after one model request, and returns it.
func pausedFor(t *testing.T, rep report) approvalRef {
	t.Helper()
	if len(rep.Awaiting) != 1 || rep.Awaiting[0].ApprovalID == "" || len(rep.Awaiting[0].ArgsDigest) != 64 {
		t.Fatalf("the run paused for %+v, want one approval (outputs %q)", rep.Awaiting, rep.Outputs)
	}
	if len(rep.Outputs) != 0 {
		t.Fatalf("the paused run handed the model %q, want no result before the decision", rep.Outputs)
	}
	if rep.ModelCalls != 1 {
		t.Fatalf("the run made %d model requests before it paused, want 1", rep.ModelCalls)
	}
	return rep.Awaiting[0]
}

// TestWithoutAdapterServeRefuses: the runtime's own MCP integration
// (@openai/agents' mcpServers, @langchain/mcp-adapters' loadMcpTools)
// sends no ids; serve refuses the payment, naming what to pass, and
// nothing is charged.
func TestWithoutAdapterServeRefuses(t *testing.T) {
	node := needNode(t)
	c := newConnhost(t, "serve", shared.ungated)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			before := charges()
			rep := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, nil)).wait(t)
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

// TestWithoutAdapterDevWarns: against dev (no config), the same runtime
// without the adapter keeps working, and the weak promise is loud: each
// result warns the model not to repeat a call whose outcome it did not
// see, and the log warns once. Killed mid-call and started again (the
// agents' run starts over; LangGraph resumes its thread), the call is a
// new one, which the adapter prevents: either the provider charges again,
// or, should the new call fall into the first one's session, connhost's
// duplicate-intent guard holds it for a human, who rejects it here.
func TestWithoutAdapterDevWarns(t *testing.T) {
	node := needNode(t)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			c := newConnhost(t, "dev", shared.ungated)
			before := charges()
			holdNextCharge(t)
			first := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, nil))
			awaitHeld(t, first)
			first.kill(t)
			releaseHeld(t)
			again := "resume"
			if rt.name == "openai-agents" {
				again = "first" // its mcpServers integration saves no run before a tool runs
			}
			p := startRuntime(t, node, rt.script, scenario(c, rt, t, again, false, nil))
			held := c.rejectHeldDuplicate(t, p)
			rep := p.wait(t)
			// @langchain/mcp-adapters hands the model the result's
			// content block as JSON; the texts are in it either way.
			want, charged := "Succeeded (", 2
			if held {
				want, charged = "rejected", 1
			}
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], want) || !strings.Contains(rep.Outputs[0], "passed no identity") {
				t.Fatalf("without the adapter dev answered %q, want %q with the warning", rep.Outputs, want)
			}
			if n := count(c.log.String(), "came without a stable identity"); n != 1 {
				t.Fatalf("dev logged the warning %d times, want once:\n%s", n, c.log.String())
			}
			if got := charges() - before; got != charged {
				t.Fatalf("the provider charged %d times, want %d (the re-issue held for a human: %v)", got, charged, held)
			}
			t.Logf("kill + re-issue without the adapter on dev: %d charges at the provider, the re-issue held for a human: %v, each result warned", charged, held)
		})
	}
}

// rejectHeldDuplicate watches, while the runtime p runs, for a call the
// duplicate-intent guard holds for a human, and rejects it as a reviewer
// would; it reports whether there was one.
func (c *connhost) rejectHeldDuplicate(t *testing.T, p *runtimeProc) bool {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			p.done <- err
			return false
		default:
		}
		if exs := c.executions(t, "awaiting_approval"); len(exs) == 1 && exs[0].Approval != nil {
			c.decideVia(t, c.reviewerToken(), "reject", exs[0].Approval.ID, exs[0].Approval.ArgsDigest)
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the runtime neither finished nor had a call held")
	return false
}

// TestWithoutAdapterDevHoldsGated: a gated payment from a runtime without
// the adapter (per-request identity, so no retry could find its approval
// again) is held open on dev until a reviewer approves it through the
// API, and then the same tools/call finishes: one charge, one approval.
func TestWithoutAdapterDevHoldsGated(t *testing.T) {
	node := needNode(t)
	c := newConnhost(t, "dev", shared.gated)
	for _, rt := range runtimes {
		t.Run(rt.name, func(t *testing.T) {
			before, executions := charges(), c.countExecutions(t)
			p := startRuntime(t, node, rt.script, scenario(c, rt, t, "first", false, nil))
			ex := c.awaitAwaiting(t, p)
			c.approveVia(t, "", ex.Approval.ID, ex.Approval.ArgsDigest) // dev's loopback reviewer
			rep := p.wait(t)
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "Succeeded (") {
				t.Fatalf("the held call answered %q, want success", rep.Outputs)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
			if n := c.countExecutions(t) - executions; n != 1 {
				t.Fatalf("%d executions, want the one held call", n)
			}
		})
	}
}
