package ledger

import (
	"bytes"
	"encoding/binary"
	"time"
)

// Key layout. Every key starts with a one-letter keyspace and a slash, so
// each keyspace is one contiguous range that an iterator bounds exactly:
//
//	m/protocol                          protocol marker: the ProtocolVersion that wrote the directory
//	m/identity                          the ledger's random identity (32 hex digits), also in its mark file
//	m/hwm                               high-water mark: a count of committed writes (u64 BE), see mark.go
//	m/generation                        the number of restores an operator accepted (u64 BE; absent: 0), see restore.go
//	m/restore/<generation u64 BE>       the accepted restore that started that generation (JSON)
//	r/<id>                              the record (version byte + value, see codec.go), or a tombstone once pruned
//	e/<id*>/<seq u64 BE>                audit event <seq> of execution <id> (version byte + value)
//	p/<id>                              pending index: present iff the record is not terminal; its value is the record itself
//	f/<ns*><session*><id*>              fence index: present iff the record is recovery_required
//	s/<ns*><session*>                   session marker: some execution of the session was created here
//	t/<unix nanos u64 BE, sign-flipped>/<id>
//	                                    retention index: when a record became terminal
//	c/<unix nanos u64 BE, sign-flipped>/<id>
//	                                    creation index: when a record was created (every record
//	                                    that is not pruned), for List by OrderNewest
//	d/<unix nanos u64 BE, sign-flipped>/<id>
//	                                    due index: when a recovery pass must look at a record next
//	                                    (see DueAt)
//	a/<ns*><id*>                        approval index: present iff the record is awaiting_approval,
//	                                    counted per namespace in memory
//	i/<intent key, 32 bytes><unix nanos u64 BE, sign-flipped>/<id>
//	                                    duplicate-intent index: a guarded record (DuplicateWindow > 0)
//	                                    by its IntentKey and creation time, until pruned
//	u/<sha256, 32 bytes>                console session (see console.go), by ConsoleSessionKey,
//	                                    until pruned
//
// <id> is a raw execution id where it is the whole rest of the key (r/, p/,
// t/, c/, d/, i/), so r/ iterates in execution-id order for List. A part marked * is
// escaped and terminated (0x00 → 0x00 0xff, then 0x00 0x01), so a separator
// inside an id can never make two different tuples share a key or make one
// prefix cover another tuple: ("a\x00b","c") and ("a","b\x00c") differ, and
// escaping preserves byte order. Big-endian integers sort numerically.
//
// Values of the index keys are empty: the record under r/ is the single
// source of truth, the indexes only say where to look.
const (
	prefixRecord  = "r/"
	prefixEvent   = "e/"
	prefixPending = "p/"
	prefixFence   = "f/"
	prefixSession = "s/"
	prefixTerm    = "t/"
	prefixCreated = "c/"
	prefixDue     = "d/"
	prefixAwait   = "a/"
	prefixIntent  = "i/"
)

var (
	protocolKey   = []byte("m/protocol")
	identityKey   = []byte("m/identity")
	hwmKey        = []byte("m/hwm")
	generationKey = []byte("m/generation")
)

func restoreKey(generation uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("m/restore/"), generation)
}

// appendEscaped appends s escaped and terminated (see the key layout).
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xff)
			continue
		}
		dst = append(dst, s[i])
	}
	return append(dst, 0, 1)
}

func recordKey(id string) []byte  { return append([]byte(prefixRecord), id...) }
func pendingKey(id string) []byte { return append([]byte(prefixPending), id...) }

func eventPrefix(id string) []byte {
	return append(appendEscaped([]byte(prefixEvent), id), '/')
}

func eventKey(id string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(eventPrefix(id), seq)
}

func sessionKey(ns, session string) []byte {
	return appendEscaped(appendEscaped([]byte(prefixSession), ns), session)
}

func fencePrefix(ns, session string) []byte {
	return appendEscaped(appendEscaped([]byte(prefixFence), ns), session)
}

func fenceKey(ns, session, id string) []byte {
	return appendEscaped(fencePrefix(ns, session), id)
}

// fenceSessionPrefix returns the part of a fence key that names its
// session: the fencePrefix of (namespace, session).
func fenceSessionPrefix(k []byte) ([]byte, bool) {
	if !bytes.HasPrefix(k, []byte(prefixFence)) {
		return nil, false
	}
	i, parts := len(prefixFence), 0
	for i+1 < len(k) && parts < 2 {
		switch {
		case k[i] != 0:
			i++
		case k[i+1] == 0xff:
			i += 2
		case k[i+1] == 1:
			i += 2
			parts++
		default:
			return nil, false
		}
	}
	if parts != 2 {
		return nil, false
	}
	return k[:i], true
}

// termNanos maps a time to an unsigned integer that sorts like the time
// (the sign bit is flipped so times before 1970 sort first).
func termNanos(t time.Time) uint64 { return uint64(t.UnixNano()) ^ (1 << 63) }

func termPrefixUntil(t time.Time) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixTerm), termNanos(t))
}

func termKey(t time.Time, id string) []byte {
	k := termPrefixUntil(t)
	k = append(k, '/')
	return append(k, id...)
}

// idFromTermKey returns the id of a t/ key.
func idFromTermKey(k []byte) (string, bool) { return idFromTimeKey(prefixTerm, k) }

// createdKey is the creation index's key of a record created at t.
func createdKey(t time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64([]byte(prefixCreated), termNanos(t))
	k = append(k, '/')
	return append(k, id...)
}

// dueKey is the due index's key of a record due at t (see DueAt).
func dueKey(t time.Time, id string) []byte {
	k := binary.BigEndian.AppendUint64([]byte(prefixDue), uint64(DueUnixNano(t))^(1<<63))
	k = append(k, '/')
	return append(k, id...)
}

// dueUpper is the upper bound of the due keys at or before until (Unix
// nanoseconds, see DueUnixNano).
func dueUpper(until int64) []byte {
	return prefixEnd(binary.BigEndian.AppendUint64([]byte(prefixDue), uint64(until)^(1<<63)))
}

func awaitPrefix(ns string) []byte { return appendEscaped([]byte(prefixAwait), ns) }

func awaitKey(ns, id string) []byte { return appendEscaped(awaitPrefix(ns), id) }

// awaitNamespace returns the namespace of an a/ key.
func awaitNamespace(k []byte) (string, bool) {
	if !bytes.HasPrefix(k, []byte(prefixAwait)) {
		return "", false
	}
	rest := k[len(prefixAwait):]
	for i := 0; i+1 < len(rest); i++ {
		if rest[i] != 0 {
			continue
		}
		switch rest[i+1] {
		case 0xff:
			i++
		case 1:
			ns, ok := unescape(rest[:i+2])
			return ns, ok && len(rest) > i+2
		default:
			return "", false
		}
	}
	return "", false
}

// intentPrefix is the part of a i/ key that names an intent.
func intentPrefix(key [32]byte) []byte {
	return append([]byte(prefixIntent), key[:]...)
}

// intentKey is the duplicate-intent index's key of a guarded record.
func intentKey(rec Record) []byte {
	k := binary.BigEndian.AppendUint64(intentPrefix(IntentKey(rec)), termNanos(rec.CreatedAt))
	k = append(k, '/')
	return append(k, rec.ID...)
}

// intentKeyAfter is the smallest i/ key of intent key created at or after t.
func intentKeyAfter(key [32]byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(intentPrefix(key), termNanos(t))
}

// idFromIntentKey returns the id of a i/ key.
func idFromIntentKey(k []byte) (string, bool) {
	n := len(prefixIntent) + 32 + 8 + 1
	if len(k) < n || !bytes.HasPrefix(k, []byte(prefixIntent)) || k[n-1] != '/' {
		return "", false
	}
	return string(k[n:]), true
}

// idFromCreatedKey returns the id of a c/ key.
func idFromCreatedKey(k []byte) (string, bool) { return idFromTimeKey(prefixCreated, k) }

// idFromTimeKey returns the id of a <prefix><u64>/<id> key.
func idFromTimeKey(prefix string, k []byte) (string, bool) {
	n := len(prefix) + 8 + 1
	if len(k) < n || !bytes.HasPrefix(k, []byte(prefix)) || k[n-1] != '/' {
		return "", false
	}
	return string(k[n:]), true
}

// prefixEnd returns the smallest key greater than every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil // p is all 0xff: no upper bound
}
