package host

import (
	"encoding/json"
	"strings"
	"testing"
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
