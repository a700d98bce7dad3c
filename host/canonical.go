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

// canonicalArgs parses a call's arguments, which must be one JSON object,
// and returns the hex sha256 of their canonical form: object keys sorted,
// insignificant white space removed, numbers kept as written. Two argument
// documents that mean the same thing have the same digest; any change of
// value changes it.
//
// Arguments that two different documents could share a digest with are
// refused: invalid UTF-8 (decoding would turn every invalid byte into
// U+FFFD) and duplicate object keys (decoding keeps the last one).
func canonicalArgs(args []byte) (digest string, err error) {
	if !utf8.Valid(args) {
		return "", errors.New("arguments are not valid UTF-8")
	}
	if err := noDuplicateKeys(args); err != nil {
		return "", err
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("arguments are not valid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", errors.New("arguments hold more than one JSON value")
	}
	if _, ok := v.(map[string]any); !ok {
		return "", errors.New("arguments must be a JSON object")
	}
	// encoding/json sorts map keys and writes json.Number verbatim.
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("canonicalize arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// noDuplicateKeys walks args token by token and refuses an object that
// names a key twice. It reports syntax errors as the decoder would.
func noDuplicateKeys(args []byte) error {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	type frame struct {
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("arguments are not valid JSON: %w", err)
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil && top.keys != nil {
					top.wantKey = true // this value completes a member
				}
				f := &frame{}
				if t == '{' {
					f.keys, f.wantKey = map[string]bool{}, true
				}
				stack = append(stack, f)
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && top.keys != nil && top.wantKey {
				if top.keys[t] {
					return fmt.Errorf("arguments name the key %q twice", t)
				}
				top.keys[t] = true
				top.wantKey = false
				continue
			}
			if top != nil && top.keys != nil {
				top.wantKey = true
			}
		default:
			if top != nil && top.keys != nil {
				top.wantKey = true
			}
		}
	}
}
