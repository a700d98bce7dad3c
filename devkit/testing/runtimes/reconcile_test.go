package runtimes_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

// The runtimes whose adapters resume by reconciliation: before a resumed
// run asks the model again, the adapter settles the calls its saved state
// holds without a result, by their original ids, and writes the answers
// into the runtime's history; a call that awaits a reviewer is held on the
// runtime's own pause. Their scenario scripts take the same configuration
// and print the same report, and their scripted models issue a new
// tool-call id whenever they are asked without a result, as a model API
// does: a model asked again shows as a second id.
type reconRuntime struct {
	name   string
	script string
	// packages must be installed in clients/js.
	packages []string
	// pause names the runtime's own pause in failure messages.
	pause string
}

var reconRuntimes = []reconRuntime{
	// The application stores the conversation's messages after each step,
	// as the SDK's documentation shows; the adapter stores a call before
	// it runs through the same function.
	{name: "ai-sdk", script: "aisdk-scenario.mjs", packages: []string{"ai", "@ai-sdk/mcp", "@modelcontextprotocol/sdk"},
		pause: "the SDK's tool-approval-request"},
	// The agent's memory and the snapshots of suspended runs in a libSQL
	// file, as Mastra's documentation sets up state that survives a
	// restart.
	{name: "mastra", script: "mastra-scenario.mjs", packages: []string{"@mastra/core", "@mastra/libsql", "@mastra/memory", "@mastra/mcp", "ai", "@modelcontextprotocol/sdk"},
		pause: "a suspended run"},
}

func needRecon(t *testing.T) string {
	t.Helper()
	var pkgs []string
	for _, rt := range reconRuntimes {
		pkgs = append(pkgs, rt.packages...)
	}
	return testenv.Node(t, shared.jsDir, pkgs...)
}

// TestReconcileKill: (a) the runtime process is killed (SIGKILL) while
// the payment is held at the provider; restarted from its own saved state
// (the stored messages, the memory thread), the adapter settles the
// unanswered call by its original ids before the model is asked again,
// and the run continues with the charge's receipt: one charge, no new
// tool call, nobody asked. Over serve and over a stdio connhost mcp that
// the killed runtime had launched. (d) the runtime's own MCP integration
// (@ai-sdk/mcp's tools, @mastra/mcp's MCPClient) against serve is refused
// for want of an identity, and nothing is charged. And a call the runtime
// stored but never sent (the process died in between) is settled as never
// run: the model is told so, and only then issues it again.
func TestReconcileKill(t *testing.T) {
	node := needRecon(t)
	serve := newConnhost(t, "serve", shared.ungated)
	for _, rt := range reconRuntimes {
		for _, kind := range []string{"serve", "stdio"} {
			t.Run(rt.name+"/"+kind, func(t *testing.T) {
				start := time.Now()
				c := serve
				if kind == "stdio" {
					c = newConnhost(t, "stdio", shared.ungated)
				}
				before := charges()
				holdNextCharge(t)
				cfg := jsScenario(c, t, rt.name, "first", true, "call_kill_1")
				first := startRuntime(t, node, rt.script, cfg)
				awaitHeld(t, first)
				first.kill(t)
				releaseHeld(t)
				c.awaitStdioExit(t)
				rep := startRuntime(t, node, rt.script, jsScenario(c, t, rt.name, "resume", true, "call_kill_1")).waitJS(t)
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
				if kind == "serve" && c.awaitingIn(t, sessionOf(cfg)) != 0 {
					t.Fatal("the resumed call is held for a human")
				}
				t.Logf("killed mid-charge and resumed over %s: %d charge, %d model request after the restart (%.1fs)", kind, charges()-before, rep.ModelRequests, time.Since(start).Seconds())
			})
		}
		t.Run(rt.name+"/never-reached", func(t *testing.T) {
			before := charges()
			cfg := jsScenario(serve, t, rt.name, "first", true, "call_never_1")
			cfg["crashAfterSave"] = true
			startRuntime(t, node, rt.script, cfg).awaitKilled(t)
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a call killed before it was sent", got)
			}
			rep := startRuntime(t, node, rt.script, jsScenario(serve, t, rt.name, "resume", true, "call_never_1")).waitJS(t)
			if len(rep.Outputs) < 1 || !strings.Contains(rep.Outputs[0], "did not run") {
				t.Fatalf("the model read %q for the call that never reached connhost, want that it did not run", rep.Outputs)
			}
			if len(rep.Issued) != 1 {
				t.Fatalf("the model issued %q, want the one call it was told did not run, under a new id", rep.Issued)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1 (the call issued again)", got)
			}
			if !strings.Contains(rep.Final, newestIntent(t)) {
				t.Fatalf("the answer %q does not carry the charge's receipt", rep.Final)
			}
		})
		t.Run(rt.name+"/without-adapter", func(t *testing.T) {
			before := charges()
			rep := startRuntime(t, node, rt.script, jsScenario(serve, t, rt.name, "first", false, "call_plain_1")).waitJS(t)
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "identity_required") {
				t.Fatalf("the runtime's own MCP tool answered %q, want the identity_required refusal", rep.Outputs)
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a refused call", got)
			}
		})
	}
}

// TestReconcileApproval: a gated payment through the adapter, on serve.
// (b) approved through the API while the runtime waits (io.connhost/wait):
// the same request runs it. (b) approved while the runtime is stopped on
// its own pause: the resumed run settles the same call, which runs once,
// and the model is asked only for its answer. (c) rejected while stopped:
// nothing is charged and the model reads the refusal, and is not asked to
// issue the call again.
func TestReconcileApproval(t *testing.T) {
	node := needRecon(t)
	c := newConnhost(t, "serve", shared.gated)
	for _, rt := range reconRuntimes {
		t.Run(rt.name+"/approved-while-waiting", func(t *testing.T) {
			start := time.Now()
			before := charges()
			cfg := jsScenario(c, t, rt.name, "first", true, "call_wait_1")
			cfg["wait"] = 300
			p := startRuntime(t, node, rt.script, cfg)
			ex := c.gatedCall(t, p, sessionOf(cfg), "call_wait_1")
			c.approveVia(t, tokenRita, ex.Approval.ID, ex.Approval.ArgsDigest)
			rep := p.waitJS(t)
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
			if !strings.Contains(rep.Final, newestIntent(t)) {
				t.Fatalf("the answer %q does not carry the charge's receipt", rep.Final)
			}
			if !slices.Equal(rep.Issued, []string{"call_wait_1"}) || rep.ModelRequests != 2 {
				t.Fatalf("the model got %d requests and issued %q; want 2 (the call, the answer) and the one call", rep.ModelRequests, rep.Issued)
			}
			t.Logf("approved while the runtime waited: %d charge (%.1fs)", charges()-before, time.Since(start).Seconds())
		})

		t.Run(rt.name+"/approved-while-stopped", func(t *testing.T) {
			start := time.Now()
			before := charges()
			cfg := jsScenario(c, t, rt.name, "first", true, "call_stop_1")
			first := startRuntime(t, node, rt.script, cfg).waitJS(t)
			if !slices.Equal(first.Paused, []string{"call_stop_1"}) {
				t.Fatalf("the run paused on %q, want %s for call_stop_1", first.Paused, rt.pause)
			}
			ex := c.gatedCall(t, nil, sessionOf(cfg), "call_stop_1")
			c.approveVia(t, tokenRita, ex.Approval.ID, ex.Approval.ArgsDigest)
			rep := startRuntime(t, node, rt.script, jsScenario(c, t, rt.name, "resume", true, "call_stop_1")).waitJS(t)
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
			t.Logf("approved while the runtime was stopped: %d charge (%.1fs)", charges()-before, time.Since(start).Seconds())
		})

		t.Run(rt.name+"/rejected", func(t *testing.T) {
			before := charges()
			cfg := jsScenario(c, t, rt.name, "first", true, "call_reject_1")
			first := startRuntime(t, node, rt.script, cfg).waitJS(t)
			if !slices.Equal(first.Paused, []string{"call_reject_1"}) {
				t.Fatalf("the run paused on %q, want %s for call_reject_1", first.Paused, rt.pause)
			}
			ex := c.gatedCall(t, nil, sessionOf(cfg), "call_reject_1")
			c.rejectVia(t, ex.Approval.ID, ex.Approval.ArgsDigest, "not this customer")
			rep := startRuntime(t, node, rt.script, jsScenario(c, t, rt.name, "resume", true, "call_reject_1")).waitJS(t)
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a rejected call", got)
			}
			if len(rep.Outputs) != 1 || !strings.Contains(rep.Outputs[0], "rejected") || !strings.Contains(rep.Outputs[0], "not issue it again") {
				t.Fatalf("the model read %q, want the rejection and not to issue it again", rep.Outputs)
			}
			if len(rep.Issued) != 0 {
				t.Fatalf("the model issued %q after the rejection", rep.Issued)
			}
			t.Logf("the model read: %s", rep.Outputs[0])
		})
	}
}

// jsReport is what aisdk-scenario.mjs and mastra-scenario.mjs print.
type jsReport struct {
	// Outputs are the tool results the model read, in order.
	Outputs []string `json:"outputs"`
	// Final is the model's last answer ("" when the run paused).
	Final string `json:"final"`
	// ModelRequests is how many requests the scripted model got.
	ModelRequests int `json:"modelRequests"`
	// Issued are the tool-call ids the model issued in this process.
	Issued []string `json:"issued"`
	// Pending are the calls the adapter's resume left awaiting a
	// reviewer; Paused the calls the run paused on (the AI SDK's approval
	// request, a Mastra suspended run).
	Pending []struct {
		ToolCallID string `json:"toolCallId"`
	} `json:"pending"`
	Paused []string `json:"paused"`
}

// jsScenario is the configuration of one run of a scenario script
// against c. The session is the test's: the emulator outlives the tests,
// and the same ids would make the same idempotency key there.
func jsScenario(c *connhost, t *testing.T, state, phase string, adapter bool, callID string) map[string]any {
	conv := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	// The AI SDK's session is the conversation's id, Mastra's the memory
	// thread: the same string, so that the test finds the call by it.
	cfg := map[string]any{
		"adapter": adapter, "phase": phase, "session": "conv-" + conv, "thread": "conv-" + conv,
		"callId": callID, "tool": payment,
		"arguments": map[string]any{"amount": 500, "currency": "usd", "payment_method": "pm_card_visa"},
		"state":     c.data + "/" + state + "-" + conv,
	}
	c.target(cfg)
	return cfg
}

// waitJS waits for a scenario script to finish and returns its report.
func (p *runtimeProc) waitJS(t *testing.T) jsReport {
	t.Helper()
	select {
	case err := <-p.done:
		var rep jsReport
		if jerr := json.Unmarshal([]byte(lastLine(p.stdout.String())), &rep); err != nil || jerr != nil {
			t.Fatalf("runtime: %v (report: %v)\nstdout: %s\nstderr: %s", err, jerr, p.stdout.String(), p.stderr.String())
		}
		return rep
	case <-time.After(10 * time.Minute):
		t.Fatalf("runtime did not finish\nstderr: %s", p.stderr.String())
	}
	return jsReport{}
}

// awaitKilled waits for a scenario script that SIGKILLs itself
// (crashAfterSave) to die so.
func (p *runtimeProc) awaitKilled(t *testing.T) {
	t.Helper()
	select {
	case err := <-p.done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("the runtime exited with %v, want killed by SIGKILL\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the runtime exited with %v, want killed by SIGKILL\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("the runtime did not kill itself\nstderr: %s", p.stderr.String())
	}
}

// gatedExecution is an execution awaiting approval, as serve lists it.
type gatedExecution struct {
	ExecutionID string `json:"execution_id"`
	SessionID   string `json:"session_id"`
	ToolCallID  string `json:"tool_call_id"`
	State       string `json:"state"`
	Approval    *struct {
		ID         string `json:"id"`
		ArgsDigest string `json:"args_digest"`
	} `json:"approval"`
}

// listAs lists serve's executions in state ("" for all) as rita sees
// them.
func (c *connhost) listAs(t *testing.T, state string) []gatedExecution {
	t.Helper()
	u := c.url + "/v1/executions"
	if state != "" {
		u += "?state=" + url.QueryEscape(state)
	}
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+tokenRita)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	var out struct {
		Executions []gatedExecution `json:"executions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out.Executions
}

// gatedCall returns the execution of (session, tool-call id) awaiting
// approval on serve, waiting for it to appear while p (if not nil) runs.
func (c *connhost) gatedCall(t *testing.T, p *runtimeProc, session, callID string) gatedExecution {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		for _, ex := range c.listAs(t, "awaiting_approval") {
			if ex.SessionID == session && ex.ToolCallID == callID && ex.Approval != nil {
				return ex
			}
		}
		if p != nil {
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("the runtime finished while its gated call should be held for a reviewer: %v\nstdout: %s\nstderr: %s", err, p.stdout.String(), p.stderr.String())
			default:
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no execution of %s/%s came to await approval", session, callID)
	return gatedExecution{}
}

// awaitingIn counts the executions of session awaiting approval: a second
// one would be a second approval asked of a human for the same payment.
func (c *connhost) awaitingIn(t *testing.T, session string) int {
	t.Helper()
	n := 0
	for _, ex := range c.listAs(t, "awaiting_approval") {
		if ex.SessionID == session {
			n++
		}
	}
	return n
}

// rejectVia rejects an approval through the API as rita.
func (c *connhost) rejectVia(t *testing.T, id, digest, reason string) {
	t.Helper()
	body := fmt.Sprintf(`{"digest":%q,"reason":%q}`, digest, reason)
	req, _ := http.NewRequest(http.MethodPost, c.url+"/v1/approvals/"+id+"/reject", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokenRita)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reject %s: %s", id, resp.Status)
	}
}

// newestIntent is the id of the payment intent the emulator created last:
// the receipt connhost records for a charge.
func newestIntent(t *testing.T) string {
	t.Helper()
	pis := shared.sb.Payments().PaymentIntents()
	if len(pis) == 0 {
		t.Fatal("the emulator holds no payment intent")
	}
	return pis[0].ID
}

// sessionOf is the session jsScenario gives the test's runs.
func sessionOf(cfg map[string]any) string { return cfg["session"].(string) }
