package codec

import (
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The scanner works on byte offsets into the input. Every function that
// reads a token takes the offset of its first byte and returns the offset
// just past it, or an error; none of them looks beyond the token. They
// accept exactly the grammar encoding/json accepts (RFC 8259, with nesting
// at most maxDepth deep), which the differential fuzz tests hold them to.

// maxDepth is encoding/json's nesting limit: 10000 open objects and arrays
// are allowed, one more is an error.
const maxDepth = 10000

// space[c] is true for JSON's four whitespace bytes.
var space = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// skipSpace returns the offset of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && space[b[i]] {
		i++
	}
	return i
}

// plain[c] is true for bytes that stand for themselves inside a JSON
// string in the fast path: printable ASCII other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// scanString checks the string token starting at b[i] == '"' and returns
// the offset past its closing quote. simple is true when the token holds
// only printable ASCII without escapes, so its content is b[i+1:end-1]
// verbatim. Like encoding/json it accepts any bytes >= 0x20 (invalid UTF-8
// included) and refuses control bytes and unknown escapes.
func scanString(b []byte, i int) (end int, simple bool, err error) {
	j := i + 1
	// Eight plain bytes at a time (results, arguments and provider bodies
	// are mostly long runs of them), then byte by byte.
	for j+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[j:])) {
		j += 8
	}
	for j < len(b) && plain[b[j]] {
		j++
	}
	if j < len(b) && b[j] == '"' {
		return j + 1, true, nil
	}
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, false, nil
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false, syntaxErr(len(b), "unexpected end of input in a string")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				for k := j + 2; k < j+6; k++ {
					if k >= len(b) {
						return 0, false, syntaxErr(len(b), "unexpected end of input in a string")
					}
					if !isHex(b[k]) {
						return 0, false, syntaxErr(k, "invalid \\u escape in a string")
					}
				}
				j += 6
			default:
				return 0, false, syntaxErr(j+1, "invalid escape in a string")
			}
		case c < 0x20:
			return 0, false, syntaxErr(j, "control character in a string")
		default:
			j++
		}
	}
	return 0, false, syntaxErr(len(b), "unexpected end of input in a string")
}

// plainWord reports whether all eight bytes of x are plain: none is '"',
// '\\', below 0x20 or at or above 0x80. (x-0x20…) & ^x has a byte's top
// bit set when some byte is below 0x20 (exactly when one is; which one may
// be misreported, which does not matter here), and a byte of x^'"'… is
// zero where x holds '"'.
func plainWord(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ ('"' * ones)
	bs := x ^ ('\\' * ones)
	return (x|(x-0x20*ones)|(q-ones)&^q|(bs-ones)&^bs)&highs == 0
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// unquote returns the content of the string token b[i:end] (as checked by
// scanString), with escapes resolved. Lenient, it does what encoding/json
// does with bad text: each byte of invalid UTF-8 and each unpaired UTF-16
// surrogate escape becomes U+FFFD. Strict, it refuses them
// (ErrAmbiguousText), so that no two different inputs read as the same
// string.
func unquote(b []byte, i, end int, simple, strict bool) (string, error) {
	if simple {
		return string(b[i+1 : end-1]), nil
	}
	s := b[i+1 : end-1]
	out := make([]byte, 0, len(s))
	for k := 0; k < len(s); {
		c := s[k]
		switch {
		case c == '\\':
			switch s[k+1] {
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
				r := hex4(s[k+2 : k+6])
				k += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by an escaped low one is
					// one character; anything else is unpaired.
					if k+6 <= len(s) && s[k] == '\\' && s[k+1] == 'u' {
						if r2 := utf16.DecodeRune(r, hex4(s[k+2:k+6])); r2 != utf8.RuneError {
							out = utf8.AppendRune(out, r2)
							k += 6
							continue
						}
					}
					if strict {
						return "", ambiguousText(i+1+k-6, "unpaired UTF-16 surrogate escape")
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, s[k+1])
			}
			k += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			k++
		default:
			r, n := utf8.DecodeRune(s[k:])
			if r == utf8.RuneError && n == 1 {
				if strict {
					return "", ambiguousText(i+1+k, "invalid UTF-8")
				}
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, s[k:k+n]...)
			}
			k += n
		}
	}
	return string(out), nil
}

// ambiguousText reports, at offset off, text strict reading refuses beyond
// encoding/json (ErrAmbiguousText).
func ambiguousText(off int, what string) error {
	return &SyntaxError{Offset: off, msg: "ambiguous text: " + what, class: ErrAmbiguousText}
}

// tooDeep reports a container at offset off nested one level deeper than
// maxDepth allows (ErrTooDeep).
func tooDeep(off int) error {
	return &SyntaxError{Offset: off, msg: "nesting deeper than " + strconv.Itoa(maxDepth), class: ErrTooDeep}
}

func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// scanNumber checks the number token starting at b[i] and returns the
// offset past it; integer reports that it has neither fraction nor
// exponent.
func scanNumber(b []byte, i int) (end int, integer bool, err error) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	default:
		return 0, false, syntaxErr(j, "invalid number")
	}
	integer = true
	if j < len(b) && b[j] == '.' {
		integer = false
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, false, syntaxErr(j, "invalid number: no digit after the decimal point")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		integer = false
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, false, syntaxErr(j, "invalid number: no digit in the exponent")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	return j, integer, nil
}

// scanLiteral checks that b[i:] starts with lit (true, false or null). An
// error is at the first byte that differs, or at the end of the input.
func scanLiteral(b []byte, i int, lit string) (int, error) {
	for k := range len(lit) {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return 0, syntaxErr(i+k, "invalid literal, want "+lit)
		}
	}
	return i + len(lit), nil
}

// skipValue checks the value starting at b[i] (no leading whitespace) and
// returns the offset past it. depth is the nesting depth of the value's
// container. It keeps its own stack, so deep input costs no Go stack.
func skipValue(b []byte, i, depth int) (int, error) {
	var stack []byte // '{' or '[' per open container
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, syntaxErr(i, "unexpected end of input, want a value")
		}
		var err error
		switch c := b[i]; c {
		case '{', '[':
			if depth+len(stack)+1 > maxDepth {
				return 0, tooDeep(i)
			}
			stack = append(stack, c)
			i = skipSpace(b, i+1)
			close := byte('}')
			if c == '[' {
				close = ']'
			}
			if i < len(b) && b[i] == close {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, err = skipKey(b, i); err != nil {
					return 0, err
				}
			}
			continue // the first member's value
		case '"':
			i, _, err = scanString(b, i)
		case 't':
			i, err = scanLiteral(b, i, "true")
		case 'f':
			i, err = scanLiteral(b, i, "false")
		case 'n':
			i, err = scanLiteral(b, i, "null")
		default:
			i, _, err = scanNumber(b, i)
		}
		if err != nil {
			return 0, err
		}
		// A value ended at i: close containers or move to the next member.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, syntaxErr(i, "unexpected end of input in an object or array")
			}
			top := stack[len(stack)-1]
			if c := b[i]; c == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					if i, err = skipKey(b, i); err != nil {
						return 0, err
					}
				}
				break
			} else if top == '{' && c == '}' || top == '[' && c == ']' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if top == '{' {
				return 0, syntaxErr(i, "want ',' or '}' after an object member")
			}
			return 0, syntaxErr(i, "want ',' or ']' after an array element")
		}
	}
}

// skipKey checks an object key and its colon at b[i] and returns the offset
// of the member's value.
func skipKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, syntaxErr(i, "want a string key")
	}
	i, _, err := scanString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, syntaxErr(i, "want ':' after an object key")
	}
	return skipSpace(b, i+1), nil
}

// Valid reports whether b is exactly one JSON value, with optional
// surrounding whitespace: what encoding/json's Valid reports, several times
// faster.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i, 0)
	return err == nil && skipSpace(b, end) == len(b)
}
