package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// UnmarshalStrict decodes exactly one JSON value into v, refusing unknown
// fields and trailing data. The host decodes descriptions with it;
// connectors decode their arguments with it through guest.DecodeArgs.
func UnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// dec.More would miss a stray ']' or '}': only io.EOF means nothing follows.
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after JSON value")
	}
	return nil
}
