package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Value encodings. A record is one version byte (RecordVersion) followed
// by the binary encoding of binary.go; an event likewise (EventVersion).
// A later release that changes either form bumps the version and keeps
// decoding the old ones. A pruned record is replaced by a tombstone: the
// byte tombstoneTag followed by the JSON of tombstone. Decoders never
// panic on arbitrary bytes (see the fuzz tests).

// EventVersion is the version byte of the event encoding written and read
// by this release.
const EventVersion = 2

// tombstoneTag marks a tombstone value under r/. It is outside the range
// of record versions for the life of this format.
const tombstoneTag byte = 0xff

// tombstone is what remains of a pruned record: enough to keep its id
// fenced and to explain why.
type tombstone struct {
	ID         string    `json:"id"`
	Namespace  string    `json:"namespace"`
	SessionID  string    `json:"session_id"`
	ToolCallID string    `json:"tool_call_id"`
	ArgsDigest string    `json:"args_digest"`
	State      State     `json:"state"`
	TerminalAt time.Time `json:"terminal_at"`
	PrunedAt   time.Time `json:"pruned_at"`
}

// record returns the partial record a tombstone still knows.
func (t tombstone) record() Record {
	return Pruned(t.ID, t.Namespace, t.SessionID, t.ToolCallID, t.ArgsDigest, t.State, t.TerminalAt)
}

func encodeRecord(r Record) ([]byte, error) {
	b, err := appendRecordV2(make([]byte, 1, 512), r)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode record %q: %w", r.ID, err)
	}
	b[0] = RecordVersion
	return b, nil
}

// decodeRecord decodes a record value. It returns ErrCorrupt (wrapping the
// reason) for anything that is not a record of a known version, and
// ErrPruned together with the tombstone's partial record for a tombstone.
func decodeRecord(b []byte) (Record, error) {
	if len(b) == 0 {
		return Record{}, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if b[0] == tombstoneTag {
		t, err := decodeTombstone(b)
		if err != nil {
			return Record{}, err
		}
		return t.record(), ErrPruned
	}
	if v := int(b[0]); v != RecordVersion {
		return Record{}, fmt.Errorf("%w: record version %d, this release reads %d", ErrCorrupt, v, RecordVersion)
	}
	r, err := decodeRecordV2(b[1:])
	if err != nil {
		return Record{}, fmt.Errorf("%w: record: %w", ErrCorrupt, err)
	}
	r.Version = RecordVersion
	if r.ID == "" {
		return Record{}, fmt.Errorf("%w: record without id", ErrCorrupt)
	}
	if !r.State.valid() {
		return Record{}, fmt.Errorf("%w: record %q: unknown state %q", ErrCorrupt, r.ID, r.State)
	}
	return r, nil
}

func encodeTombstone(t tombstone) ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode tombstone %q: %w", t.ID, err)
	}
	return append([]byte{tombstoneTag}, b...), nil
}

func decodeTombstone(b []byte) (tombstone, error) {
	if len(b) == 0 || b[0] != tombstoneTag {
		return tombstone{}, fmt.Errorf("%w: not a tombstone", ErrCorrupt)
	}
	var t tombstone
	if err := json.Unmarshal(b[1:], &t); err != nil {
		return tombstone{}, fmt.Errorf("%w: tombstone: %w", ErrCorrupt, err)
	}
	if t.ID == "" {
		return tombstone{}, fmt.Errorf("%w: tombstone without id", ErrCorrupt)
	}
	return t, nil
}

func encodeEvent(e Event) ([]byte, error) {
	b, err := appendEventV2(make([]byte, 1, 128), e)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode event %q/%d: %w", e.ExecutionID, e.Seq, err)
	}
	b[0] = EventVersion
	return b, nil
}

// decodeEvent decodes an event value; anything else is ErrCorrupt.
func decodeEvent(b []byte) (Event, error) {
	if len(b) == 0 {
		return Event{}, fmt.Errorf("%w: empty event", ErrCorrupt)
	}
	if v := int(b[0]); v != EventVersion {
		return Event{}, fmt.Errorf("%w: event version %d, this release reads %d", ErrCorrupt, v, EventVersion)
	}
	e, err := decodeEventV2(b[1:])
	if err != nil {
		return Event{}, fmt.Errorf("%w: event: %w", ErrCorrupt, err)
	}
	if e.Seq == 0 {
		return Event{}, fmt.Errorf("%w: event without seq", ErrCorrupt)
	}
	return e, nil
}

// MarshalBinary returns r in the ledger's value encoding (a version byte,
// then the record; see the top of codec.go), the form the Pebble ledger
// stores and another backend may store as an opaque value. r should be
// normalized (see Normalize), as Start and Step return it.
func (r Record) MarshalBinary() ([]byte, error) { return encodeRecord(r) }

// UnmarshalBinary decodes a value MarshalBinary wrote. Anything else is ErrCorrupt; a tombstone of a pruned
// record sets the partial record it keeps and returns ErrPruned.
func (r *Record) UnmarshalBinary(b []byte) error {
	rec, err := decodeRecord(b)
	if err != nil && !errors.Is(err, ErrPruned) {
		return err
	}
	*r = rec
	return err
}

// MarshalBinary returns e in the ledger's event encoding (a version byte,
// then the event).
func (e Event) MarshalBinary() ([]byte, error) { return encodeEvent(e) }

// UnmarshalBinary decodes a value Event.MarshalBinary wrote; anything
// else is ErrCorrupt.
func (e *Event) UnmarshalBinary(b []byte) error {
	ev, err := decodeEvent(b)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}
