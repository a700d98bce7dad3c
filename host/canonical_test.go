package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// canonicalArgs returns the digest parseArgs computes.
func canonicalArgs(args []byte) (string, error) {
	_, d, err := parseArgs(args)
	return d, err
}

func TestCanonicalArgsDigest(t *testing.T) {
	same := [][2]string{
		{`{"a":1,"b":"x"}`, ` { "b" : "x" , "a" : 1 } `},
		{`{"n":{"y":[1,2],"x":null}}`, `{"n":{"x":null,"y":[1,2]}}`},
	}
	for _, p := range same {
		d1, err1 := canonicalArgs([]byte(p[0]))
		d2, err2 := canonicalArgs([]byte(p[1]))
		if err1 != nil || err2 != nil || d1 != d2 {
			t.Errorf("%s and %s: digests %s %s (%v %v), want equal", p[0], p[1], d1, d2, err1, err2)
		}
	}
	differ := [][2]string{
		{`{"a":1}`, `{"a":1.0}`}, // numbers are kept as written
		{`{"a":"x"}`, `{"a":"y"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
	}
	for _, p := range differ {
		d1, _ := canonicalArgs([]byte(p[0]))
		d2, _ := canonicalArgs([]byte(p[1]))
		if d1 == d2 {
			t.Errorf("%s and %s share a digest", p[0], p[1])
		}
	}
}

// Documents that decoding would make equal although they differ are
// refused, so two different argument sets can never share a digest.
func TestCanonicalArgsRefusesAmbiguousDocuments(t *testing.T) {
	for _, args := range []string{
		`{"amount":100,"amount":1}`,
		`{"n":{"k":1,"k":2}}`,
		`{"a":[{"x":1,"x":1}]}`,
		"{\"to\":\"\xff\"}",
		`[1]`, `1`, `{"a":1} {}`, `{`,
	} {
		if d, err := canonicalArgs([]byte(args)); err == nil {
			t.Errorf("canonicalArgs(%q) = %s, want an error", args, d)
		}
	}
	// Unpaired surrogate escapes decode to U+FFFD, like "\ufffd" itself.
	for _, args := range []string{`{"a":"\ud800"}`, `{"a":"\udc00"}`, `{"a":"x\ud800\u0041"}`, `{"\udbff":1}`, `{"a":"\ud800\ud800"}`} {
		if d, err := canonicalArgs([]byte(args)); err == nil {
			t.Errorf("canonicalArgs(%s) = %s, want an error", args, d)
		}
	}
	for _, args := range []string{`{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `{"\uD83D\uDE00":"\"\\"}`, `{"a":"\ufffd"}`} {
		if _, err := canonicalArgs([]byte(args)); err != nil {
			t.Errorf("canonicalArgs(%s): %v", args, err)
		}
	}
	// Nesting is bounded as encoding/json bounds it.
	deep := func(n int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	if _, err := canonicalArgs(deep(maxArgsDepth - 1)); err != nil {
		t.Errorf("%d levels: %v", maxArgsDepth, err)
	}
	if _, err := canonicalArgs(deep(maxArgsDepth)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("%d levels: %v, want refused", maxArgsDepth+1, err)
	}
	// Keys repeated in different objects are fine.
	if _, err := canonicalArgs([]byte(`{"a":{"k":1},"b":{"k":1},"k":[{"k":2}]}`)); err != nil {
		t.Errorf("distinct objects sharing key names: %v", err)
	}
}

func FuzzCanonicalArgs(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":[1,{"c":null}]}}`, `{"a":1,"a":2}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := canonicalArgs(b)
		if err != nil {
			return
		}
		// Only one valid JSON object is accepted, the digest is stable,
		// and the canonical form has the same digest.
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		if d2, err := canonicalArgs(b); err != nil || d2 != d {
			t.Fatalf("unstable: %s vs %s (%v)", d, d2, err)
		}
		doc, _, _ := parseArgs(b)
		canon, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		if d3, err := canonicalArgs(canon); err != nil || d3 != d {
			t.Fatalf("canonical form %s: digest %s (%v), want %s", canon, d3, err, d)
		}
	})
}

// FuzzArgParserMatchesEncodingJSON holds argParser to encoding/json: every
// input is accepted by both or refused by both, and an accepted one yields
// the same document and digest. The reference is the walk over
// json.Decoder.Token that argParser replaced.
func FuzzArgParserMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, ` {"a" : [1, -0, 1.5e-3, 2E+10, true, false, null, "x\"y\\z\/\b\f\n\r\t\u00e9\ud83d\ude00"]} `,
		`{"":{},"b":[],"c":[[]],"d":{"e":{}}}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":1,}`, `{"a":[1,]}`, `{,}`, `{"a"}`, `{"a":}`, `{"a":1 "b":2}`,
		`{"a":"\ud800"}`, `{"a":"\ud800\u0041"}`, `{"a":"\udc00"}`, `{"a":"\u12"}`, `{"a":"\x"}`, "{\"a\":\"\t\"}",
		`{"a":1}x`, `{"a":1}{}`, `[]`, `"s"`, `12`, `true`, `x`, ``, ` `, `{"k":1,"k":2}`, `{"k":1,"\u006b":2}`,
		`{"a":"\/"}`, `{"a":"é"}`, `{"a":-12.5E-7}`, `{"a":0e0}`, `{"a":-01}`, `{"a":1.5.5}`, "{\"a\":1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, d, err := parseArgs(b)
		wantDoc, wantD, wantErr := parseArgsReference(b)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: parseArgs error %v, encoding/json error %v", b, err, wantErr)
		}
		if err != nil {
			return
		}
		if d != wantD || !reflect.DeepEqual(doc, wantDoc) {
			t.Fatalf("%q: parseArgs %#v (%s), encoding/json %#v (%s)", b, doc, d, wantDoc, wantD)
		}
	})
}

// parseArgsReference is parseArgs as it was built on json.Decoder.Token
// (and the refusals it added: duplicate keys, unpaired surrogate escapes,
// nesting deeper than maxArgsDepth).
func parseArgsReference(args []byte) (map[string]any, string, error) {
	if !utf8.Valid(args) {
		return nil, "", errors.New("invalid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, "", err
	}
	if tok != json.Delim('{') {
		return nil, "", errors.New("not an object")
	}
	v, err := referenceValue(dec, tok, 1)
	if err != nil {
		return nil, "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", errors.New("more than one value")
	}
	if err := referenceSurrogates(args); err != nil {
		return nil, "", err
	}
	doc := v.(map[string]any)
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(canon)
	return doc, hex.EncodeToString(sum[:]), nil
}

func referenceValue(dec *json.Decoder, tok json.Token, depth int) (any, error) {
	if (tok == json.Delim('{') || tok == json.Delim('[')) && depth > maxArgsDepth {
		return nil, errors.New("too deep")
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, _ := kt.(string)
			if _, dup := obj[k]; dup {
				return nil, errors.New("duplicate key")
			}
			vt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if obj[k], err = referenceValue(dec, vt, depth+1); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			vt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := referenceValue(dec, vt, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	default:
		return tok, nil
	}
}

func referenceSurrogates(args []byte) error {
	inString := false
	for i := 0; i < len(args); i++ {
		c := args[i]
		switch {
		case c == '"':
			inString = !inString
		case !inString || c != '\\':
		case i+1 < len(args) && args[i+1] != 'u':
			i++
		default:
			r := refHex4(args, i+2)
			i += 5
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if i+6 < len(args) && args[i+1] == '\\' && args[i+2] == 'u' {
					if lo := refHex4(args, i+3); lo >= 0xdc00 && lo < 0xe000 {
						i += 6
						continue
					}
				}
				return errors.New("unpaired surrogate")
			case r >= 0xdc00 && r < 0xe000:
				return errors.New("unpaired surrogate")
			}
		}
	}
	return nil
}

// refHex4 returns the value of the four hex digits at b[i:], or -1.
func refHex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	if err != nil || strings.ContainsAny(string(b[i:i+4]), "+-_xX") {
		return -1
	}
	return int(v)
}

// TestArgParserErrors: a refusal names what is wrong and where, so a
// runtime can show the model or its author the mistake.
func TestArgParserErrors(t *testing.T) {
	for args, want := range map[string]string{
		`{"a":"\u00G0"}`:   `invalid character 'G' at offset 10`,
		`{"a":"\u12`:       `unexpected end of input`,
		`{"a":tru}`:        `invalid character '}' at offset 8`,
		`{"a":1,}`:         `invalid character '}' at offset 7`,
		`{"a":01}`:         `invalid character '1' at offset 6`,
		`-x`:               `invalid character 'x' at offset 1`,
		`[1]`:              `must be a JSON object`,
		`{}x`:              `invalid character 'x' at offset 2`,
		`{} {}`:            `more than one JSON value`,
		``:                 `unexpected end of input`,
		`{"k":1,"k":2}`:    `the key "k" is named twice in the top-level object (offset 7)`,
		"{\"a\":\"\xff\"}": `not valid UTF-8 (byte 0xff at offset 6)`,
		`{"a":"\ud800"}`:   `unpaired UTF-16 surrogate escape`,
	} {
		_, _, err := parseArgs([]byte(args))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseArgs(%s) = %v, want an error containing %q", args, err, want)
		}
	}
}
