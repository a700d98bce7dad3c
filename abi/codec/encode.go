package codec

import (
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
