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
// refused: invalid UTF-8 (decoding would turn every invalid byte into
// U+FFFD) and duplicate object keys (decoding keeps the last one).
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
	v, err := decodeValue(dec, tok)
	if err != nil {
		return nil, "", err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "", errors.New("arguments hold more than one JSON value")
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

// canonicalArgs returns the digest parseArgs computes.
func canonicalArgs(args []byte) (string, error) {
	_, d, err := parseArgs(args)
	return d, err
}

// decodeValue builds the value that starts with tok, refusing an object
// that names a key twice. The decoder bounds the nesting depth.
func decodeValue(dec *json.Decoder, tok json.Token) (any, error) {
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
			if obj[k], err = decodeValue(dec, vt); err != nil {
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
			v, err := decodeValue(dec, vt)
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

func syntaxError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("arguments are not valid JSON: %w", err)
}
