package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// parseArgs parses a call's arguments, which must be one JSON object, in a
// single pass. It returns the decoded document (numbers as json.Number, the
// form the schema validator reads) and the hex sha256 of its canonical
// form: object keys sorted, insignificant white space removed, numbers
// kept as written. Two argument documents that mean the same thing have
// the same digest; any change of value changes it.
//
// Arguments that two different documents could share a digest with are
// refused: invalid UTF-8 and unpaired UTF-16 surrogate escapes (decoding
// turns both into U+FFFD) and duplicate object keys (decoding keeps the
// last one). So are documents nested deeper than maxArgsDepth.
func parseArgs(args []byte) (doc map[string]any, digest string, err error) {
	if !utf8.Valid(args) {
		return nil, "", errors.New("arguments are not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, "", syntaxError(err)
	}
	if tok != json.Delim('{') {
		return nil, "", errors.New("arguments must be a JSON object")
	}
	v, err := decodeValue(dec, tok, 1)
	if err != nil {
		return nil, "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", errors.New("arguments hold more than one JSON value")
	}
	if err := pairedSurrogates(args); err != nil {
		return nil, "", err
	}
	doc = v.(map[string]any)
	// encoding/json sorts map keys and writes json.Number verbatim.
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, "", fmt.Errorf("canonicalize arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return doc, hex.EncodeToString(sum[:]), nil
}

// maxArgsDepth bounds the nesting of arguments, as encoding/json's Decode
// does (Token, which decodeValue reads with, does not): a deeper document
// would recurse through decodeValue and the canonical encoding without
// limit.
const maxArgsDepth = 10000

// decodeValue builds the value that starts with tok at nesting depth,
// refusing an object that names a key twice.
func decodeValue(dec *json.Decoder, tok json.Token, depth int) (any, error) {
	if tok == json.Delim('{') || tok == json.Delim('[') {
		if depth > maxArgsDepth {
			return nil, fmt.Errorf("arguments are nested deeper than %d levels", maxArgsDepth)
		}
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(err)
			}
			k, _ := kt.(string) // the decoder only yields string keys here
			if _, dup := obj[k]; dup {
				return nil, fmt.Errorf("arguments name the key %q twice", k)
			}
			vt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(err)
			}
			if obj[k], err = decodeValue(dec, vt, depth+1); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil { // '}'
			return nil, syntaxError(err)
		}
		return obj, nil
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			vt, err := dec.Token()
			if err != nil {
				return nil, syntaxError(err)
			}
			v, err := decodeValue(dec, vt, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, syntaxError(err)
		}
		return arr, nil
	default:
		return tok, nil // string, json.Number, bool or nil
	}
}

// pairedSurrogates refuses a \u escape of a UTF-16 surrogate that is not
// part of a high-low pair: encoding/json decodes it to U+FFFD, so
// "\ud800" would share a digest with "\ufffd". args is valid JSON.
func pairedSurrogates(args []byte) error {
	inString := false
	for i := 0; i < len(args); i++ {
		c := args[i]
		switch {
		case c == '"':
			inString = !inString
		case !inString || c != '\\':
		case i+1 < len(args) && args[i+1] != 'u':
			i++ // a one-character escape
		default:
			r := hex4(args, i+2)
			i += 5
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if i+6 < len(args) && args[i+1] == '\\' && args[i+2] == 'u' {
					if lo := hex4(args, i+3); lo >= 0xdc00 && lo < 0xe000 {
						i += 6
						continue
					}
				}
				return errors.New("arguments hold an unpaired UTF-16 surrogate escape")
			case r >= 0xdc00 && r < 0xe000:
				return errors.New("arguments hold an unpaired UTF-16 surrogate escape")
			}
		}
	}
	return nil
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

func syntaxError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("arguments are not valid JSON: %w", err)
}
