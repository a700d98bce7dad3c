package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseRefusesAmbiguousDocuments(t *testing.T) {
	for doc, want := range map[string]string{
		`{"a":1,"a":2}`:                      `the key "a" is named twice in the top-level object (offset 7)`,
		`{"x":{"y":[0,{"k":1,"k":2}]}}`:      `the key "k" is named twice in the object at /x/y/1 (offset 20)`,
		`{"a/b":{"~":{"k":1,"k":1}}}`:        `in the object at /a~1b/~0`,
		"{\"id\":\"call_\xff\"}":             `not valid UTF-8 (byte 0xff at offset 12)`,
		`{"id":"call_\udfff"}`:               `unpaired UTF-16 surrogate escape at offset 12`,
		`{"id":"call_\ud800x"}`:              `unpaired UTF-16 surrogate escape at offset 12`,
		`[1] [2]`:                            `more than one JSON value`,
		`{"a":`:                              `not valid JSON: unexpected end of input`,
		`{"a":1,}`:                           `not valid JSON: invalid character '}' at offset 7`,
		strings.Repeat("[", MaxDepth+1) + "": `nested deeper than 10000 levels`,
		// Offsets point at the character that does not fit.
		`{"a":tru}`:      `not valid JSON: invalid character '}' at offset 8`,
		`[nul`:           `not valid JSON: unexpected end of input`,
		`{"a":"\u00G0"}`: `not valid JSON: invalid character 'G' at offset 10`,
		`{"a" 1}`:        `not valid JSON: invalid character '1' at offset 5`,
		"[\"\x01\"]":     `not valid JSON: invalid character '\x01' at offset 2`,
		`{"é":1 "b"}`:    `not valid JSON: invalid character '"' at offset 8`,
		// What follows a value is read as a value, at its offsets in the
		// document.
		`{} {`:                     `not valid JSON: unexpected end of input`,
		`[1] x`:                    `not valid JSON: invalid character 'x' at offset 4`,
		`{} {"a":1,"a":2}`:         `the key "a" is named twice in the top-level object (offset 10)`,
		`{} "\ud800"`:              `unpaired UTF-16 surrogate escape at offset 4`,
		`{} {} {`:                  `more than one JSON value`,
		`{"\ud83d\ude00":1,"😀":2}`: `the key "😀" is named twice in the top-level object (offset 18)`,
		// A string that is not JSON is that, before it is ambiguous.
		`"\ud800`: `not valid JSON: unexpected end of input`,
	} {
		_, err := Parse([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%.40q) = %v, want an error containing %q", doc, err, want)
		}
	}
	var de *DuplicateKeyError
	_, err := Parse([]byte(`{"x":{"y":[0,{"k":1,"k":2}]}}`))
	if !errors.As(err, &de) || de.Key != "k" || de.Pointer() != "/x/y/1" {
		t.Fatalf("DuplicateKeyError: %#v", err)
	}
	_, err = Parse([]byte(`[{"a/b":[0,1,2,3,4,5,6,7,8,9,{"k":1,"k":2}]}]`))
	if !errors.As(err, &de) || de.Pointer() != "/0/a~1b/10" || de.Offset != 36 {
		t.Fatalf("DuplicateKeyError in an array: %v", err)
	}
	for doc, want := range map[string]string{
		`[]`: "must be a JSON object", `null`: "must be a JSON object", `"x" {}`: "must be a JSON object",
		`[1,]`: "not valid JSON: invalid character ']' at offset 3", ``: "not valid JSON: unexpected end of input",
		`{"a":{"k":1,"k":2}}`: `the key "k" is named twice in the object at /a (offset 12)`,
	} {
		if _, err := ParseObject([]byte(doc)); err == nil || err.Error() != want {
			t.Errorf("ParseObject(%s) = %v, want %q", doc, err, want)
		}
	}
	// MaxDepth is the codec's limit.
	deep := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	if _, err := Parse(deep(MaxDepth)); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}
	if _, err := Parse(deep(MaxDepth + 1)); err == nil || err.Error() != "nested deeper than 10000 levels" {
		t.Errorf("%d levels: %v", MaxDepth+1, err)
	}
}

// refusal matches each message Parse refuses with; the offsets in it
// are checked against the document.
var refusal = regexp.MustCompile(`^(?:not valid UTF-8 \(byte 0x[0-9a-f]{2} at offset (\d+)\)` +
	`|not valid JSON: unexpected end of input` +
	`|not valid JSON: invalid character ('(?:[^'\\]|\\.[^']*)') at offset (\d+)` +
	`|unpaired UTF-16 surrogate escape at offset (\d+)` +
	`|the key ".*" is named twice in (?:the top-level object|the object at (?:/[^/]*)+) \(offset (\d+)\)` +
	`|more than one JSON value|nested deeper than 10000 levels)$`)

// checkRefusal fails unless err is one of the messages Parse says, in its
// words (not the codec's), with its offsets pointing where it says.
func checkRefusal(t *testing.T, b []byte, err error) {
	m := refusal.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("%q: refused with %q, not one of strictjson's messages", b, err)
	}
	at := func(s string) int {
		n, _ := strconv.Atoi(s)
		if n >= len(b) {
			t.Fatalf("%q: %v: offset beyond the input", b, err)
		}
		return n
	}
	switch {
	case m[1] != "":
		if r, size := utf8.DecodeRune(b[at(m[1]):]); r != utf8.RuneError || size != 1 {
			t.Fatalf("%q: %v: valid UTF-8 at the offset", b, err)
		}
	case m[3] != "":
		r, _ := utf8.DecodeRune(b[at(m[3]):])
		if q := strconv.QuoteRune(r); q != m[2] {
			t.Fatalf("%q: %v: the character at the offset is %s", b, err, q)
		}
	case m[4] != "":
		if !bytes.HasPrefix(b[at(m[4]):], []byte(`\u`)) {
			t.Fatalf("%q: %v: no escape at the offset", b, err)
		}
	case m[5] != "":
		if b[at(m[5])] != '"' {
			t.Fatalf("%q: %v: no key at the offset", b, err)
		}
	}
}

// FuzzParseMatchesEncodingJSON: what Parse accepts, encoding/json accepts
// and decodes to the same value; what Parse refuses that encoding/json
// accepts is one of the ambiguities it exists to refuse; and every
// refusal is said in this package's words, at an offset that points
// where it says.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a":1,"a":2}`, `[1,"x",null,true,{"b":[]}]`, `"\ud83d\ude00"`, `"\ud800"`,
		"\"\xff\"", `1e5`, `-0.5`, ` {} `, `{} {}`, ``, `{"session_id":"s","tool_call_id":"c"}`,
		`{"a":tru}`, `[nul`, `{"a":"\u00G0"}`, `{} {"a":1,"a":2}`, `[1] "\udc00"`, `{"a" 1}`, "[\"\x01\"]", `{"x":[1.e5]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Parse(b)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var want any
		jerr := dec.Decode(&want)
		if jerr == nil {
			if _, e := dec.Token(); e != io.EOF {
				jerr = errors.New("data after the value")
			}
		}
		if err == nil {
			if jerr != nil {
				t.Fatalf("%q: Parse accepted what encoding/json refuses: %v", b, jerr)
			}
			if !reflect.DeepEqual(normalize(got), normalize(want)) {
				t.Fatalf("%q: Parse %#v, encoding/json %#v", b, got, want)
			}
			return
		}
		checkRefusal(t, b, err)
		if jerr != nil {
			return
		}
		var de *DuplicateKeyError
		msg := err.Error()
		ambiguous := errors.As(err, &de) || (!utf8.Valid(b) && strings.Contains(msg, "UTF-8")) ||
			strings.Contains(msg, "surrogate") || strings.Contains(msg, "nested deeper")
		if !ambiguous {
			t.Fatalf("%q: Parse refused a document encoding/json reads alike: %v", b, err)
		}
	})
}

// normalize makes empty arrays comparable (Parse builds [] where
// encoding/json may build nil) and is otherwise the identity.
func normalize(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}
