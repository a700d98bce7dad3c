package runtimes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The helpers of the AI SDK and Mastra tests: their scenario scripts
// report more than the others' (how often the scripted model was asked,
// the tool-call ids it issued, the calls left waiting for a reviewer), and
// their gated calls are found and decided through serve's API.

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
	cfg := map[string]any{
		"adapter": adapter, "phase": phase, "session": "conv-" + conv, "thread": "thread-" + conv,
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
