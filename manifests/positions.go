package manifests

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Positions inside string values. An input schema is JSON inside a TOML
// string; a problem with it is reported at its own line and column in the
// manifest file, not at the input_schema key. stringLoc maps an offset of
// the decoded string back to the file, and jsonPointerOffsets maps a JSON
// pointer to an offset of the decoded JSON text.

// Pos is a 1-based line and column (in bytes) in a manifest file.
type Pos struct {
	Line int
	Col  int
}

// stringLoc is where a string value's content starts in the file, and how
// to walk its raw text.
type stringLoc struct {
	lines []string // the file's lines
	line  int      // 0-based index of the line the content starts on
	col   int      // byte column (0-based) the content starts at
	// basic: escapes apply ("…" and """…"""); literal strings are raw.
	basic bool
	// multi: a multi-line string (a line-ending backslash is a
	// continuation in a basic one).
	multi bool
}

// locateString finds the content of the string value of the key declared
// on line (1-based), whose value starts at byte valueStart of that line.
// It reports false for a value that is not a string.
func locateString(lines []string, line, valueStart int) (stringLoc, bool) {
	if line < 1 || line > len(lines) {
		return stringLoc{}, false
	}
	raw := lines[line-1]
	if valueStart > len(raw) {
		return stringLoc{}, false
	}
	rest := raw[valueStart:]
	trimmed := strings.TrimLeft(rest, " \t")
	start := valueStart + len(rest) - len(trimmed)
	l := stringLoc{lines: lines, line: line - 1}
	switch {
	case strings.HasPrefix(trimmed, `"""`), strings.HasPrefix(trimmed, `'''`):
		l.basic, l.multi = trimmed[0] == '"', true
		l.col = start + 3
		// A newline right after the opening delimiter is trimmed.
		if strings.TrimRight(raw[l.col:], "\r") == "" {
			l.line, l.col = l.line+1, 0
		}
	case strings.HasPrefix(trimmed, `"`), strings.HasPrefix(trimmed, `'`):
		l.basic = trimmed[0] == '"'
		l.col = start + 1
	default:
		return stringLoc{}, false
	}
	return l, true
}

// pos returns the file position of byte off of the decoded string. It
// decodes escapes as it walks, so offsets after an escape still land on
// the right column; an offset past the end is clamped to the last
// position walked.
func (l stringLoc) pos(off int) Pos {
	line, col := l.line, l.col
	decoded := 0
	for line < len(l.lines) {
		raw := l.lines[line]
		for col < len(raw) {
			c := raw[col]
			continuation := l.basic && c == '\\' && (col+1 >= len(raw) || strings.TrimRight(raw[col+1:], " \t\r") == "")
			if decoded >= off && !continuation {
				return Pos{Line: line + 1, Col: col + 1}
			}
			if !l.basic || c != '\\' {
				col++
				decoded++
				continue
			}
			if continuation {
				// A line-ending backslash: the newline and the
				// whitespace after it are removed.
				line, col = line+1, 0
				for line < len(l.lines) {
					t := strings.TrimLeft(l.lines[line], " \t")
					if strings.TrimRight(t, "\r") != "" {
						col = len(l.lines[line]) - len(t)
						break
					}
					line++
				}
				if line >= len(l.lines) {
					return Pos{Line: len(l.lines), Col: 1}
				}
				raw = l.lines[line]
				continue
			}
			switch raw[col+1] {
			case 'u':
				col += 6
				decoded += utf8Len(raw, col-4, 4)
			case 'U':
				col += 10
				decoded += utf8Len(raw, col-8, 8)
			default:
				col += 2
				decoded++
			}
		}
		if !l.multi {
			break
		}
		if decoded >= off {
			return Pos{Line: line + 1, Col: col + 1}
		}
		decoded++ // the newline
		line, col = line+1, 0
	}
	if line >= len(l.lines) {
		line = len(l.lines) - 1
	}
	return Pos{Line: line + 1, Col: col + 1}
}

// utf8Len is the encoded length of the code point written as n hex digits
// at raw[at:].
func utf8Len(raw string, at, n int) int {
	if at < 0 || at+n > len(raw) {
		return 1
	}
	v, err := strconv.ParseUint(raw[at:at+n], 16, 32)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return 1
	}
	return utf8.RuneLen(rune(v))
}

// jsonPointerOffsets maps the JSON pointer of every value in text to the
// byte offset where it is named: an object member's key, an array
// element's first byte, the root's first byte. It returns what it found
// before a syntax error.
func jsonPointerOffsets(text string) map[string]int {
	out := map[string]int{"": skipSpace(text, 0)}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	type frame struct {
		ptr   string
		array bool
		index int
		key   bool // the next string token of an object is a key
	}
	var stack []*frame
	var pending string // pointer of the value about to be read
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && !top.array && top.key {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && !stack[len(stack)-1].array {
					stack[len(stack)-1].key = true
				}
				continue
			}
			key, _ := tok.(string)
			pending = top.ptr + "/" + escapePointer(key)
			out[pending] = skipSpace(text, before)
			top.key = false
			continue
		}
		if top != nil && top.array {
			if d, ok := tok.(json.Delim); ok && d == ']' {
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && !stack[len(stack)-1].array {
					stack[len(stack)-1].key = true
				}
				continue
			}
			pending = top.ptr + "/" + strconv.Itoa(top.index)
			out[pending] = skipSpace(text, before)
			top.index++
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			stack = append(stack, &frame{ptr: pending, array: d == '[', key: d == '{'})
			continue
		}
		if top != nil && !top.array {
			top.key = true
		}
	}
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace, a comma or a colon.
func skipSpace(text string, i int) int {
	for i < len(text) && strings.IndexByte(" \t\r\n,:", text[i]) >= 0 {
		i++
	}
	return i
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// jsonSyntaxOffset returns the offset of the first syntax error in text,
// or -1 when text is valid JSON.
func jsonSyntaxOffset(text string) int {
	dec := json.NewDecoder(strings.NewReader(text))
	var v any
	err := dec.Decode(&v)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return max(int(se.Offset)-1, 0)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return len(text)
	case err == nil:
		rest := text[dec.InputOffset():]
		if t := strings.TrimLeft(rest, " \t\r\n"); t != "" {
			return len(text) - len(t) // data after the value
		}
	}
	return -1
}
