package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// canonicalArgs parses a call's arguments, which must be one JSON object,
// and returns the hex sha256 of their canonical form: object keys sorted,
// insignificant white space removed, numbers kept as written. Two argument
// documents that mean the same thing have the same digest; any change of
// value changes it.
func canonicalArgs(args []byte) (digest string, err error) {
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
