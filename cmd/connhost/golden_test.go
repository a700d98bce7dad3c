package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden compares got with testdata/name.golden (rewritten with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update and review the new file)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update and review the diff); got:\n%s", path, got)
	}
}

// runCLI runs the CLI in-process and returns exit code, stdout, stderr.
func runCLI(t *testing.T, a *app, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if a == nil {
		a = newApp(strings.NewReader(""), &out, &errb)
	} else {
		a.stdout, a.stderr = &out, &errb
	}
	code := a.execute(context.Background(), args)
	return code, out.String(), errb.String()
}

// TestHelpGolden pins the help of the root and of every command.
func TestHelpGolden(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, prefix []string)
	walk = func(c *cobra.Command, prefix []string) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			p := append(append([]string(nil), prefix...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(newApp(nil, nil, nil).rootCommand(), nil)
	paths = append(paths, nil)
	for _, p := range paths {
		name := "help"
		if len(p) > 0 {
			name = "help_" + strings.Join(p, "_")
		}
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, append(p, "--help")...)
			if code != cli.ExitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			golden(t, name, []byte(out))
		})
	}
}

// TestEveryCommandHasExample: habit 9 — every command documents itself.
func TestEveryCommandHasExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "exit-codes" {
				continue
			}
			if sub.Runnable() && sub.Example == "" {
				t.Errorf("%s has no Example", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newApp(nil, nil, nil).rootCommand())
}

func TestExitCodesHelp(t *testing.T) {
	code, out, _ := runCLI(t, nil, "help", "exit-codes")
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	golden(t, "exit_codes", []byte(out))
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// fixtureRecord is a payment that was approved, dispatched, lost in a
// crash and resolved by an operator.
func fixtureRecord() (ledger.Record, []ledger.Event) {
	id := "ex_aaaabbbbccccddddeeeeffffgggghhhh"
	rec := ledger.Record{
		Version: 1, ID: id, Namespace: "default", SessionID: "s1", ToolCallID: "call_1",
		Connector: "payments", Operation: "create_payment",
		ManifestDigest: strings.Repeat("a", 64), ModuleDigest: strings.Repeat("b", 64),
		Effect: "external", Policy: "manual", PolicyVersion: "0123456789abcdef",
		Args: []byte(`{"amount": 500, "currency": "usd"}`), ArgsDigest: strings.Repeat("c", 64),
		IdempotencyKey: "ck_key", State: ledger.StateSucceeded, Attempt: 1, MaxAttempts: 3,
		CreatedAt: t0, UpdatedAt: t0.Add(20 * time.Minute),
		Approval: &ledger.Approval{ID: "ap_aaaabbbbccccddddeeeeffffgggghhhh", ArgsDigest: strings.Repeat("c", 64), PolicyVersion: "0123456789abcdef",
			RequestedAt: t0, ExpiresAt: t0.Add(time.Hour), Decision: ledger.ApprovalApproved, By: "rita", Reason: "amount checked",
			DecidedAt: t0.Add(2 * time.Minute), ConsumedBy: 1},
		Outcome:    &ledger.Outcome{Kind: "operator", Result: []byte(`{"id":"pi_123","status":"succeeded"}`), Receipt: "pi_123", Source: "operator", Attempt: 1},
		Resolution: &ledger.Resolution{Applied: true, By: "olga", Reason: "found pi_123 in the dashboard", At: t0.Add(20 * time.Minute)},
		Events:     5,
	}
	evs := []ledger.Event{
		{Seq: 1, Time: t0, ExecutionID: id, ToolCallID: "call_1", To: ledger.StateAwaitingApproval, Decision: "intent", Evidence: "approval ap_aaaabbbbccccddddeeeeffffgggghhhh requested", Actor: "executor"},
		{Seq: 2, Time: t0.Add(2 * time.Minute), ExecutionID: id, ToolCallID: "call_1", From: ledger.StateAwaitingApproval, To: ledger.StateApproved, Decision: "approved", Evidence: "digest cccccccccccc", Actor: "rita", Reason: "amount checked"},
		{Seq: 3, Time: t0.Add(3 * time.Minute), ExecutionID: id, ToolCallID: "call_1", Attempt: 1, From: ledger.StateApproved, To: ledger.StateDispatched, Decision: "dispatch", Evidence: "approval ap_aaaabbbbccccddddeeeeffffgggghhhh by rita", Actor: "executor"},
		{Seq: 4, Time: t0.Add(10 * time.Minute), ExecutionID: id, ToolCallID: "call_1", Attempt: 1, From: ledger.StateDispatched, To: ledger.StateRecoveryRequired, Decision: "manual_policy", Evidence: "dispatched attempt 1 has no recorded outcome", Actor: "recovery"},
		{Seq: 5, Time: t0.Add(20 * time.Minute), ExecutionID: id, ToolCallID: "call_1", Attempt: 1, From: ledger.StateRecoveryRequired, To: ledger.StateSucceeded, Decision: "operator_applied", Evidence: "pi_123", Actor: "olga", Reason: "found pi_123 in the dashboard"},
	}
	return rec, evs
}

func TestRenderGolden(t *testing.T) {
	rec, evs := fixtureRecord()
	other := rec
	other.ID, other.ToolCallID, other.SessionID, other.Namespace = "ex_zzzz", "call_2", "s2", "tenant-a"
	other.State, other.Attempt, other.Approval, other.Outcome, other.Resolution = ledger.StateRecoveryRequired, 1, nil, nil, nil
	other.Connector, other.Operation = "email", "send"

	var b bytes.Buffer
	renderList(&b, []httpapi.Execution{{Result: host.ResultOf(rec)}, {Result: host.ResultOf(other)}})
	golden(t, "ls", b.Bytes())

	b.Reset()
	renderList(&b, nil)
	golden(t, "ls_empty", b.Bytes())

	b.Reset()
	renderHistory(&b, httpapi.NewExecution(rec, evs), shippedOperation(t, "payments", "create_payment"), nil)
	golden(t, "history", b.Bytes())

	// A call the duplicate-intent guard held, with arguments that would
	// rewrite an operator's terminal: shown as escapes.
	held := rec
	held.ID, held.ToolCallID, held.State, held.Attempt = "ex_zzzz", "call_2", ledger.StateAwaitingApproval, 0
	held.Outcome, held.Resolution, held.DuplicateOf, held.DuplicateWindow = nil, nil, rec.ID, 10*time.Minute
	held.Args = []byte(`{"amount":500,"currency":"usd","payment_method":"pm_card_visa","description":"\u001b[2J\u202einvoice"}`)
	held.Approval = &ledger.Approval{ID: "ap_zzzz", ArgsDigest: strings.Repeat("d", 64), PolicyVersion: "0123456789abcdef",
		RequestedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(61 * time.Minute), Decision: ledger.ApprovalPending}
	b.Reset()
	earlier := host.ResultOf(rec)
	renderHistory(&b, httpapi.NewExecution(held, evs[:1]), shippedOperation(t, "payments", "create_payment"), &earlier)
	golden(t, "history_duplicate", b.Bytes())

	b.Reset()
	cli.WriteJSON(&b, httpapi.NewExecution(rec, evs))
	golden(t, "history_json", b.Bytes())

	b.Reset()
	renderResult(&b, host.ResultOf(rec))
	golden(t, "result", b.Bytes())

	b.Reset()
	renderReport(&b, host.RecoveryReport{Pending: 4, Decisions: map[host.Status]int{host.StatusSucceeded: 2, host.StatusAwaitingApproval: 1, host.StatusRecoveryRequired: 1},
		Uncertain: []host.UncertainCall{{ExecutionID: "ex_zzzz", ToolCallID: "call_2", Tool: "email.send", Attempt: 1}}})
	golden(t, "recover_report", b.Bytes())
}

// TestProblemGolden pins how refusals read, as text and as --json.
func TestProblemGolden(t *testing.T) {
	cases := map[string]error{
		"fenced": &host.FencedError{Namespace: "default", SessionID: "s1", Calls: []host.UncertainCall{
			{ExecutionID: "ex_zzzz", ToolCallID: "call_2", Tool: "email.send", Attempt: 1}}},
		"intent_mismatch": &host.IntentMismatchError{ExecutionID: "ex_aaaa", ToolCallID: "call_1", RecordedTool: "payments.create_payment", GivenTool: "payments.create_payment",
			RecordedDigest: strings.Repeat("c", 64), GivenDigest: strings.Repeat("d", 64)},
		"usage": cli.Usagef("exec needs --session"),
		"ledger_damaged": &ledger.DamageError{Kind: ledger.DamageMissing, Dir: ".connhost/ledger", Mark: ".connhost/ledger.mark",
			What: "the ledger directory .connhost/ledger is missing, but its mark .connhost/ledger.mark says it held ledger 0123456789abcdef0123456789abcdef with 42 committed writes (mark written 2026-11-29T12:00:00Z)"},
	}
	for name, err := range cases {
		t.Run(name, func(t *testing.T) {
			p := problemFor(err, name == "usage")
			var b bytes.Buffer
			cli.RenderProblem(&b, p)
			golden(t, "problem_"+name, b.Bytes())
			b.Reset()
			cli.WriteJSON(&b, p)
			golden(t, "problem_"+name+"_json", b.Bytes())
		})
	}
}

// shippedOperation returns an operation of a shipped manifest.
func shippedOperation(t *testing.T, connector, op string) *manifests.Operation {
	t.Helper()
	m, err := manifests.Load(filepath.Join("..", "..", "manifests", connector+".toml"))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := m.Operation(op)
	if !ok {
		t.Fatalf("%s has no operation %s", connector, op)
	}
	return o
}
