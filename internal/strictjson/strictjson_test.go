package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
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
	if _, err := ParseObject([]byte(`[]`)); err == nil || err.Error() != "must be a JSON object" {
		t.Fatalf("ParseObject([]) = %v", err)
	}
}

// FuzzParseMatchesEncodingJSON: what Parse accepts, encoding/json accepts
// and decodes to the same value; what Parse refuses that encoding/json
// accepts is one of the ambiguities it exists to refuse.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a":1,"a":2}`, `[1,"x",null,true,{"b":[]}]`, `"\ud83d\ude00"`, `"\ud800"`,
		"\"\xff\"", `1e5`, `-0.5`, ` {} `, `{} {}`, ``, `{"session_id":"s","tool_call_id":"c"}`,
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
