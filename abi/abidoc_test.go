package abi

import (
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// docTables returns, per heading of docs/abi.md, the rows of its tables
// whose first cell is `code`: first cell -> second cell (backticks
// stripped).
func docTables(t *testing.T) (map[string]map[string]string, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "abi.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	heading := ""
	row := regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\|")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			if out[heading] == nil {
				out[heading] = map[string]string{}
			}
			out[heading][m[1]] = strings.Trim(strings.TrimSpace(m[2]), "`")
		}
	}
	return out, string(b)
}

// packageConstants type-checks this package's sources and returns its
// exported constants by name.
func packageConstants(t *testing.T) map[string]*types.Const {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/connhost/connhost/abi", fset, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*types.Const{}
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && c.Exported() {
			out[name] = c
		}
	}
	return out
}

// TestABIDocumentMatchesTheConstants: every export, import, status code,
// log level, outcome kind, HTTP error code and envelope tag that package
// abi defines is in docs/abi.md with its value, and the document names
// none that the package does not define. Add a constant without its line
// in the document (or the reverse) and this fails.
func TestABIDocumentMatchesTheConstants(t *testing.T) {
	tables, doc := docTables(t)
	consts := packageConstants(t)
	want := map[string]map[string]string{
		"Exports": {}, "Imports": {}, "Status codes": {}, "Log levels": {},
		"Outcome envelope": {}, "HTTP error codes": {},
	}
	for name, c := range consts {
		v := c.Val()
		switch {
		case strings.HasPrefix(name, "Export"):
			want["Exports"][constant.StringVal(v)] = name
		case strings.HasPrefix(name, "Import"):
			want["Imports"][constant.StringVal(v)] = name
		case strings.HasPrefix(name, "Status"):
			want["Status codes"][name] = v.ExactString()
		case strings.HasPrefix(name, "Level"):
			want["Log levels"][name] = v.ExactString()
		case c.Type().String() == "github.com/connhost/connhost/abi.OutcomeKind":
			n, _ := constant.Uint64Val(v)
			want["Outcome envelope"][OutcomeKind(n).String()] = strconv.FormatUint(n, 10)
		case c.Type().String() == "github.com/connhost/connhost/abi.HTTPErrorCode":
			n, _ := constant.Uint64Val(v)
			want["HTTP error codes"][HTTPErrorCode(n).String()] = strconv.FormatUint(n, 10)
		}
	}
	for section, names := range want {
		got := tables[section]
		if len(names) == 0 {
			t.Fatalf("found no constants for %q: the test no longer reads the package", section)
		}
		for name, val := range names {
			cell, ok := got[name]
			switch {
			case !ok:
				t.Errorf("docs/abi.md, %s: no row for `%s` (%s)", section, name, val)
			case section != "Exports" && section != "Imports" && cell != val:
				t.Errorf("docs/abi.md, %s: `%s` is %s, package abi says %s", section, name, cell, val)
			}
		}
		for name := range got {
			if _, ok := names[name]; !ok {
				t.Errorf("docs/abi.md, %s: `%s` is not defined by package abi", section, name)
			}
		}
	}

	tags := tables["Binary envelopes"]
	for envelope, tag := range map[string]byte{"outcome, version 1": tagOutcome, "HTTP request, version 1": tagHTTPRequest, "HTTP response, version 1": tagHTTPResponse} {
		if w := "0x" + strings.ToUpper(strconv.FormatUint(uint64(tag), 16)); tags[envelope] != "" || !strings.Contains(doc, "| "+envelope+" | `"+w+"` |") {
			t.Errorf("docs/abi.md, Binary envelopes: %s should have tag %s", envelope, w)
		}
	}
	for _, s := range []string{"# The connector ABI, version " + strconv.Itoa(Version), "Module `" + HostModule + "`"} {
		if !strings.Contains(doc, s) {
			t.Errorf("docs/abi.md does not say %q", s)
		}
	}
	// The field order the document gives is the order AppendBinary writes.
	order := func(section string) []string {
		i := strings.Index(doc, "### "+section)
		block := doc[i:]
		block = block[strings.Index(block, "```\n")+4:]
		block = block[:strings.Index(block, "```")]
		var fields []string
		for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
			f := strings.Fields(l)
			fields = append(fields, f[0]+" "+f[1])
		}
		return fields
	}
	for section, fields := range map[string][]string{
		"Outcome envelope":       {"u8 tag", "u8 kind", "bytes result", "string receipt", "string error"},
		"HTTP request envelope":  {"u8 tag", "string method", "string url", "headers header", "bytes body", "u32 timeout_millis"},
		"HTTP response envelope": {"u8 tag", "u8 err", "string message", "u32 status", "headers header", "bytes body"},
	} {
		if got := order(section); strings.Join(got, ",") != strings.Join(fields, ",") {
			t.Errorf("docs/abi.md, %s: fields %v, want %v", section, got, fields)
		}
	}
}

// TestABIDocumentEnvelopeLayoutIsTheWireForm encodes each envelope the
// way docs/abi.md describes it, field by field, and checks the package
// decodes it to the same values: a guest written from the document
// speaks the host's wire form.
func TestABIDocumentEnvelopeLayoutIsTheWireForm(t *testing.T) {
	u32 := func(n int) []byte { return []byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)} }
	str := func(s string) []byte { return append(u32(len(s)), s...) }
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	o, err := DecodeOutcome(cat([]byte{0xC1, 1}, str(`{"a":1}`), str("pi_1"), str("")))
	if err != nil || o.Kind != OutcomeOK || string(o.Result) != `{"a":1}` || o.Receipt != "pi_1" {
		t.Fatalf("outcome from the document's layout: %+v, %v", o, err)
	}
	q, err := DecodeHTTPRequest(cat([]byte{0xD1}, str("POST"), str("https://x:443/v1"), u32(2), str("A"), str("1"), str("A"), str("2"), str("body"), u32(1500)))
	if err != nil || q.Method != "POST" || len(q.Header) != 2 || q.Header[1].Value != "2" || string(q.Body) != "body" || q.TimeoutMillis != 1500 {
		t.Fatalf("request from the document's layout: %+v, %v", q, err)
	}
	p, err := DecodeHTTPResponse(cat([]byte{0xD2, 0}, str(""), u32(201), u32(1), str("Content-Type"), str("application/json"), str("{}")))
	if err != nil || p.Status != 201 || p.Get("content-type") != "application/json" || string(p.Body) != "{}" {
		t.Fatalf("response from the document's layout: %+v, %v", p, err)
	}
	// The other direction: what the package writes is what the document
	// says, byte for byte.
	if got, want := (Outcome{Kind: OutcomeUncertain, Error: "lost"}).AppendBinary(nil), cat([]byte{0xC1, 7}, str(""), str(""), str("lost")); string(got) != string(want) {
		t.Fatalf("outcome wire form %x, document's layout %x", got, want)
	}
	names := make([]string, 0)
	for i := OutcomeOK; i.Valid(); i++ {
		names = append(names, i.String())
	}
	sort.Strings(names)
	if len(names) != 8 {
		t.Fatalf("%d outcome kinds: the document's table lists 8", len(names))
	}
}
