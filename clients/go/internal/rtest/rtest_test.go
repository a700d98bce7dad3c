package rtest_test

import (
	"strings"
	"testing"

	"github.com/connhost/connhost/clients/go/internal/rtest/rt"
)

// checkAnswered checks that the run ended with the model's answer built
// on one tool result that starts with want, after two model requests in
// all: the one that issued the call and the one that read its result. A
// third would be the model asked to issue the call again.
func checkAnswered(t *testing.T, a *app, rep rt.Report, want string) {
	t.Helper()
	if rep.Paused {
		t.Fatalf("the run paused for a reviewer: %+v", rep)
	}
	if len(rep.Results) != 1 || !strings.HasPrefix(rep.Results[0], want) {
		t.Fatalf("the model read %q, want one result starting %q", rep.Results, want)
	}
	if !strings.Contains(rep.Final, rep.Results[0]) {
		t.Fatalf("the run ended with %q, not with the model's answer on the result", rep.Final)
	}
	if n := a.modelRequests(); n != 2 {
		t.Fatalf("the model was asked %d times in all, want 2 (the call, then its result)", n)
	}
	t.Logf("the model read: %s", rep.Results[0])
}

// TestKillWhileCharging: the application's payment is at the provider,
// held there, when the runtime is killed (SIGKILL); the provider then
// applies it. Restarted from the framework's own saved state (ADK's
// session database, Eino's checkpoint), the run continues: the adapter
// settles the killed call by its original ids, the model reads the
// charge's receipt, and no human is asked. The provider charged once.
func TestKillWhileCharging(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			a := newApp(t, name, false)
			before := charges()
			holdNextCharge(t)
			p := a.start(t, a.config("first"))
			awaitHeld(t, p)
			p.kill(t)
			releaseHeld(t)
			if n := a.modelRequests(); n != 1 {
				t.Fatalf("the model was asked %d times before the kill, want 1", n)
			}
			rep := a.run(t, a.config("resume"))
			checkAnswered(t, a, rep, "Succeeded (execution ex_")
			if !strings.Contains(rep.Results[0], ", receipt pi_") {
				t.Fatalf("the model read %q, want the charge's receipt", rep.Results[0])
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times for one payment killed mid-charge, want 1", got)
			}
		})
	}
}

// TestApprovedWhileWaiting: a gated payment pauses the run on the
// framework's own pause (ADK's tool confirmation, Eino's interrupt) while
// the application waits for the decision; a reviewer approves it through
// the connhost HTTP API the application serves; the same call runs, once,
// and the model reads its outcome without being asked to issue it again.
func TestApprovedWhileWaiting(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			a := newApp(t, name, true)
			before := charges()
			c := a.withAPI(a.config("first"))
			c.WaitSeconds = 300
			p := a.start(t, c)
			ap := awaitAPI(t, c, p).awaitAwaiting(t, p)
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times before anyone approved", got)
			}
			awaitAPI(t, c, p).decide(t, ap, "approve", "matches the invoice")
			rep := p.wait(t)
			checkAnswered(t, a, rep, "Succeeded (execution "+ap.ExecutionID)
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
		})
	}
}

// TestApprovedWhileStopped: the run pauses on a gated payment and the
// application stops; a reviewer approves with `connhost approve` on its
// ledger; the application starts again and resumes the run from the
// framework's saved state: the same call runs, once, with no new model
// call to issue it.
func TestApprovedWhileStopped(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			a := newApp(t, name, true)
			before := charges()
			first := a.run(t, a.config("first"))
			if !first.Paused || first.ApprovalID == "" || len(first.ArgsDigest) != 64 {
				t.Fatalf("the first run reported %+v, want a pause naming the approval and its digest", first)
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times before anyone approved", got)
			}
			approveOnLedger(t, a.config("resume"), first.ApprovalID, first.ArgsDigest)
			rep := a.run(t, a.config("resume"))
			checkAnswered(t, a, rep, "Succeeded (execution ex_")
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times, want 1", got)
			}
		})
	}
}

// TestRejected: a reviewer rejects the gated payment through the API
// while the application waits: nothing is charged, and the model reads a
// refusal that tells it not to issue the call again (it does not).
func TestRejected(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			a := newApp(t, name, true)
			before := charges()
			c := a.withAPI(a.config("first"))
			c.WaitSeconds = 300
			p := a.start(t, c)
			api := awaitAPI(t, c, p)
			api.decide(t, api.awaitAwaiting(t, p), "reject", "wrong card")
			rep := p.wait(t)
			checkAnswered(t, a, rep, "Not done: rejected (execution ex_")
			for _, want := range []string{"by rita: wrong card", "Do not issue it again"} {
				if !strings.Contains(rep.Results[0], want) {
					t.Fatalf("the model read %q, want it to say %q", rep.Results[0], want)
				}
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a rejected payment", got)
			}
		})
	}
}

// TestWithoutAdapterRefused: the framework's own MCP integration (ADK's
// mcptoolset; for Eino, MCP tools over the MCP Go SDK) against connhost
// serve's /mcp sends no ids; serve refuses the payment, telling the model
// why and not to issue it again, and nothing is charged.
func TestWithoutAdapterRefused(t *testing.T) {
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			u := serveURL(t)
			a := newApp(t, name, false)
			before := charges()
			c := a.config("plain")
			c.MCPURL, c.MCPToken = u+"/mcp", tokenRuntime
			rep := a.run(t, c)
			if len(rep.Results) != 1 || !strings.Contains(rep.Results[0], "identity_required") || !strings.Contains(rep.Results[0], "Do not issue this call again") {
				t.Fatalf("without the adapter the model read %q, want the identity_required refusal", rep.Results)
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a refused call", got)
			}
		})
	}
}
