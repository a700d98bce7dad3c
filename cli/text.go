package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/connhost/connhost/server/httpapi"
)

// WrapText wraps s at width columns, each line prefixed by indent.
func WrapText(s string, width int, indent string) string {
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

// ClipText shortens s to n runes, ending it with "…" when it was cut.
func ClipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// LastLines joins the last three lines of s with " | ".
func LastLines(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// TermSafe returns s fit to be written to a terminal as one value: every
// control character (C0, DEL, C1: ESC and CSI start terminal escape
// sequences; a newline or tab would start a made-up line or column),
// every Unicode bidirectional control (it reorders what follows on the
// screen) and every byte of invalid UTF-8 is written as an escape, \n,
// \t, \r, \x1b, \u009b or \u202e. The CLI's text output passes connector,
// provider and ledger text through it; --json output is JSON's own
// escaping.
func TermSafe(s string) string {
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
// type, such as ledger.State) passed through TermSafe, for the Printf
// calls of text output.
func safeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = TermSafe(v)
		case error:
			out[i] = TermSafe(v.Error())
		default:
			if rv := reflect.ValueOf(a); rv.IsValid() && rv.Kind() == reflect.String {
				out[i] = TermSafe(rv.String())
			} else {
				out[i] = a
			}
		}
	}
	return out
}

// Fprintf is fmt.Fprintf with every string argument passed through
// TermSafe: the format is the CLI's layout, the arguments are values.
func Fprintf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, safeArgs(args)...)
}

// TermSafeLines is TermSafe for text of several lines, such as a refusal
// that lists problems or suggestions: its newlines stay, the tabs that
// indent a line become four spaces each, and the blank lines that end it
// are dropped.
func TermSafeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = strings.Repeat("    ", len(l)-len(rest)) + TermSafe(rest)
	}
	return strings.Join(lines, "\n")
}

// IndentLines indents every line of s after the first that is not empty.
func IndentLines(s, indent string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = indent + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// OrDash is s, or "-" for an empty s (a column with no value).
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// RenderProblem writes a problem for people: one "connhost: …" line, then
// the details a reader needs to act on it.
func RenderProblem(w io.Writer, p *httpapi.Problem) {
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	// A message may hold several lines (every problem of a config file):
	// the lines after the first are indented, so none passes for a
	// message of its own, and every other control character is escaped.
	fmt.Fprintf(w, "connhost: %s\n", IndentLines(TermSafeLines(msg), "  "))
	if p.Code == httpapi.CodeInternal || p.Code == httpapi.CodeBadRequest {
		return
	}
	Fprintf(w, "  code: %s\n", p.Code)
	if p.RecordedDigest != "" {
		Fprintf(w, "  recorded: %s args digest %s\n  given:    %s args digest %s\n", p.RecordedTool, p.RecordedDigest, p.GivenTool, p.GivenDigest)
	}
	if len(p.UncertainCalls) > 0 {
		fmt.Fprintln(w, "  uncertain calls (resolve each with connhost resolve):")
		for _, u := range p.UncertainCalls {
			Fprintf(w, "    %s  tool call %s  %s  attempt %d\n", u.ExecutionID, u.ToolCallID, u.Tool, u.Attempt)
		}
	}
	if p.Execution != nil {
		Fprintf(w, "  execution %s is %s\n", p.Execution.ExecutionID, p.Execution.Status)
	}
}

// CompactJSON is b without insignificant space, or b as it is where it
// is not JSON.
func CompactJSON(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return string(b)
	}
	return buf.String()
}

// WriteJSON prints v as indented JSON with a trailing newline.
func WriteJSON(w io.Writer, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(w, `{"error": %q}`+"\n", err.Error())
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
