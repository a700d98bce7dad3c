package codec

import (
	"math"
	"strconv"
)

// MemberFunc receives one member of an object: its name and its value,
// which it may read with one of v's methods or leave unread. v is valid
// only during the call.
type MemberFunc func(name string, v *Value) error

// DecodeObject reads data, which must be one JSON object (or null, which
// calls fn for nothing) with optional surrounding whitespace, and calls fn
// for each member in order. Members fn leaves unread are checked and
// skipped, so fn reads only what it needs: this is for provider responses.
// A member named twice is passed twice, so the last one wins, as with
// encoding/json. Text is read as encoding/json reads it (invalid UTF-8 and
// unpaired surrogate escapes become U+FFFD).
//
// It returns fn's first error, wrapped in a *FieldError with the member's
// path; a *SyntaxError for input that is not JSON (members before the
// error may have been passed to fn); or an ErrType *FieldError when data
// is not an object.
func DecodeObject(data []byte, fn MemberFunc) error { return decodeTop(data, false, fn) }

// DecodeObjectStrict is DecodeObject for input that must mean exactly what
// fn reads, such as a call's arguments: a member fn does not read is an
// error (ErrUnknownField), and so is a name that appears twice in one
// object (ErrDuplicateField) and text encoding/json would silently change
// (invalid UTF-8, unpaired surrogate escapes) in any string fn reads. fn
// calls [Value.Skip] to accept a member it ignores.
func DecodeObjectStrict(data []byte, fn MemberFunc) error { return decodeTop(data, true, fn) }

// DecodeValueStrict reads data, which must be one JSON value of any type
// with optional surrounding whitespace, and calls fn with it, under the
// rules of DecodeObjectStrict in every object fn reads. A value fn leaves
// unread is checked and skipped. It is for a caller that reads whatever
// document it is given, such as the host's strict parser (which builds a
// tree of any shape from it); fn's error is returned as it is.
func DecodeValueStrict(data []byte, fn ElementFunc) error {
	v := Value{d: &decoder{b: data, strict: true}, pos: skipSpace(data, 0)}
	if err := fn(&v); err != nil {
		return err
	}
	if v.end == 0 {
		if err := v.Skip(); err != nil {
			return err
		}
	}
	if i := skipSpace(data, v.end); i != len(data) {
		return syntaxErr(i, "trailing data after the JSON value")
	}
	return nil
}

func decodeTop(data []byte, strict bool, fn MemberFunc) error {
	d := &decoder{b: data, strict: strict}
	v := Value{d: d, pos: skipSpace(data, 0)}
	if err := v.Object(fn); err != nil {
		return err
	}
	if i := skipSpace(data, v.end); i != len(data) {
		return syntaxErr(i, "trailing data after the JSON value")
	}
	return nil
}

// decoder is the input of one Decode call.
type decoder struct {
	b      []byte
	strict bool
}

// Kind is the JSON type of a value.
type Kind uint8

// The JSON types, as [Value.Kind] reports them.
const (
	KindInvalid Kind = iota // not the start of a JSON value
	KindNull
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

var kindNames = [...]string{"invalid JSON", "null", "a boolean", "a number", "a string", "an array", "an object"}

// String returns the kind's name ("a string", "null", …).
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is a JSON value being decoded: a member passed to a MemberFunc or
// an element passed to an ElementFunc. It can be read once, by one of its
// methods. Each method checks the whole value, even where it reads none of
// it.
type Value struct {
	d     *decoder
	pos   int // offset of the value's first byte
	end   int // offset past the value once read; 0 before
	depth int // objects and arrays open around the value
}

// Kind returns the value's JSON type without reading it.
func (v *Value) Kind() Kind {
	if v.pos >= len(v.d.b) {
		return KindInvalid
	}
	switch c := v.d.b[v.pos]; {
	case c == '"':
		return KindString
	case c == '{':
		return KindObject
	case c == '[':
		return KindArray
	case c == 't' || c == 'f':
		return KindBool
	case c == 'n':
		return KindNull
	case c == '-' || '0' <= c && c <= '9':
		return KindNumber
	}
	return KindInvalid
}

// typeError reports a value of the wrong kind.
type typeError struct {
	want string
	got  Kind
}

func (e *typeError) Error() string {
	return "codec: wrong type: want " + e.want + ", got " + e.got.String()
}
func (e *typeError) Is(target error) bool { return target == ErrType }

// start checks that v has not been read and returns its kind, or an error
// for input that cannot start a value.
func (v *Value) start() (Kind, error) {
	if v.end != 0 {
		return KindInvalid, errReadTwice
	}
	k := v.Kind()
	if k == KindInvalid {
		if v.pos >= len(v.d.b) {
			return KindInvalid, syntaxErr(v.pos, "unexpected end of input, want a value")
		}
		return KindInvalid, syntaxErr(v.pos, "invalid character, want a value")
	}
	return k, nil
}

var errReadTwice = &SyntaxError{msg: "value read twice (a MemberFunc must read a value at most once)"}

// mismatch checks and skips a value of kind k that is not the wanted kind,
// so a type error is reported only for well-formed input.
func (v *Value) mismatch(want string, k Kind) error {
	if err := v.Skip(); err != nil {
		return err
	}
	return &typeError{want: want, got: k}
}

// null reads a null literal.
func (v *Value) null() error {
	end, err := scanLiteral(v.d.b, v.pos, "null")
	v.end = end
	return err
}

// Skip checks the value and discards it. Under DecodeObjectStrict it is how
// a MemberFunc accepts a member it does not need.
func (v *Value) Skip() error {
	if _, err := v.start(); err != nil {
		return err
	}
	end, err := skipValue(v.d.b, v.pos, v.depth)
	if err != nil {
		return err
	}
	v.end = end
	return nil
}

// String reads a string into dst. null leaves dst unchanged.
func (v *Value) String(dst *string) error {
	k, err := v.start()
	switch {
	case err != nil:
		return err
	case k == KindNull:
		return v.null()
	case k != KindString:
		return v.mismatch("a string", k)
	}
	end, simple, err := scanString(v.d.b, v.pos)
	if err != nil {
		return err
	}
	s, err := unquote(v.d.b, v.pos, end, simple, v.d.strict)
	if err != nil {
		return err
	}
	*dst, v.end = s, end
	return nil
}

// OptString reads a string into a new *dst; null sets *dst to nil.
func (v *Value) OptString(dst **string) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	var s string
	if err := v.String(&s); err != nil {
		return err
	}
	*dst = &s
	return nil
}

// integer checks a number and returns its digits (with sign), refusing a
// fraction or an exponent as encoding/json does for integer types.
func (v *Value) integer(want string) ([]byte, Kind, error) {
	k, err := v.start()
	switch {
	case err != nil:
		return nil, k, err
	case k == KindNull:
		return nil, k, v.null()
	case k != KindNumber:
		return nil, k, v.mismatch(want, k)
	}
	end, integer, err := scanNumber(v.d.b, v.pos)
	if err != nil {
		return nil, k, err
	}
	v.end = end
	digits := v.d.b[v.pos:end]
	if !integer {
		return nil, k, &numberError{want: want, lit: string(digits)}
	}
	return digits, k, nil
}

// numberError reports a number that does not fit the integer read.
type numberError struct{ want, lit string }

func (e *numberError) Error() string {
	return "codec: wrong type: want " + e.want + ", got the number " + e.lit
}
func (e *numberError) Is(target error) bool { return target == ErrType }

// Int64 reads an integer (no fraction or exponent, within int64) into dst.
// null leaves dst unchanged.
func (v *Value) Int64(dst *int64) error {
	digits, k, err := v.integer("an int64")
	if err != nil || k == KindNull {
		return err
	}
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	n, ok := parseUint(digits)
	switch {
	case !ok, !neg && n > math.MaxInt64, neg && n > 1<<63:
		return &numberError{want: "an int64", lit: string(v.d.b[v.pos:v.end])}
	case neg:
		*dst = -int64(n)
	default:
		*dst = int64(n)
	}
	return nil
}

// OptInt64 reads an integer into a new *dst; null sets *dst to nil.
func (v *Value) OptInt64(dst **int64) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	var n int64
	if err := v.Int64(&n); err != nil {
		return err
	}
	*dst = &n
	return nil
}

// Uint64 reads a non-negative integer (within uint64) into dst. null
// leaves dst unchanged.
func (v *Value) Uint64(dst *uint64) error {
	digits, k, err := v.integer("a uint64")
	if err != nil || k == KindNull {
		return err
	}
	n, ok := parseUint(digits)
	if !ok || digits[0] == '-' {
		return &numberError{want: "a uint64", lit: string(digits)}
	}
	*dst = n
	return nil
}

// OptUint64 reads a non-negative integer into a new *dst; null sets *dst
// to nil.
func (v *Value) OptUint64(dst **uint64) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	var n uint64
	if err := v.Uint64(&n); err != nil {
		return err
	}
	*dst = &n
	return nil
}

// parseUint parses decimal digits (a leading '-' fails), reporting
// overflow.
func parseUint(digits []byte) (uint64, bool) {
	var n uint64
	for _, c := range digits {
		d := uint64(c - '0')
		if d > 9 || n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// Float64 reads a number, with or without fraction and exponent, into dst
// as encoding/json reads it into a float64 (the nearest float64); a
// number beyond float64's range is an ErrType error. null leaves dst
// unchanged.
func (v *Value) Float64(dst *float64) error {
	k, err := v.start()
	switch {
	case err != nil:
		return err
	case k == KindNull:
		return v.null()
	case k != KindNumber:
		return v.mismatch("a number", k)
	}
	end, _, err := scanNumber(v.d.b, v.pos)
	if err != nil {
		return err
	}
	v.end = end
	lit := string(v.d.b[v.pos:end])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return &numberError{want: "a float64", lit: lit}
	}
	*dst = f
	return nil
}

// OptFloat64 reads a number into a new *dst; null sets *dst to nil.
func (v *Value) OptFloat64(dst **float64) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	var f float64
	if err := v.Float64(&f); err != nil {
		return err
	}
	*dst = &f
	return nil
}

// Raw reads the value, whatever its type, as its JSON text into *dst
// (reusing its storage; null reads as the text null), as encoding/json
// reads a json.RawMessage: for a connector that passes fields through
// without looking inside. The value is checked whole; under
// DecodeObjectStrict also inside, as if every member were read: a name
// twice in one of its objects and text encoding/json would alter are
// errors, so the raw text means one thing to whoever reads it next.
func (v *Value) Raw(dst *[]byte) error {
	k, err := v.start()
	if err != nil {
		return err
	}
	if v.d.strict {
		err = v.checkStrict(k)
	} else {
		err = v.Skip()
	}
	if err != nil {
		return err
	}
	*dst = append((*dst)[:0], v.d.b[v.pos:v.end]...)
	return nil
}

// checkStrict reads a value of kind k whole, the way strict decoding
// reads what a MemberFunc reads.
func (v *Value) checkStrict(k Kind) error {
	switch k {
	case KindObject:
		return v.Object(func(_ string, m *Value) error { return m.checkStrict(m.Kind()) })
	case KindArray:
		return v.Array(func(e *Value) error { return e.checkStrict(e.Kind()) })
	case KindString:
		var s string
		return v.String(&s)
	}
	return v.Skip()
}

// Bool reads true or false into dst. null leaves dst unchanged.
func (v *Value) Bool(dst *bool) error {
	k, err := v.start()
	switch {
	case err != nil:
		return err
	case k == KindNull:
		return v.null()
	case k != KindBool:
		return v.mismatch("a boolean", k)
	}
	lit := "false"
	if v.d.b[v.pos] == 't' {
		lit = "true"
	}
	end, err := scanLiteral(v.d.b, v.pos, lit)
	if err != nil {
		return err
	}
	*dst, v.end = lit == "true", end
	return nil
}

// OptBool reads true or false into a new *dst; null sets *dst to nil.
func (v *Value) OptBool(dst **bool) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	var b bool
	if err := v.Bool(&b); err != nil {
		return err
	}
	*dst = &b
	return nil
}

// Object reads an object, calling fn for each member as DecodeObject (or,
// under DecodeObjectStrict, DecodeObjectStrict) does. null calls fn for
// nothing.
func (v *Value) Object(fn MemberFunc) error {
	k, err := v.start()
	switch {
	case err != nil:
		return err
	case k == KindNull:
		return v.null()
	case k != KindObject:
		return v.mismatch("an object", k)
	}
	if v.depth+1 > maxDepth {
		return tooDeep(v.pos)
	}
	d, b := v.d, v.d.b
	i := skipSpace(b, v.pos+1)
	if i < len(b) && b[i] == '}' {
		v.end = i + 1
		return nil
	}
	var buf [16]string // the names of a small object, on the stack
	seen := names{list: buf[:0]}
	m := Value{d: d, depth: v.depth + 1}
	for {
		if i >= len(b) || b[i] != '"' {
			return syntaxErr(i, "want a string key")
		}
		at := i
		end, simple, err := scanString(b, i)
		if err != nil {
			return err
		}
		name, err := unquote(b, i, end, simple, d.strict)
		if err != nil {
			return err
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return syntaxErr(i, "want ':' after an object key")
		}
		if d.strict {
			var fresh bool
			if seen, fresh = seen.add(name); !fresh {
				return within(name, &DuplicateFieldError{Name: name, Offset: at})
			}
		}
		m.pos, m.end = skipSpace(b, i+1), 0
		if err := fn(name, &m); err != nil {
			return within(name, err)
		}
		if m.end == 0 {
			if d.strict {
				return within(name, ErrUnknownField)
			}
			if err := m.Skip(); err != nil {
				return err
			}
		}
		i = skipSpace(b, m.end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			v.end = i + 1
			return nil
		default:
			return syntaxErr(i, "want ',' or '}' after an object member")
		}
	}
}

// names is the set of member names of one object seen so far (strict
// decoding): a list while short (on the caller's stack), a map beyond.
type names struct {
	list []string
	set  map[string]struct{}
}

// add records name and reports whether it was new. It returns the set
// rather than change it through a pointer, so that a list on the stack
// stays there.
func (n names) add(name string) (names, bool) {
	if n.set != nil {
		if _, dup := n.set[name]; dup {
			return n, false
		}
		n.set[name] = struct{}{}
		return n, true
	}
	for _, s := range n.list {
		if s == name {
			return n, false
		}
	}
	n.list = append(n.list, name)
	if len(n.list) > 16 {
		n.set = make(map[string]struct{}, 2*len(n.list))
		for _, s := range n.list {
			n.set[s] = struct{}{}
		}
		n.list = nil
	}
	return n, true
}

// ElementFunc receives one element of an array, which it reads with one
// of v's methods; an element it leaves unread is checked and skipped. v is
// valid only during the call.
type ElementFunc func(v *Value) error

// Array reads an array, calling fn for each element in order. null calls
// fn for nothing.
func (v *Value) Array(fn ElementFunc) error {
	k, err := v.start()
	switch {
	case err != nil:
		return err
	case k == KindNull:
		return v.null()
	case k != KindArray:
		return v.mismatch("an array", k)
	}
	if v.depth+1 > maxDepth {
		return tooDeep(v.pos)
	}
	d, b := v.d, v.d.b
	i := skipSpace(b, v.pos+1)
	if i < len(b) && b[i] == ']' {
		v.end = i + 1
		return nil
	}
	e := Value{d: d, depth: v.depth + 1}
	for n := 0; ; n++ {
		e.pos, e.end = i, 0
		if err := fn(&e); err != nil {
			return within("["+strconv.Itoa(n)+"]", err)
		}
		if e.end == 0 {
			if err := e.Skip(); err != nil {
				return err
			}
		}
		i = skipSpace(b, e.end)
		switch {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			v.end = i + 1
			return nil
		default:
			return syntaxErr(i, "want ',' or ']' after an array element")
		}
	}
}

// Strings reads an array of strings into dst (null elements read as "").
// null sets *dst to nil; an empty array to an empty, non-nil slice.
func (v *Value) Strings(dst *[]string) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	out := []string{}
	err := v.Array(func(e *Value) error {
		var s string
		err := e.String(&s)
		out = append(out, s)
		return err
	})
	if err != nil {
		return err
	}
	*dst = out
	return nil
}

// StringMap reads an object of strings into *dst, allocating the map if
// *dst is nil (null values read as ""). null sets *dst to nil.
func (v *Value) StringMap(dst *map[string]string) error {
	if v.Kind() == KindNull && v.end == 0 {
		*dst = nil
		return v.null()
	}
	m := *dst
	err := v.Object(func(name string, e *Value) error {
		var s string
		if err := e.String(&s); err != nil {
			return err
		}
		if m == nil {
			m = map[string]string{}
		}
		m[name] = s
		return nil
	})
	if err != nil {
		return err
	}
	if m == nil && v.d.b[v.pos] == '{' {
		m = map[string]string{}
	}
	*dst = m
	return nil
}
