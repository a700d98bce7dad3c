package codec

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendObject appends a JSON object to dst and returns the extended
// buffer: fn adds the members through o, in order. The bytes are those
// encoding/json's Marshal writes for a struct with the same fields in the
// same order (strings HTML-escaped, invalid UTF-8 as \ufffd, nil slices
// and maps as null).
func AppendObject(dst []byte, fn func(o *Object)) []byte {
	o := Object{b: &dst}
	dst = append(dst, '{')
	fn(&o)
	return append(dst, '}')
}

// Object adds members to an object being written by AppendObject. Names
// are escaped like values; repeating a name is the caller's mistake.
type Object struct {
	b *[]byte
	n int
}

func (o *Object) name(name string) {
	if o.n > 0 {
		*o.b = append(*o.b, ',')
	}
	o.n++
	*o.b = AppendString(*o.b, name)
	*o.b = append(*o.b, ':')
}

// String adds a string member.
func (o *Object) String(name, v string) {
	o.name(name)
	*o.b = AppendString(*o.b, v)
}

// OptString adds a string member, or null when v is nil.
func (o *Object) OptString(name string, v *string) {
	o.name(name)
	if v == nil {
		*o.b = append(*o.b, "null"...)
		return
	}
	*o.b = AppendString(*o.b, *v)
}

// Int adds an integer member.
func (o *Object) Int(name string, v int64) {
	o.name(name)
	*o.b = strconv.AppendInt(*o.b, v, 10)
}

// Uint adds a non-negative integer member.
func (o *Object) Uint(name string, v uint64) {
	o.name(name)
	*o.b = strconv.AppendUint(*o.b, v, 10)
}

// Bool adds a boolean member.
func (o *Object) Bool(name string, v bool) {
	o.name(name)
	*o.b = strconv.AppendBool(*o.b, v)
}

// Float adds a number member, written as encoding/json writes a float64
// (the shortest text that reads back as v: 1.5, 100, 1e+21, 1e-7). NaN
// and ±Inf, which JSON cannot hold, panic: encoding/json refuses them
// with an error, and an encoder that cannot write what it was given must
// not write something else (in a connector the panic traps the call,
// which the host treats as an uncertain outcome).
func (o *Object) Float(name string, v float64) {
	o.name(name)
	*o.b = appendFloat(*o.b, v)
}

// Raw adds a member whose value is the JSON text v (a value read with
// Value.Raw, say), compacted and HTML-escaped as encoding/json writes a
// json.RawMessage; empty v is null. Text that is not one JSON value
// panics, as Float's NaN does.
func (o *Object) Raw(name string, v []byte) {
	o.name(name)
	*o.b = appendRaw(*o.b, v)
}

// Null adds a null member.
func (o *Object) Null(name string) {
	o.name(name)
	*o.b = append(*o.b, "null"...)
}

// Strings adds an array of strings, or null when v is nil.
func (o *Object) Strings(name string, v []string) {
	o.name(name)
	*o.b = appendStrings(*o.b, v)
}

// StringMap adds an object of strings with its names sorted, as
// encoding/json writes a map; null when m is nil.
func (o *Object) StringMap(name string, m map[string]string) {
	o.name(name)
	if m == nil {
		*o.b = append(*o.b, "null"...)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	*o.b = AppendObject(*o.b, func(o *Object) {
		for _, k := range keys {
			o.String(k, m[k])
		}
	})
}

// Object adds an object member whose members fn adds.
func (o *Object) Object(name string, fn func(o *Object)) {
	o.name(name)
	*o.b = AppendObject(*o.b, fn)
}

// Array adds an array member whose elements fn adds.
func (o *Object) Array(name string, fn func(a *Array)) {
	o.name(name)
	*o.b = AppendArray(*o.b, fn)
}

// AppendArray appends a JSON array to dst and returns the extended
// buffer: fn adds the elements through a, in order.
func AppendArray(dst []byte, fn func(a *Array)) []byte {
	a := Array{b: &dst}
	dst = append(dst, '[')
	fn(&a)
	return append(dst, ']')
}

// Array adds elements to an array being written.
type Array struct {
	b *[]byte
	n int
}

func (a *Array) next() {
	if a.n > 0 {
		*a.b = append(*a.b, ',')
	}
	a.n++
}

// String adds a string element.
func (a *Array) String(v string) {
	a.next()
	*a.b = AppendString(*a.b, v)
}

// Int adds an integer element.
func (a *Array) Int(v int64) {
	a.next()
	*a.b = strconv.AppendInt(*a.b, v, 10)
}

// Float adds a number element (see Object.Float).
func (a *Array) Float(v float64) {
	a.next()
	*a.b = appendFloat(*a.b, v)
}

// Raw adds an element whose value is the JSON text v (see Object.Raw).
func (a *Array) Raw(v []byte) {
	a.next()
	*a.b = appendRaw(*a.b, v)
}

// Object adds an object element whose members fn adds.
func (a *Array) Object(fn func(o *Object)) {
	a.next()
	*a.b = AppendObject(*a.b, fn)
}

func appendStrings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// safe[c] is true for ASCII bytes encoding/json writes verbatim in a
// string (it escapes '<', '>' and '&' for HTML).
var safe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendFloat writes f as encoding/json writes a float64: the shortest
// decimal that reads back as f, in exponent form below 1e-6 and from 1e21
// on, with the exponent's leading zero dropped (1e-07 → 1e-7).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		panic("codec: " + strconv.FormatFloat(f, 'g', -1, 64) + " has no JSON form")
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendRaw writes the JSON text v as encoding/json writes a
// json.RawMessage: without the whitespace between tokens, '<', '>', '&',
// U+2028 and U+2029 escaped, everything else verbatim; empty v is null.
func appendRaw(b, v []byte) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	if !Valid(v) {
		panic("codec: Raw: the value is not JSON")
	}
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString && c == '\\':
			b = append(b, c, v[i+1])
			i++
			continue
		case c == '"':
			inString = !inString
		case !inString && space[c]:
			continue
		case c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			continue
		case c == 0xE2 && i+2 < len(v) && v[i+1] == 0x80 && v[i+2]&^1 == 0xA8:
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[v[i+2]&0xF])
			i += 2
			continue
		}
		b = append(b, c)
	}
	return b
}
