package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The binary value encoding (record version 2, event version 2).
//
// After the version byte, a value is a sequence of fields in strictly
// increasing tag order. A field is its tag (uvarint) followed by its value:
//
//	string, bytes     uvarint length, then the bytes
//	int               zigzag varint
//	uint              uvarint
//	bool              nothing: the tag's presence means true
//	time              varint Unix seconds, uvarint nanoseconds (< 1e9), UTC
//	message           uvarint length, then the message's own fields
//
// A zero value (empty string or bytes, 0, false, the zero time, a nil
// message) is never written, and a decoder refuses one that is, as it
// refuses an unknown tag, a tag out of order, or trailing bytes: every
// value has exactly one encoding, which the fuzz tests check
// (encode(decode(b)) == b). A later release that adds a field adds a
// version. Tags never change meaning.
//
// It replaced JSON (version 1, still read) because encoding/json was the
// largest CPU cost of a ledger write, and field names made up a third of
// every record's bytes.

// Record field tags.
const (
	tagRecID = iota + 1
	tagRecNamespace
	tagRecSessionID
	tagRecToolCallID
	tagRecConnector
	tagRecOperation
	tagRecManifestDigest
	tagRecModuleDigest
	tagRecEffect
	tagRecPolicy
	tagRecPolicyVersion
	tagRecArgs
	tagRecArgsDigest
	tagRecIdempotencyKey
	tagRecResumed
	tagRecState
	tagRecAttempt
	tagRecMaxAttempts
	tagRecCreatedAt
	tagRecUpdatedAt
	tagRecDeadline
	tagRecNextAttemptAt
	tagRecApproval
	tagRecOutcome
	tagRecResolution
	tagRecCancelRequested
	tagRecEvents
	tagRecUncertain
	tagRecDuplicateWindow
	tagRecDuplicateOf
	tagRecRequestedBy
	tagRecIntentDigest
	tagRecTraceparent
	tagRecTracestate
)

// Approval field tags.
const (
	tagApID = iota + 1
	tagApArgsDigest
	tagApPolicyVersion
	tagApRequestedAt
	tagApExpiresAt
	tagApDecision
	tagApBy
	tagApReason
	tagApDecidedAt
	tagApConsumedBy
	tagApSignature
	tagApStateNonce
)

// Outcome field tags.
const (
	tagOutKind = iota + 1
	tagOutResult
	tagOutReceipt
	tagOutError
	tagOutSource
	tagOutAttempt
)

// Resolution field tags.
const (
	tagResApplied = iota + 1
	tagResRetry
	tagResBy
	tagResReason
	tagResAt
)

// Event field tags.
const (
	tagEvSeq = iota + 1
	tagEvTime
	tagEvExecutionID
	tagEvToolCallID
	tagEvAttempt
	tagEvFrom
	tagEvTo
	tagEvDecision
	tagEvEvidence
	tagEvActor
	tagEvReason
)

// Times outside years 1..9999 are refused, so that every decoded time
// converts back to the same seconds.
const (
	minUnixSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxUnixSeconds = 253402300799 // 9999-12-31T23:59:59Z
)

type encoder struct{ b []byte }

func (e *encoder) tag(t int) { e.b = binary.AppendUvarint(e.b, uint64(t)) }

func (e *encoder) str(t int, s string) {
	if s != "" {
		e.tag(t)
		e.b = binary.AppendUvarint(e.b, uint64(len(s)))
		e.b = append(e.b, s...)
	}
}

func (e *encoder) bytes(t int, p []byte) {
	if len(p) > 0 {
		e.tag(t)
		e.b = binary.AppendUvarint(e.b, uint64(len(p)))
		e.b = append(e.b, p...)
	}
}

func (e *encoder) int(t int, v int) {
	if v != 0 {
		e.tag(t)
		e.b = binary.AppendVarint(e.b, int64(v))
	}
}

func (e *encoder) int64(t int, v int64) {
	if v != 0 {
		e.tag(t)
		e.b = binary.AppendVarint(e.b, v)
	}
}

func (e *encoder) uint(t int, v uint64) {
	if v != 0 {
		e.tag(t)
		e.b = binary.AppendUvarint(e.b, v)
	}
}

func (e *encoder) bool(t int, v bool) {
	if v {
		e.tag(t)
	}
}

func (e *encoder) time(t int, v time.Time) error {
	if v.IsZero() {
		return nil
	}
	s := v.Unix()
	if s < minUnixSeconds || s > maxUnixSeconds {
		return fmt.Errorf("time %s is outside years 1..9999", v)
	}
	e.tag(t)
	e.b = binary.AppendVarint(e.b, s)
	e.b = binary.AppendUvarint(e.b, uint64(v.Nanosecond()))
	return nil
}

// message writes a nested message whose fields fn encodes.
func (e *encoder) message(t int, fn func(*encoder) error) error {
	var sub encoder
	if err := fn(&sub); err != nil {
		return err
	}
	e.tag(t)
	e.b = binary.AppendUvarint(e.b, uint64(len(sub.b)))
	e.b = append(e.b, sub.b...)
	return nil
}

func appendRecordV2(dst []byte, r Record) ([]byte, error) {
	e := encoder{b: dst}
	e.str(tagRecID, r.ID)
	e.str(tagRecNamespace, r.Namespace)
	e.str(tagRecSessionID, r.SessionID)
	e.str(tagRecToolCallID, r.ToolCallID)
	e.str(tagRecConnector, r.Connector)
	e.str(tagRecOperation, r.Operation)
	e.str(tagRecManifestDigest, r.ManifestDigest)
	e.str(tagRecModuleDigest, r.ModuleDigest)
	e.str(tagRecEffect, r.Effect)
	e.str(tagRecPolicy, r.Policy)
	e.str(tagRecPolicyVersion, r.PolicyVersion)
	e.bytes(tagRecArgs, r.Args)
	e.str(tagRecArgsDigest, r.ArgsDigest)
	e.str(tagRecIdempotencyKey, r.IdempotencyKey)
	e.bool(tagRecResumed, r.Resumed)
	e.str(tagRecState, string(r.State))
	e.int(tagRecAttempt, r.Attempt)
	e.int(tagRecMaxAttempts, r.MaxAttempts)
	err := errors.Join(
		e.time(tagRecCreatedAt, r.CreatedAt),
		e.time(tagRecUpdatedAt, r.UpdatedAt),
		e.time(tagRecDeadline, r.Deadline),
		e.time(tagRecNextAttemptAt, r.NextAttemptAt),
	)
	if err != nil {
		return nil, err
	}
	if a := r.Approval; a != nil {
		err = e.message(tagRecApproval, func(e *encoder) error {
			e.str(tagApID, a.ID)
			e.str(tagApArgsDigest, a.ArgsDigest)
			e.str(tagApPolicyVersion, a.PolicyVersion)
			err := errors.Join(e.time(tagApRequestedAt, a.RequestedAt), e.time(tagApExpiresAt, a.ExpiresAt))
			e.str(tagApDecision, string(a.Decision))
			e.str(tagApBy, a.By)
			e.str(tagApReason, a.Reason)
			err = errors.Join(err, e.time(tagApDecidedAt, a.DecidedAt))
			e.int(tagApConsumedBy, a.ConsumedBy)
			e.str(tagApSignature, a.Signature)
			e.str(tagApStateNonce, a.StateNonce)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if o := r.Outcome; o != nil {
		_ = e.message(tagRecOutcome, func(e *encoder) error {
			e.str(tagOutKind, o.Kind)
			e.bytes(tagOutResult, o.Result)
			e.str(tagOutReceipt, o.Receipt)
			e.str(tagOutError, o.Error)
			e.str(tagOutSource, o.Source)
			e.int(tagOutAttempt, o.Attempt)
			return nil
		})
	}
	if res := r.Resolution; res != nil {
		err = e.message(tagRecResolution, func(e *encoder) error {
			e.bool(tagResApplied, res.Applied)
			e.bool(tagResRetry, res.Retry)
			e.str(tagResBy, res.By)
			e.str(tagResReason, res.Reason)
			return e.time(tagResAt, res.At)
		})
		if err != nil {
			return nil, err
		}
	}
	e.bool(tagRecCancelRequested, r.CancelRequested)
	e.uint(tagRecEvents, r.Events)
	e.bool(tagRecUncertain, r.Uncertain)
	e.int64(tagRecDuplicateWindow, int64(r.DuplicateWindow))
	e.str(tagRecDuplicateOf, r.DuplicateOf)
	e.str(tagRecRequestedBy, r.RequestedBy)
	e.str(tagRecIntentDigest, r.IntentDigest)
	e.str(tagRecTraceparent, r.Traceparent)
	e.str(tagRecTracestate, r.Tracestate)
	return e.b, nil
}

func appendEventV2(dst []byte, ev Event) ([]byte, error) {
	e := encoder{b: dst}
	e.uint(tagEvSeq, ev.Seq)
	if err := e.time(tagEvTime, ev.Time); err != nil {
		return nil, err
	}
	e.str(tagEvExecutionID, ev.ExecutionID)
	e.str(tagEvToolCallID, ev.ToolCallID)
	e.int(tagEvAttempt, ev.Attempt)
	e.str(tagEvFrom, string(ev.From))
	e.str(tagEvTo, string(ev.To))
	e.str(tagEvDecision, ev.Decision)
	e.str(tagEvEvidence, ev.Evidence)
	e.str(tagEvActor, ev.Actor)
	e.str(tagEvReason, ev.Reason)
	return e.b, nil
}

// decoder reads the fields of one message. Its methods record the first
// error and then return zero values, so a field list is read without an
// error check per field.
type decoder struct {
	b    []byte
	last uint64 // the previous tag
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

// next returns the next field's tag, or 0 at the end of the message (or
// after an error).
func (d *decoder) next() uint64 {
	if d.err != nil || len(d.b) == 0 {
		return 0
	}
	t, n := binary.Uvarint(d.b)
	if n <= 0 || t == 0 || n != uvarintLen(t) {
		d.fail("bad field tag")
		return 0
	}
	if t <= d.last {
		d.fail("field %d after field %d", t, d.last)
		return 0
	}
	d.b, d.last = d.b[n:], t
	return t
}

func (d *decoder) raw() []byte {
	l, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(l) || l == 0 || l > uint64(len(d.b)-n) {
		d.fail("field %d: bad length", d.last)
		return nil
	}
	v := d.b[n : n+int(l)]
	d.b = d.b[n+int(l):]
	return v
}

// str reads a string. Its bytes are taken as they are, valid UTF-8 or
// not: whatever a write was given reads back unchanged.
func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) bytes() []byte {
	v := d.raw()
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 || n != uvarintLen(uint64(v<<1)^uint64(v>>63)) {
		d.fail("field %d: bad varint", d.last)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.fail("field %d: bad uvarint", d.last)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if d.err == nil && (v == 0 || v != int64(int(v))) {
		d.fail("field %d: integer %d not allowed", d.last, v)
		return 0
	}
	return int(v)
}

func (d *decoder) int64() int64 {
	v := d.varint()
	if d.err == nil && v == 0 {
		d.fail("field %d: zero written", d.last)
	}
	return v
}

func (d *decoder) uint() uint64 {
	v := d.uvarint()
	if d.err == nil && v == 0 {
		d.fail("field %d: zero written", d.last)
	}
	return v
}

func (d *decoder) time() time.Time {
	s := d.varint()
	ns := d.uvarint()
	if d.err != nil {
		return time.Time{}
	}
	if s < minUnixSeconds || s > maxUnixSeconds || ns >= 1e9 {
		d.fail("field %d: time %d.%09d out of range", d.last, s, ns)
		return time.Time{}
	}
	t := time.Unix(s, int64(ns)).UTC()
	if t.IsZero() {
		d.fail("field %d: zero time written", d.last)
	}
	return t
}

// message returns a decoder for a nested message (which may be empty).
func (d *decoder) message() *decoder {
	l, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(l) || l > uint64(len(d.b)-n) {
		d.fail("field %d: bad length", d.last)
		return &decoder{err: d.err}
	}
	sub := &decoder{b: d.b[n : n+int(l)]}
	d.b = d.b[n+int(l):]
	return sub
}

// uvarintLen is the length of v's shortest uvarint encoding: a decoder
// refuses longer ones (binary.Uvarint accepts them), so each value has one
// encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func (d *decoder) unknown(t uint64) { d.fail("unknown field %d", t) }

// adopt takes a nested decoder's error.
func (d *decoder) adopt(sub *decoder) {
	if sub.err != nil && d.err == nil {
		d.err = fmt.Errorf("field %d: %w", d.last, sub.err)
	}
}

func decodeRecordV2(b []byte) (Record, error) {
	var r Record
	d := &decoder{b: b}
	for t := d.next(); t != 0; t = d.next() {
		switch t {
		case tagRecID:
			r.ID = d.str()
		case tagRecNamespace:
			r.Namespace = d.str()
		case tagRecSessionID:
			r.SessionID = d.str()
		case tagRecToolCallID:
			r.ToolCallID = d.str()
		case tagRecConnector:
			r.Connector = d.str()
		case tagRecOperation:
			r.Operation = d.str()
		case tagRecManifestDigest:
			r.ManifestDigest = d.str()
		case tagRecModuleDigest:
			r.ModuleDigest = d.str()
		case tagRecEffect:
			r.Effect = d.str()
		case tagRecPolicy:
			r.Policy = d.str()
		case tagRecPolicyVersion:
			r.PolicyVersion = d.str()
		case tagRecArgs:
			r.Args = d.bytes()
		case tagRecArgsDigest:
			r.ArgsDigest = d.str()
		case tagRecIdempotencyKey:
			r.IdempotencyKey = d.str()
		case tagRecResumed:
			r.Resumed = true
		case tagRecState:
			r.State = State(d.str())
		case tagRecAttempt:
			r.Attempt = d.int()
		case tagRecMaxAttempts:
			r.MaxAttempts = d.int()
		case tagRecCreatedAt:
			r.CreatedAt = d.time()
		case tagRecUpdatedAt:
			r.UpdatedAt = d.time()
		case tagRecDeadline:
			r.Deadline = d.time()
		case tagRecNextAttemptAt:
			r.NextAttemptAt = d.time()
		case tagRecApproval:
			r.Approval = decodeApproval(d)
		case tagRecOutcome:
			r.Outcome = decodeOutcome(d)
		case tagRecResolution:
			r.Resolution = decodeResolution(d)
		case tagRecCancelRequested:
			r.CancelRequested = true
		case tagRecEvents:
			r.Events = d.uint()
		case tagRecUncertain:
			r.Uncertain = true
		case tagRecDuplicateWindow:
			r.DuplicateWindow = time.Duration(d.int64())
		case tagRecDuplicateOf:
			r.DuplicateOf = d.str()
		case tagRecRequestedBy:
			r.RequestedBy = d.str()
		case tagRecIntentDigest:
			r.IntentDigest = d.str()
		case tagRecTraceparent:
			r.Traceparent = d.str()
		case tagRecTracestate:
			r.Tracestate = d.str()
		default:
			d.unknown(t)
		}
	}
	return r, d.err
}

func decodeApproval(d *decoder) *Approval {
	a, s := &Approval{}, d.message()
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case tagApID:
			a.ID = s.str()
		case tagApArgsDigest:
			a.ArgsDigest = s.str()
		case tagApPolicyVersion:
			a.PolicyVersion = s.str()
		case tagApRequestedAt:
			a.RequestedAt = s.time()
		case tagApExpiresAt:
			a.ExpiresAt = s.time()
		case tagApDecision:
			a.Decision = ApprovalDecision(s.str())
		case tagApBy:
			a.By = s.str()
		case tagApReason:
			a.Reason = s.str()
		case tagApDecidedAt:
			a.DecidedAt = s.time()
		case tagApConsumedBy:
			a.ConsumedBy = s.int()
		case tagApSignature:
			a.Signature = s.str()
		case tagApStateNonce:
			a.StateNonce = s.str()
		default:
			s.unknown(t)
		}
	}
	d.adopt(s)
	return a
}

func decodeOutcome(d *decoder) *Outcome {
	o, s := &Outcome{}, d.message()
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case tagOutKind:
			o.Kind = s.str()
		case tagOutResult:
			o.Result = s.bytes()
		case tagOutReceipt:
			o.Receipt = s.str()
		case tagOutError:
			o.Error = s.str()
		case tagOutSource:
			o.Source = s.str()
		case tagOutAttempt:
			o.Attempt = s.int()
		default:
			s.unknown(t)
		}
	}
	d.adopt(s)
	return o
}

func decodeResolution(d *decoder) *Resolution {
	r, s := &Resolution{}, d.message()
	for t := s.next(); t != 0; t = s.next() {
		switch t {
		case tagResApplied:
			r.Applied = true
		case tagResRetry:
			r.Retry = true
		case tagResBy:
			r.By = s.str()
		case tagResReason:
			r.Reason = s.str()
		case tagResAt:
			r.At = s.time()
		default:
			s.unknown(t)
		}
	}
	d.adopt(s)
	return r
}

func decodeEventV2(b []byte) (Event, error) {
	var ev Event
	d := &decoder{b: b}
	for t := d.next(); t != 0; t = d.next() {
		switch t {
		case tagEvSeq:
			ev.Seq = d.uint()
		case tagEvTime:
			ev.Time = d.time()
		case tagEvExecutionID:
			ev.ExecutionID = d.str()
		case tagEvToolCallID:
			ev.ToolCallID = d.str()
		case tagEvAttempt:
			ev.Attempt = d.int()
		case tagEvFrom:
			ev.From = State(d.str())
		case tagEvTo:
			ev.To = State(d.str())
		case tagEvDecision:
			ev.Decision = d.str()
		case tagEvEvidence:
			ev.Evidence = d.str()
		case tagEvActor:
			ev.Actor = d.str()
		case tagEvReason:
			ev.Reason = d.str()
		default:
			d.unknown(t)
		}
	}
	return ev, d.err
}
