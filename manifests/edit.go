package manifests

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// bareKeyRE matches a TOML bare key.
var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// SetOperationField returns a copy of the manifest text data in which the
// [[operation]] table named op sets key to value: a string, bool, integer,
// float, time or array of them, written as TOML writes it. It is how a
// variant of a manifest is made (the crash matrix's gated and ungated
// copies, the demo's manual one) without touching anything else: an
// existing key line keeps its indentation and trailing comment and only
// its value changes; a missing key is inserted after the operation's
// `name =` line, with that line's indentation and line ending. Setting the
// value a key already has returns the text unchanged. The result is read
// back to check the edit, but not validated as a manifest: Parse it for
// that.
//
// It refuses text that is not valid TOML (ErrSyntax), an operation the
// text does not declare (ErrNoOperation), and what it cannot edit line by
// line (ErrNotEditable): a key that is not a bare key, a value that is not
// one line of TOML, operations written as an inline array, an existing
// value that spans lines.
func SetOperationField(data []byte, op, key string, value any) ([]byte, error) {
	if !bareKeyRE.MatchString(key) {
		return nil, fmt.Errorf("%w: key %q is not a bare key", ErrNotEditable, key)
	}
	literal, want, err := tomlValue(value)
	if err != nil {
		return nil, fmt.Errorf("%w: operation[%s].%s: %v", ErrNotEditable, op, key, err)
	}
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, syntaxError("", err)
	}
	idx, fields := operationTable(doc, op)
	if idx < 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoOperation, op)
	}
	if old, ok := fields[key]; ok && reflect.DeepEqual(old, want) {
		return bytes.Clone(data), nil
	}

	lines := strings.Split(string(data), "\n")
	infos := scanLines(lines)
	table := "operation#" + strconv.Itoa(idx)
	header, name, at := -1, -1, -1
	for i, li := range infos {
		switch {
		case li.table != table:
		case li.header:
			header = i
		case li.key == "name" && name < 0:
			name = i
		case li.key == key && at < 0:
			at = i
		}
	}
	if header < 0 {
		return nil, fmt.Errorf("%w: operation[%s] is not written as an [[operation]] table", ErrNotEditable, op)
	}
	if at >= 0 {
		line, ok := replaceValue(lines[at], infos[at].valueStart, literal)
		if !ok {
			return nil, fmt.Errorf("%w: line %d: operation[%s].%s is not a one-line value", ErrNotEditable, at+1, op, key)
		}
		lines[at] = line
	} else {
		after, indent, eol := header, "", ""
		if name >= 0 && oneLineValue(lines[name], infos[name].valueStart) {
			after = name
			indent = lines[name][:len(lines[name])-len(strings.TrimLeft(lines[name], " \t"))]
		}
		if strings.HasSuffix(lines[after], "\r") {
			eol = "\r"
		}
		lines = append(lines[:after+1], append([]string{indent + key + " = " + literal + eol}, lines[after+1:]...)...)
	}
	out := []byte(strings.Join(lines, "\n"))
	// The edit is checked, not trusted: the operation must read back with
	// the value asked for.
	var back map[string]any
	if _, err := toml.Decode(string(out), &back); err != nil {
		return nil, fmt.Errorf("%w: setting operation[%s].%s broke the text: %v", ErrNotEditable, op, key, err)
	}
	if i, f := operationTable(back, op); i != idx || !reflect.DeepEqual(f[key], want) {
		return nil, fmt.Errorf("%w: operation[%s].%s does not read back as %s", ErrNotEditable, op, key, literal)
	}
	return out, nil
}

// operationTable returns the index and the fields of the [[operation]]
// named op in a decoded manifest, or -1.
func operationTable(doc map[string]any, op string) (int, map[string]any) {
	var ops []map[string]any
	switch v := doc["operation"].(type) {
	case []map[string]any: // [[operation]] tables
		ops = v
	case []any: // an inline array
		for _, o := range v {
			m, _ := o.(map[string]any)
			ops = append(ops, m)
		}
	}
	for i, o := range ops {
		if o != nil && o["name"] == op {
			return i, o
		}
	}
	return -1, nil
}

// tomlValue returns value as a one-line TOML literal and as a TOML decoder
// reads that literal back.
func tomlValue(value any) (string, any, error) {
	b, err := toml.Marshal(map[string]any{"v": value})
	if err != nil {
		return "", nil, err
	}
	literal, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "v = ")
	if !ok || strings.Contains(literal, "\n") {
		return "", nil, fmt.Errorf("%T is not a one-line TOML value", value)
	}
	var back map[string]any
	if _, err := toml.Decode(string(b), &back); err != nil {
		return "", nil, err
	}
	return literal, back["v"], nil
}

// replaceValue returns line with the one-line value that starts after
// offset start (just after the '=') replaced by literal, keeping the
// spacing before the value and whatever follows it (spacing, a comment,
// "\r"). It reports false when the value does not end on this line.
func replaceValue(line string, start int, literal string) (string, bool) {
	rest := line[start:]
	trimmed := strings.TrimLeft(rest, " \t")
	lead := rest[:len(rest)-len(trimmed)]
	if lead == "" {
		lead = " "
	}
	end, ok := valueEnd(trimmed)
	if !ok {
		return "", false
	}
	return line[:start] + lead + literal + trimmed[end:], true
}

// oneLineValue reports whether the value that starts after offset start of
// line ends on that line.
func oneLineValue(line string, start int) bool {
	_, ok := valueEnd(strings.TrimLeft(line[start:], " \t"))
	return ok
}

// valueEnd returns the index just after the value that starts s: before
// the spacing, comment and "\r" that may follow it on the line. It reports
// false for a value that goes on past the line (a multi-line string, an
// array or inline table left open) or an empty one.
func valueEnd(s string) (int, bool) {
	quote, depth, end := byte(0), 0, len(s)
scan:
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch {
			case c == '\\' && quote == '"':
				i++
			case c == quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			if strings.HasPrefix(s[i:], strings.Repeat(string(c), 3)) {
				return 0, false
			}
			quote = c
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		case '#':
			end = i
			break scan
		}
	}
	if quote != 0 || depth != 0 {
		return 0, false
	}
	end = len(strings.TrimRight(s[:end], " \t\r"))
	return end, end > 0
}
