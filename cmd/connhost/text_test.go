package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/httpapi"
)

// evil is provider and connector text that would drive a terminal: clear
// the screen, retitle the window, a CSI in its 8-bit form, a made-up line
// of output, a right-to-left override and a byte that is no UTF-8.
const evil = "\x1b[2J\x1b]0;pwned\x07\u009b31m\nconnhost: approved\t\u202egnp.exe\xff\x7f"

// TestTextOutputEscapesControlCharacters: every text rendering of
// connector, provider and ledger text (ls, history, an exec or decision
// result, a refusal, a recovery report) writes control characters,
// bidirectional controls and invalid UTF-8 as escapes: nothing of evil
// reaches the terminal as is, and each value stays on its line.
func TestTextOutputEscapesControlCharacters(t *testing.T) {
	rec, evs := fixtureRecord()
	rec.ToolCallID, rec.SessionID = "call"+evil, "s"+evil
	rec.Args = []byte(`{"note":"` + "\u009b\u202e" + `"}`)
	rec.Outcome.Error, rec.Outcome.Receipt, rec.Outcome.Result = "boom"+evil, "pi"+evil, []byte(`{"x":"`+"\u202e"+`"}`)
	rec.Approval.Reason, rec.Resolution.Reason = "ok"+evil, "seen"+evil
	for i := range evs {
		evs[i].Evidence, evs[i].Reason, evs[i].ToolCallID = "ev"+evil, "why"+evil, rec.ToolCallID
	}
	res := host.ResultOf(rec)
	res.Error = "failed" + evil
	var b bytes.Buffer
	failed := rec
	failed.State = ledger.StateFailed // its outcome's error is shown, not its result
	renderList(&b, []httpapi.Execution{{Result: host.ResultOf(rec)}})
	renderHistory(&b, httpapi.NewExecution(rec, evs), nil, nil)
	renderHistory(&b, httpapi.NewExecution(failed, evs), nil, nil)
	renderResult(&b, res)
	renderProblem(&b, &httpapi.Problem{Code: httpapi.CodeSessionFenced, Detail: "fenced" + evil,
		UncertainCalls: []host.UncertainCall{{ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, Tool: "email.send"}}})
	renderReport(&b, host.RecoveryReport{Pending: 1, Uncertain: []host.UncertainCall{{ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, Tool: "email.send"}}})
	out := b.String()
	if !utf8.ValidString(out) {
		t.Errorf("the output is not UTF-8")
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
			t.Fatalf("byte %d: %U reaches the terminal:\n%q", i, r, out)
		}
	}
	if strings.Contains(out, "\nconnhost: approved") {
		t.Errorf("a value started a line of its own:\n%s", out)
	}
	for _, want := range []string{`\x1b[2J`, `\x1b]0;pwned\x07`, `\u009b31m`, `\nconnhost: approved\t`, `\u202egnp.exe`, `\xff`, `\x7f`} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks the escape %s:\n%s", want, out)
		}
	}
}

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"plain text, ünïcödé ✓": "plain text, ünïcödé ✓",
		"a\x00b":                `a\x00b`,
		"\r\n\t":                `\r\n\t`,
		"\u0085\u200f\u2066":    `\u0085\u200f\u2066`,
		"cut \xe2\x82":          `cut \xe2\x82`,
	} {
		if got := termSafe(in); got != want {
			t.Errorf("termSafe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := termSafeLines("line 1\x1b\nline 2"); got != "line 1\\x1b\nline 2" {
		t.Errorf("termSafeLines: %q", got)
	}
	if got := termSafeLines("unknown flag\n\nDid you mean this?\n\t--state\tx\n"); got != "unknown flag\n\nDid you mean this?\n    --state\\tx" {
		t.Errorf("termSafeLines of a suggestion: %q", got)
	}
}

// FuzzTermSafe: whatever a connector, a provider or the ledger hands the
// text output, termSafe writes valid UTF-8 without one control character,
// DEL, C1 control or bidirectional control, and never changes text that
// has none.
func FuzzTermSafe(f *testing.F) {
	for _, s := range []string{"", "plain", evil, "\u200f\u2066x", "\xe2\x82", "tab\there", "ünïcödé ✓"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := termSafe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("termSafe(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
				t.Fatalf("termSafe(%q) = %q keeps %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s)
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
				clean = false
			}
		}
		if clean && out != s {
			t.Fatalf("termSafe(%q) = %q changed clean text", s, out)
		}
	})
}
