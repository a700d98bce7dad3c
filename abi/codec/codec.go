// Package codec reads and writes the JSON and form bodies connectors
// exchange with the host and with providers, without reflection.
//
// encoding/json compiled to wasm is the largest cost of a connector call:
// its scanner calls a function per input byte and its decoder walks types
// by reflection, both of which wasm runs many times slower than native
// code. This package does the same work with plain loops:
//
//   - [DecodeObject] and [DecodeObjectStrict] call a function for each
//     member of a JSON object, which reads the members it wants through
//     [Value] (into strings, integers, floats, booleans, string maps,
//     nested objects and arrays, or, for a field passed through unread, its
//     raw JSON text). Lenient decoding skips members the function does
//     not read, for provider responses; strict decoding refuses them, and
//     refuses duplicate names and ambiguous text, for arguments.
//     [DecodeValueStrict] reads a value of any type under the same rules,
//     for the host's strict parser, which builds a tree from it.
//   - [AppendObject] writes a JSON object member by member, byte for byte
//     as encoding/json would marshal the equivalent struct.
//   - [Form] writes an application/x-www-form-urlencoded body in the order
//     fields are added, escaped as url.QueryEscape does.
//   - [Valid] reports what encoding/json's Valid reports.
//
// Every reader accepts exactly the JSON encoding/json accepts (differential
// fuzz tests hold it to that), reads numbers into integers as
// encoding/json does (no fraction, no exponent, no overflow) and into
// floats as it does into a float64, and treats
// null as encoding/json treats it for the destination. Member names are
// matched exactly, where encoding/json would also match them
// case-insensitively.
//
// The package depends on the standard library only.
package codec

import (
	"errors"
	"strconv"
	"strings"
)

// SyntaxError reports input that is not JSON, or (strict decoding) text
// that could be read two ways.
type SyntaxError struct {
	// Offset is the byte offset in the input where the problem was found:
	// the first byte that does not fit, or the length of the input when it
	// ends too soon.
	Offset int
	msg    string
	class  error // ErrTooDeep, ErrAmbiguousText or nil
}

func (e *SyntaxError) Error() string {
	return "codec: " + e.msg + " at offset " + strconv.Itoa(e.Offset)
}

// Is reports whether target is the class of the error: ErrTooDeep or
// ErrAmbiguousText, for the errors of those kinds.
func (e *SyntaxError) Is(target error) bool { return e.class != nil && target == e.class }

func syntaxErr(off int, msg string) error { return &SyntaxError{Offset: off, msg: msg} }

// FieldError is an error of one member of an object or element of an
// array, with the path to it.
type FieldError struct {
	// Path locates the value: member names separated by dots and array
	// indexes in brackets, e.g. "to[1]" or "error.payment_intent.id". A
	// path longer than about 512 bytes keeps only its innermost part,
	// after a leading "…".
	Path string
	// Err is what went wrong there.
	Err error
	cut bool // Path is cut: within prefixes it no more
}

func (e *FieldError) Error() string {
	return "codec: " + e.Path + ": " + strings.TrimPrefix(e.Err.Error(), "codec: ")
}

// Unwrap returns e.Err.
func (e *FieldError) Unwrap() error { return e.Err }

// Errors callers may test for with errors.Is.
var (
	// ErrUnknownField reports a member that strict decoding's function did
	// not read.
	ErrUnknownField = errors.New("codec: unknown field")
	// ErrDuplicateField reports a member name that appears twice in one
	// object under strict decoding; the error is a *DuplicateFieldError.
	ErrDuplicateField = errors.New("codec: duplicate field")
	// ErrAmbiguousText reports, under strict decoding, text encoding/json
	// would silently change: invalid UTF-8 or an unpaired UTF-16 surrogate
	// escape in a string. The error is a *SyntaxError at the offending byte
	// or at the escape's backslash.
	ErrAmbiguousText = errors.New("codec: ambiguous text")
	// ErrTooDeep reports objects and arrays nested deeper than
	// encoding/json allows (10000 levels). The error is a *SyntaxError at
	// the container that is one too many.
	ErrTooDeep = errors.New("codec: nesting too deep")
	// ErrType reports a value of another JSON type than the one read, or a
	// number that does not fit the integer read.
	ErrType = errors.New("codec: wrong type")
)

// DuplicateFieldError reports a member name that appears twice in one
// object under strict decoding. errors.Is(err, ErrDuplicateField) holds
// for it; it comes wrapped in a *FieldError whose Path ends with the
// name.
type DuplicateFieldError struct {
	// Name is the repeated member name, decoded.
	Name string
	// Offset is the byte offset of the second occurrence's opening quote.
	Offset int
}

func (e *DuplicateFieldError) Error() string { return ErrDuplicateField.Error() }

// Is reports whether target is ErrDuplicateField.
func (e *DuplicateFieldError) Is(target error) bool { return target == ErrDuplicateField }

// maxPath bounds the length of a FieldError's Path that within still
// prefixes. Prefixing copies the path, once per enclosing object or array,
// so without a bound an error at the bottom of input nested thousands of
// levels deep would cost time and memory quadratic in the input's size.
const maxPath = 512

// within prefixes err's path with seg (a member name or "[i]"). A path
// already maxPath bytes long is not prefixed any more: it starts with
// "…" instead, and keeps its innermost part.
func within(seg string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		switch {
		case fe.cut:
			return fe
		case len(fe.Path) >= maxPath:
			return &FieldError{Path: "…" + fe.Path, Err: fe.Err, cut: true}
		case fe.Path != "" && fe.Path[0] != '[':
			seg += "."
		}
		return &FieldError{Path: seg + fe.Path, Err: fe.Err}
	}
	return &FieldError{Path: seg, Err: err}
}
