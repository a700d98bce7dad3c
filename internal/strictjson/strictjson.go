// Package strictjson parses JSON documents that must mean one thing only.
//
// encoding/json decodes some different documents alike: it replaces
// invalid UTF-8 and unpaired UTF-16 surrogate escapes by U+FFFD, and keeps
// the last of two equal keys in an object (and, into a struct, matches keys
// case-insensitively). For identities and digests that is a collision: two
// callers that sent different bytes would be taken for one. This parser
// refuses those documents and otherwise builds what json.Decoder with
// UseNumber builds: map[string]any, []any, string, json.Number, bool and
// nil. The host's argument digests and the HTTP API's request envelopes
// use it; a differential fuzz test in package host holds it to
// encoding/json's grammar.
//
// Errors are phrased without a subject ("not valid JSON: …") so callers
// can say what was parsed ("arguments: …", "request body: …").
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// DuplicateKeyError reports an object that names a key twice.
type DuplicateKeyError struct {
	// Key is the repeated key, decoded.
	Key string
	// Offset is the byte offset of the second occurrence's opening quote.
	Offset int
	// rev is the path from the object to the top, innermost first.
	rev []string
}

// Pointer returns the JSON Pointer (RFC 6901) of the object that names
// the key twice: "" for the top-level object, "/arguments/to" for one
// nested there.
func (e *DuplicateKeyError) Pointer() string {
	var b strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(e.rev[i]))
	}
	return b.String()
}

func (e *DuplicateKeyError) Error() string {
	where := "the top-level object"
	if p := e.Pointer(); p != "" {
		where = "the object at " + p
	}
	return fmt.Sprintf("the key %q is named twice in %s (offset %d)", e.Key, where, e.Offset)
}

// Parse parses b, which must hold exactly one JSON value (white space
// around it allowed). It refuses invalid UTF-8, a key named twice in one
// object (*DuplicateKeyError), an unpaired UTF-16 surrogate escape and
// nesting deeper than MaxDepth.
func Parse(b []byte) (any, error) {
	if !utf8.Valid(b) {
		i := invalidUTF8At(b)
		return nil, fmt.Errorf("not valid UTF-8 (byte %#02x at offset %d)", b[i], i)
	}
	p := parser{b: b}
	v, err := p.value(1)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(p.b) {
		if _, err := p.value(1); err != nil {
			return nil, err
		}
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// ParseObject is Parse for a document that must be one JSON object.
func ParseObject(b []byte) (map[string]any, error) {
	if !utf8.Valid(b) {
		i := invalidUTF8At(b)
		return nil, fmt.Errorf("not valid UTF-8 (byte %#02x at offset %d)", b[i], i)
	}
	p := parser{b: b}
	if p.space(); p.i == len(p.b) || p.b[p.i] != '{' {
		if _, err := p.value(1); err != nil {
			return nil, err
		}
		return nil, errors.New("must be a JSON object")
	}
	obj, err := p.object(1)
	if err != nil {
		return nil, err
	}
	if p.space(); p.i != len(p.b) {
		if _, err := p.value(1); err != nil {
			return nil, err
		}
		return nil, errors.New("more than one JSON value")
	}
	return obj, nil
}

// invalidUTF8At returns the offset of the first byte of b that does not
// start a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return 0
}

// MaxDepth bounds the nesting of a document, as encoding/json's Decode
// does: a deeper document would recurse through the parser (and a
// caller's encoding of the result) without limit.
const MaxDepth = 10000

// parser is a JSON parser (RFC 8259) over valid UTF-8 (Parse checks
// first).
type parser struct {
	b []byte
	i int
}

func (p *parser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// fail reports the character at the current offset, or the end of the
// input.
func (p *parser) fail() error {
	if p.i >= len(p.b) {
		return errors.New("not valid JSON: unexpected end of input")
	}
	r, _ := utf8.DecodeRune(p.b[p.i:])
	return fmt.Errorf("not valid JSON: invalid character %q at offset %d", r, p.i)
}

// expect consumes c, after white space, or fails.
func (p *parser) expect(c byte) error {
	if p.space(); p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return nil
	}
	return p.fail()
}

// next skips white space and reports whether c comes next, consuming it
// if so.
func (p *parser) next(c byte) bool {
	if p.space(); p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) value(depth int) (any, error) {
	if p.space(); p.i == len(p.b) {
		return nil, p.fail()
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		return p.string()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, p.fail()
	}
}

func (p *parser) literal(lit string) error {
	for k := range len(lit) {
		if p.i == len(p.b) || p.b[p.i] != lit[k] {
			return p.fail()
		}
		p.i++
	}
	return nil
}

func nestedTooDeep(depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested deeper than %d levels", MaxDepth)
	}
	return nil
}

// object reads an object at its '{', the depth'th container from the top.
func (p *parser) object(depth int) (map[string]any, error) {
	if err := nestedTooDeep(depth); err != nil {
		return nil, err
	}
	p.i++
	obj := map[string]any{}
	if p.next('}') {
		return obj, nil
	}
	for {
		if p.space(); p.i == len(p.b) || p.b[p.i] != '"' {
			return nil, p.fail()
		}
		at := p.i
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[k]; dup {
			return nil, &DuplicateKeyError{Key: k, Offset: at}
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if obj[k], err = p.value(depth + 1); err != nil {
			if d, ok := err.(*DuplicateKeyError); ok {
				d.rev = append(d.rev, k)
			}
			return nil, err
		}
		if p.next('}') {
			return obj, nil
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
	}
}

// array reads an array at its '[', the depth'th container from the top.
func (p *parser) array(depth int) ([]any, error) {
	if err := nestedTooDeep(depth); err != nil {
		return nil, err
	}
	p.i++
	arr := []any{} // empty, not nil: the canonical form is [], not null
	if p.next(']') {
		return arr, nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			if d, ok := err.(*DuplicateKeyError); ok {
				d.rev = append(d.rev, strconv.Itoa(len(arr)))
			}
			return nil, err
		}
		arr = append(arr, v)
		if p.next(']') {
			return arr, nil
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
	}
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, kept as
// written.
func (p *parser) number() (json.Number, error) {
	start := p.i
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case digits() == 0:
		return "", p.fail()
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if digits() == 0 {
			return "", p.fail()
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return "", p.fail()
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

// string reads a string at its opening quote and returns it decoded.
func (p *parser) string() (string, error) {
	p.i++
	start := p.i
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return p.escaped(append([]byte(nil), p.b[start:p.i]...))
		case c < 0x20:
			return "", p.fail()
		}
		p.i++
	}
	return "", p.fail()
}

// escaped continues a string, decoded so far into out, at a backslash.
func (p *parser) escaped(out []byte) (string, error) {
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.fail()
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		if p.i++; p.i == len(p.b) {
			return "", p.fail()
		}
		switch e := p.b[p.i]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := p.unicodeEscape()
			if err != nil {
				return "", err
			}
			out = utf8.AppendRune(out, r)
		default:
			return "", p.fail()
		}
		p.i++
	}
	return "", p.fail()
}

// unicodeEscape reads the four hex digits after "\u" (p.i is at the 'u'),
// and the low half's escape that must follow a high surrogate, leaving p.i
// at the last digit read. encoding/json would decode an unpaired surrogate
// to U+FFFD, so "\ud800" would share a digest with "\ufffd": it is
// refused.
func (p *parser) unicodeEscape() (rune, error) {
	r := hex4(p.b, p.i+1)
	if r < 0 {
		// Point the error at the first character that is not a hex digit.
		p.i++
		for p.i < len(p.b) && strings.IndexByte("0123456789abcdefABCDEF", p.b[p.i]) >= 0 {
			p.i++
		}
		return 0, p.fail()
	}
	p.i += 4
	switch {
	case r >= 0xd800 && r < 0xdc00:
		lo := -1
		if p.i+2 < len(p.b) && p.b[p.i+1] == '\\' && p.b[p.i+2] == 'u' {
			lo = hex4(p.b, p.i+3)
		}
		if lo < 0xdc00 || lo >= 0xe000 {
			return 0, fmt.Errorf("unpaired UTF-16 surrogate escape at offset %d", p.i-5)
		}
		p.i += 6
		return utf16.DecodeRune(rune(r), rune(lo)), nil
	case r >= 0xdc00 && r < 0xe000:
		return 0, fmt.Errorf("unpaired UTF-16 surrogate escape at offset %d", p.i-5)
	}
	return rune(r), nil
}

// hex4 returns the value of the four hex digits at b[i:], or -1.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	v := 0
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return v
}
