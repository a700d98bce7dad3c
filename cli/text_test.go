package cli

import (
	"testing"
	"unicode/utf8"
)

// evil is provider and connector text that would drive a terminal: clear
// the screen, retitle the window, a CSI in its 8-bit form, a made-up line
// of output, a right-to-left override and a byte that is no UTF-8.
const evil = "\x1b[2J\x1b]0;pwned\x07\u009b31m\nconnhost: approved\t\u202egnp.exe\xff\x7f"

func TestTermSafe(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"plain text, ünïcödé ✓": "plain text, ünïcödé ✓",
		"a\x00b":                `a\x00b`,
		"\r\n\t":                `\r\n\t`,
		"\u0085\u200f\u2066":    `\u0085\u200f\u2066`,
		"cut \xe2\x82":          `cut \xe2\x82`,
	} {
		if got := TermSafe(in); got != want {
			t.Errorf("TermSafe(%q) = %q, want %q", in, got, want)
		}
	}
	if got := TermSafeLines("line 1\x1b\nline 2"); got != "line 1\\x1b\nline 2" {
		t.Errorf("termSafeLines: %q", got)
	}
	if got := TermSafeLines("unknown flag\n\nDid you mean this?\n\t--state\tx\n"); got != "unknown flag\n\nDid you mean this?\n    --state\\tx" {
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
		out := TermSafe(s)
		if !utf8.ValidString(out) {
			t.Fatalf("TermSafe(%q) = %q: not UTF-8", s, out)
		}
		for _, r := range out {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
				t.Fatalf("TermSafe(%q) = %q keeps %U", s, out, r)
			}
		}
		clean := utf8.ValidString(s)
		for _, r := range s {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || isBidiControl(r) {
				clean = false
			}
		}
		if clean && out != s {
			t.Fatalf("TermSafe(%q) = %q changed clean text", s, out)
		}
	})
}
