package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// wrapText wraps s at width columns, each line prefixed by indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(s) {
		n := len([]rune(w))
		if line > 0 && line+1+n > width {
			b.WriteString("\n")
			line = 0
		}
		if line == 0 {
			b.WriteString(indent)
			line = len(indent)
		} else {
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += n
	}
	b.WriteString("\n")
	return b.String()
}

// clipText shortens s to n runes, ending it with "…" when it was cut.
func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// lastLines joins the last three lines of s with " | ".
func lastLines(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// termSafe returns s fit to be written to a terminal as one value: every
// control character (C0, DEL, C1: ESC and CSI start terminal escape
// sequences; a newline or tab would start a made-up line or column),
// every Unicode bidirectional control (it reorders what follows on the
// screen) and every byte of invalid UTF-8 is written as an escape, \n,
// \t, \r, \x1b, \u009b or \u202e. The CLI's text output passes connector,
// provider and ledger text through it; --json output is JSON's own
// escaping.
func termSafe(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isBidiControl reports whether r is a Unicode bidirectional formatting
// character (UAX #9): marks, embeddings, overrides and isolates.
func isBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// safeArgs returns args with every string (and every value of a string
// type, such as ledger.State) passed through termSafe, for the Printf
// calls of text output.
func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = termSafe(v)
		case error:
			out[i] = termSafe(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.IsValid() && rv.Kind() == reflect.String {
				out[i] = termSafe(rv.String())
			} else {
				out[i] = a
			}
		}
	}
	return out
}

// fprintf is fmt.Fprintf with every string argument passed through
// termSafe: the format is the CLI's layout, the arguments are values.
func fprintf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, safeArgs(args)...)
}

// termSafeLines is termSafe for text of several lines, such as a refusal
// that lists problems or suggestions: its newlines stay, the tabs that
// indent a line become four spaces each, and the blank lines that end it
// are dropped.
func termSafeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = strings.Repeat("    ", len(l)-len(rest)) + termSafe(rest)
	}
	return strings.Join(lines, "\n")
}

// indentLines indents every line of s after the first that is not empty.
func indentLines(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = indent + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// shortDuration formats d as manifests write durations: 10m, 1h, 1m30s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
