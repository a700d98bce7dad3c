package codec

// Form is an application/x-www-form-urlencoded body (or URL query) built
// in the order fields are added. Keys and values are escaped as
// url.QueryEscape escapes them, so adding the fields of a url.Values in
// sorted key order gives the bytes of its Encode, without the map and the
// sort. The zero value is an empty form.
type Form struct {
	b []byte
}

// Add appends key=value.
func (f *Form) Add(key, value string) {
	if len(f.b) > 0 {
		f.b = append(f.b, '&')
	}
	f.b = AppendQueryEscape(f.b, key)
	f.b = append(f.b, '=')
	f.b = AppendQueryEscape(f.b, value)
}

// Bytes returns the encoded form; it aliases the form's buffer.
func (f *Form) Bytes() []byte { return f.b }

// String returns the encoded form.
func (f *Form) String() string { return string(f.b) }

// Len returns the length of the encoded form in bytes.
func (f *Form) Len() int { return len(f.b) }

// unreserved[c] is true for the bytes url.QueryEscape leaves as they are.
var unreserved = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['-'], t['_'], t['.'], t['~'] = true, true, true, true
	return t
}()

// AppendQueryEscape appends s escaped as url.QueryEscape escapes it: a
// space becomes '+', bytes other than letters, digits and "-_.~" become
// %XX.
func AppendQueryEscape(dst []byte, s string) []byte {
	const upperHex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case unreserved[c]:
			dst = append(dst, c)
		case c == ' ':
			dst = append(dst, '+')
		default:
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return dst
}
