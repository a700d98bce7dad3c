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
// The parsing is abi/codec's strict decoder, the one connectors run on
// their arguments: this package builds the tree from it and says its
// errors in its own words.
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
	"unicode/utf8"

	"github.com/connhost/connhost/abi/codec"
)

// DuplicateKeyError reports an object that names a key twice.
type DuplicateKeyError struct {
	// Key is the repeated key, decoded.
	Key string
	// Offset is the byte offset of the second occurrence's opening quote.
	Offset int
	// rev is the path from the object to the top, innermost first.
	rev []segment
}

// Pointer returns the JSON Pointer (RFC 6901) of the object that names
// the key twice: "" for the top-level object, "/arguments/to" for one
// nested there.
func (e *DuplicateKeyError) Pointer() string {
	var b strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		s := e.rev[i]
		b.WriteByte('/')
		if s.index >= 0 {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(s.name))
		}
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

// MaxDepth bounds the nesting of a document, as encoding/json's Decode
// does: a deeper document would recurse through the parser (and a
// caller's encoding of the result) without limit. It is abi/codec's
// limit.
const MaxDepth = 10000

// Parse parses b, which must hold exactly one JSON value (white space
// around it allowed). It refuses invalid UTF-8, a key named twice in one
// object (*DuplicateKeyError), an unpaired UTF-16 surrogate escape and
// nesting deeper than MaxDepth.
func Parse(b []byte) (any, error) {
	return parse(b, false)
}

// ParseObject is Parse for a document that must be one JSON object.
func ParseObject(b []byte) (map[string]any, error) {
	v, err := parse(b, true)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

var errNotObject = errors.New("must be a JSON object")

func parse(b []byte, object bool) (any, error) {
	if !utf8.Valid(b) {
		i := invalidUTF8At(b)
		return nil, fmt.Errorf("not valid UTF-8 (byte %#02x at offset %d)", b[i], i)
	}
	v, rest, err := decode(b, 0, object)
	if err != nil || rest < 0 {
		return v, err
	}
	// More follows the value: say what is wrong with the next one, if
	// anything, as a parser reading on would.
	if _, _, err := decode(b[rest:], rest, false); err != nil {
		return nil, err
	}
	return nil, errors.New("more than one JSON value")
}

// decode builds the JSON value that starts b, which is at offset base in
// the document. If the value is followed by more than white space, it
// returns the offset in b where that starts as rest, else -1. If object,
// a value that is not an object is refused (after it has been read, so
// that it is refused for not being JSON if it is not).
func decode(b []byte, base int, object bool) (v any, rest int, err error) {
	var p builder
	done := false
	err = codec.DecodeValueStrict(b, func(top *codec.Value) error {
		notObject := object && top.Kind() != codec.KindObject
		var err error
		if v, err = p.value(top); err != nil {
			return err
		}
		if notObject {
			return errNotObject
		}
		done = true
		return nil
	})
	if err == nil {
		return v, -1, nil
	}
	if se := (*codec.SyntaxError)(nil); done && errors.As(err, &se) {
		return v, se.Offset, nil // the codec's trailing data
	}
	return nil, -1, p.translate(b, base, err)
}

// builder builds a document from the codec's values. As an error comes
// back up from a member or an element, rev gathers the path to where it
// happened, so that an object naming a key twice can be located.
type builder struct {
	rev []segment
	num []byte // a number's text, reused
}

// segment is one step of a path: an object member's name, or an array
// index when index >= 0.
type segment struct {
	name  string
	index int
}

func (p *builder) value(v *codec.Value) (any, error) {
	switch v.Kind() {
	case codec.KindObject:
		obj := map[string]any{}
		err := v.Object(func(name string, m *codec.Value) error {
			x, err := p.value(m)
			if err != nil {
				p.rev = append(p.rev, segment{name: name, index: -1})
				return err
			}
			obj[name] = x
			return nil
		})
		return obj, err
	case codec.KindArray:
		arr := []any{} // empty, not nil: the canonical form is [], not null
		err := v.Array(func(e *codec.Value) error {
			x, err := p.value(e)
			if err != nil {
				p.rev = append(p.rev, segment{index: len(arr)})
				return err
			}
			arr = append(arr, x)
			return nil
		})
		return arr, err
	case codec.KindString:
		var s string
		err := v.String(&s)
		return s, err
	case codec.KindNumber:
		err := v.Raw(&p.num) // kept as written
		return json.Number(p.num), err
	case codec.KindBool:
		var t bool
		err := v.Bool(&t)
		return t, err
	}
	return nil, v.Skip() // null, or the codec's error for what is not a value
}

// translate says the codec's error err, for the document b at offset
// base of the whole input, in this package's words, with offsets in the
// whole input.
func (p *builder) translate(b []byte, base int, err error) error {
	var dup *codec.DuplicateFieldError
	var se *codec.SyntaxError
	switch {
	case errors.As(err, &dup):
		// The codec finds a key twice before it passes the second one on,
		// so the path gathered is the object's.
		return &DuplicateKeyError{Key: dup.Name, Offset: base + dup.Offset, rev: p.rev}
	case !errors.As(err, &se):
		return err // errNotObject
	case errors.Is(err, codec.ErrTooDeep):
		return fmt.Errorf("nested deeper than %d levels", MaxDepth)
	case errors.Is(err, codec.ErrAmbiguousText):
		// Invalid UTF-8 was refused before the codec read b.
		return fmt.Errorf("unpaired UTF-16 surrogate escape at offset %d", base+se.Offset)
	case se.Offset >= len(b):
		return errors.New("not valid JSON: unexpected end of input")
	}
	r, _ := utf8.DecodeRune(b[se.Offset:])
	return fmt.Errorf("not valid JSON: invalid character %q at offset %d", r, base+se.Offset)
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
