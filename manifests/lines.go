package manifests

import (
	"strconv"
	"strings"
)

// lineIndex maps key paths to the 1-based line that declares them.
// BurntSushi/toml keeps key positions private, so the manifest is scanned a
// second time, lexically. Paths are dotted; the i-th entry of an array of
// tables is "name#i" (e.g. "operation#0.recovery"). Only keys written as
// "key = value" at the start of a line are indexed; anything else (keys
// inside inline tables) falls back to its table's line.
type lineIndex map[string]int

// lineInfo describes one physical line for indexLines and SetSHA256.
type lineInfo struct {
	table string // current table path ("" at top level), with #i for arrays
	key   string // key declared on this line ("" if none)
	// header is true for a [table] or [[array]] header line.
	header bool
	// valueStart is the byte offset in the line just after '=' for key lines.
	valueStart int
}

// scanLines classifies every line of data. It tracks multi-line strings and
// multi-line arrays/inline tables so that their contents are never taken for
// keys or headers.
func scanLines(lines []string) []lineInfo {
	var (
		st     scanState
		cur    string
		counts = map[string]int{}
		out    = make([]lineInfo, len(lines))
	)
	for i, line := range lines {
		if !st.atTop() {
			st.scan(line)
			out[i].table = cur
			continue
		}
		t := strings.TrimLeft(line, " \t")
		switch {
		case t == "" || t[0] == '#':
		case strings.HasPrefix(t, "[["):
			name := headerName(t[2:], "]]")
			counts[name]++
			cur = name + "#" + strconv.Itoa(counts[name]-1)
			out[i].header = true
		case t[0] == '[':
			cur = headerName(t[1:], "]")
			out[i].header = true
		default:
			eq := keyEnd(t)
			if eq < 0 {
				st.scan(t)
				break
			}
			out[i].key = normKey(t[:eq])
			out[i].valueStart = len(line) - len(t) + eq + 1
			st.scan(t[eq+1:])
		}
		out[i].table = cur
	}
	return out
}

// indexLines builds the lineIndex of data.
func indexLines(data []byte) lineIndex {
	return indexInfos(scanLines(strings.Split(string(data), "\n")))
}

// indexInfos builds the lineIndex of scanned lines.
func indexInfos(infos []lineInfo) lineIndex {
	idx := lineIndex{}
	for i, li := range infos {
		var path string
		switch {
		case li.header:
			path = li.table
		case li.key != "":
			path = li.key
			if li.table != "" {
				path = li.table + "." + li.key
			}
		default:
			continue
		}
		if _, ok := idx[path]; !ok {
			idx[path] = i + 1
		}
	}
	return idx
}

// line returns the line of the first path found, or 0.
func (idx lineIndex) line(paths ...string) int {
	for _, p := range paths {
		if n, ok := idx[p]; ok {
			return n
		}
	}
	return 0
}

// headerName returns the normalised table name of a header whose opening
// bracket(s) were already removed.
func headerName(s, closing string) string {
	// Find the closing bracket outside quotes.
	inQ := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQ != 0:
			if c == '\\' && inQ == '"' {
				i++
			} else if c == inQ {
				inQ = 0
			}
		case c == '"' || c == '\'':
			inQ = c
		case strings.HasPrefix(s[i:], closing):
			return normKey(s[:i])
		}
	}
	return normKey(s)
}

// keyEnd returns the index of the '=' ending the key at the start of t, or
// -1 when t does not start with a key.
func keyEnd(t string) int {
	inQ := byte(0)
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case inQ != 0:
			if c == '\\' && inQ == '"' {
				i++
			} else if c == inQ {
				inQ = 0
			}
		case c == '"' || c == '\'':
			inQ = c
		case c == '=':
			return i
		case c == '#' || c == '[' || c == '{':
			return -1
		}
	}
	return -1
}

// normKey normalises a possibly dotted, possibly quoted key: parts are
// trimmed and unquoted (simple quotes only) and joined with '.'.
func normKey(k string) string {
	parts := strings.Split(k, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if len(p) >= 2 && (p[0] == '"' || p[0] == '\'') && p[len(p)-1] == p[0] {
			p = p[1 : len(p)-1]
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// scanState is the lexical state carried from one line to the next.
type scanState struct {
	quote byte // '"' or '\'' while inside a string
	multi bool // the string is a multi-line one
	depth int  // open [ and { outside strings
}

func (s *scanState) atTop() bool { return s.quote == 0 && s.depth <= 0 }

// scan advances the state over one line (or the value part of one).
func (s *scanState) scan(line string) {
	for i := 0; i < len(line); i++ {
		c := line[i]
		if s.quote != 0 {
			switch {
			case c == '\\' && s.quote == '"':
				i++
			case s.multi && strings.HasPrefix(line[i:], strings.Repeat(string(s.quote), 3)):
				// A closing delimiter may be followed by up to two more
				// quotes that belong to the string.
				j := i + 3
				for j < len(line) && j < i+5 && line[j] == s.quote {
					j++
				}
				i = j - 1
				s.quote, s.multi = 0, false
			case !s.multi && c == s.quote:
				s.quote = 0
			}
			continue
		}
		switch c {
		case '#':
			return
		case '"', '\'':
			if strings.HasPrefix(line[i:], strings.Repeat(string(c), 3)) {
				s.quote, s.multi = c, true
				i += 2
			} else {
				s.quote = c
			}
		case '[', '{':
			s.depth++
		case ']', '}':
			s.depth--
		}
	}
	if !s.multi {
		s.quote = 0 // single-line strings end with their line
	}
}

// fileText is the text a manifest was parsed from, kept for locating
// findings after parsing.
type fileText struct {
	data  []byte
	lines []string
	infos []lineInfo
	index lineIndex
}

func newFileText(data []byte) *fileText {
	lines := strings.Split(string(data), "\n")
	infos := scanLines(lines)
	return &fileText{data: data, lines: lines, infos: infos, index: indexInfos(infos)}
}

// stringValue locates the string value of the key at path.
func (t *fileText) stringValue(path string) (stringLoc, bool) {
	n, ok := t.index[path]
	if !ok || n < 1 || n > len(t.infos) || t.infos[n-1].key == "" {
		return stringLoc{}, false
	}
	return locateString(t.lines, n, t.infos[n-1].valueStart)
}

// Line returns the line that declares the key at path, a dotted path such
// as "connector.sha256", "capabilities.http" or "provider.name"; else the
// line of its table's header; else 0 (a manifest built by hand, or a
// table that is not there).
func (m *Manifest) Line(path string) int {
	if m.text == nil {
		return 0
	}
	table, _, _ := strings.Cut(path, ".")
	return m.text.index.line(path, table)
}

// ValueLine returns the line of the string value inside the array at path
// (a multi-line array lists one entry per line), else Line(path).
func (m *Manifest) ValueLine(path, value string) int {
	n := m.Line(path)
	if m.text == nil || n == 0 {
		return n
	}
	quoted := []string{strconv.Quote(value), "'" + value + "'"}
	for i := n - 1; i < len(m.text.lines); i++ {
		if i > n-1 && (m.text.infos[i].key != "" || m.text.infos[i].header) {
			break
		}
		for _, q := range quoted {
			if strings.Contains(m.text.lines[i], q) {
				return i + 1
			}
		}
	}
	return n
}

// Text returns the bytes the manifest was parsed from (nil for a manifest
// built by hand). The caller must not modify them.
func (m *Manifest) Text() []byte {
	if m.text == nil {
		return nil
	}
	return m.text.data
}

// KeyLine returns the line that declares key (e.g. "recovery") in the
// operation's table, else the line of its [[operation]] header.
func (op *Operation) KeyLine(key string) int {
	if op.text == nil {
		return op.Line
	}
	return op.text.index.line(op.table+"."+key, op.table)
}

// SchemaPos returns where, in the manifest file, the input schema names
// the value at the JSON pointer ptr ("" is the schema itself; an object
// member is found at its key, an array element at its first byte). It
// falls back to the input_schema key's line.
func (op *Operation) SchemaPos(ptr string) Pos {
	fallback := Pos{Line: op.KeyLine("input_schema")}
	if op.text == nil {
		return fallback
	}
	loc, ok := op.text.stringValue(op.table + ".input_schema")
	if !ok {
		return fallback
	}
	off, ok := jsonPointerOffsets(op.InputSchema)[ptr]
	if !ok {
		return fallback
	}
	return loc.pos(off)
}

// KeyLines returns the line of every key written "key = value" at the
// start of a line, and of every table header, in the TOML document data:
// the positions BurntSushi/toml keeps private, for files of other formats
// that report problems by file and line as manifests do (connhost.toml,
// crashtest's probe configs). Paths are dotted ("operation.send.hold"); the i-th table of
// an array of tables is "name#i". A key inside an inline table is not
// indexed: look up its table's path instead.
func KeyLines(data []byte) map[string]int { return indexLines(data) }
