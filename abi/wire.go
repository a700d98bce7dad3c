package abi

import (
	"encoding/binary"
	"errors"
)

// See RATIONALE.md, "Why binary envelopes, not JSON, across the boundary?".
//
// Wire format shared by every binary envelope: a one-byte tag naming the
// envelope and its version, then fields in a fixed order. A byte string is a
// little-endian uint32 length followed by that many bytes; small integers are
// fixed-width little-endian. A decoder reads every field, refuses lengths
// that overrun the input and refuses trailing bytes, so a truncated or padded
// envelope is an error, never a partial value.

// Sentinel errors returned by the decoders in this package.
var (
	// ErrTruncated reports an envelope shorter than its fields claim.
	ErrTruncated = errors.New("abi: truncated envelope")
	// ErrTrailing reports bytes after the last field.
	ErrTrailing = errors.New("abi: trailing bytes after envelope")
	// ErrBadTag reports an envelope whose first byte is not the expected tag.
	ErrBadTag = errors.New("abi: unexpected envelope tag")
	// ErrBadKind reports an outcome kind outside the known set.
	ErrBadKind = errors.New("abi: unknown outcome kind")
	// ErrTooLarge reports a field or count larger than the envelope limits.
	ErrTooLarge = errors.New("abi: envelope field too large")
)

// maxHeaders bounds the number of header fields an HTTP envelope may carry.
const maxHeaders = 256

type writer struct{ b []byte }

func (w *writer) u8(v uint8)   { w.b = append(w.b, v) }
func (w *writer) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *writer) bytes(p []byte) {
	w.u32(uint32(len(p)))
	w.b = append(w.b, p...)
}
func (w *writer) str(s string) {
	w.u32(uint32(len(s)))
	w.b = append(w.b, s...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) u8() uint8 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 1 {
		r.err = ErrTruncated
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 4 {
		r.err = ErrTruncated
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

// bytes returns a sub-slice of the input (no copy).
func (r *reader) bytes() []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.err = ErrTruncated
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	if len(r.b) != 0 {
		return ErrTrailing
	}
	return nil
}
