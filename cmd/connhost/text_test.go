package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/connhost/connhost/cli"
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
	cli.RenderProblem(&b, &httpapi.Problem{Code: httpapi.CodeSessionFenced, Detail: "fenced" + evil,
		UncertainCalls: []host.UncertainCall{{ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, Tool: "email.send"}}})
	renderReport(&b, host.RecoveryReport{Pending: 1, Uncertain: []host.UncertainCall{{ExecutionID: rec.ID, ToolCallID: rec.ToolCallID, Tool: "email.send"}}})
	out := b.String()
	if !utf8.ValidString(out) {
		t.Errorf("the output is not UTF-8")
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Bidi_Control, r) {
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
