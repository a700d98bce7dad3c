package host

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// parseArgs parses a call's arguments, which must be one JSON object. It
// returns the decoded document (numbers as json.Number, the form the
// schema validator reads) and the hex sha256 of its canonical form: object
// keys sorted, insignificant white space removed, numbers kept as written.
// Two argument documents that mean the same thing have the same digest;
// any change of value changes it.
//
// Arguments that two different documents could share a digest with are
// refused: invalid UTF-8 and unpaired UTF-16 surrogate escapes (decoding
// turns both into U+FFFD) and duplicate object keys (decoding keeps the
// last one). So are documents nested deeper than maxArgsDepth.
func parseArgs(args []byte) (doc map[string]any, digest string, err error) {
	if !utf8.Valid(args) {
		return nil, "", errors.New("arguments are not valid UTF-8")
	}
	p := argParser{b: args}
	if p.space(); p.i == len(p.b) || p.b[p.i] != '{' {
		if _, err := p.value(1); err != nil {
			return nil, "", err
		}
		return nil, "", errors.New("arguments must be a JSON object")
	}
	if doc, err = p.object(1); err != nil {
		return nil, "", err
	}
	if p.space(); p.i != len(p.b) {
		if _, err := p.value(1); err != nil {
			return nil, "", err
		}
		return nil, "", errors.New("arguments hold more than one JSON value")
	}
	// encoding/json sorts map keys and writes json.Number verbatim.
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, "", fmt.Errorf("canonicalize arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return doc, hex.EncodeToString(sum[:]), nil
}

// maxArgsDepth bounds the nesting of arguments, as encoding/json's Decode
// does: a deeper document would recurse through the parser and the
// canonical encoding without limit.
const maxArgsDepth = 10000

// argParser is a JSON parser (RFC 8259) for call arguments, which are
// valid UTF-8 (parseArgs checks first). It builds what encoding/json's
// Decode with UseNumber builds - map[string]any, []any, string,
// json.Number, bool and nil - and refuses what would make two different
// documents decode alike: a key named twice in one object and a UTF-16
// surrogate escape that is not half of a pair. It replaced a walk over
// json.Decoder.Token, which allocated per token (see RATIONALE.md);
// FuzzArgParserMatchesEncodingJSON holds it to encoding/json's grammar.
type argParser struct {
	b []byte
	i int
}

func (p *argParser) space() {
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
func (p *argParser) fail() error {
	if p.i >= len(p.b) {
		return errors.New("arguments are not valid JSON: unexpected end of input")
	}
	r, _ := utf8.DecodeRune(p.b[p.i:])
	return fmt.Errorf("arguments are not valid JSON: invalid character %q at offset %d", r, p.i)
}

// expect consumes c, after white space, or fails.
func (p *argParser) expect(c byte) error {
	if p.space(); p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return nil
	}
	return p.fail()
}

// next skips white space and reports whether c comes next, consuming it
// if so.
func (p *argParser) next(c byte) bool {
	if p.space(); p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *argParser) value(depth int) (any, error) {
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

func (p *argParser) literal(lit string) error {
	for k := range len(lit) {
		if p.i == len(p.b) || p.b[p.i] != lit[k] {
			return p.fail()
		}
		p.i++
	}
	return nil
}

func nestedTooDeep(depth int) error {
	if depth > maxArgsDepth {
		return fmt.Errorf("arguments are nested deeper than %d levels", maxArgsDepth)
	}
	return nil
}

// object reads an object at its '{', the depth'th container from the top.
func (p *argParser) object(depth int) (map[string]any, error) {
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
		k, err := p.string()
		if err != nil {
			return nil, err
		}
		if _, dup := obj[k]; dup {
			return nil, fmt.Errorf("arguments name the key %q twice", k)
		}
		if err := p.expect(':'); err != nil {
			return nil, err
		}
		if obj[k], err = p.value(depth + 1); err != nil {
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
func (p *argParser) array(depth int) ([]any, error) {
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
func (p *argParser) number() (json.Number, error) {
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
func (p *argParser) string() (string, error) {
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
func (p *argParser) escaped(out []byte) (string, error) {
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
func (p *argParser) unicodeEscape() (rune, error) {
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
			return 0, errors.New("arguments hold an unpaired UTF-16 surrogate escape")
		}
		p.i += 6
		return utf16.DecodeRune(rune(r), rune(lo)), nil
	case r >= 0xdc00 && r < 0xe000:
		return 0, errors.New("arguments hold an unpaired UTF-16 surrogate escape")
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
