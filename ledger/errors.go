package ledger

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers compare with errors.Is.
var (
	// ErrNotFound: no record with that id.
	ErrNotFound = errors.New("ledger: not found")
	// ErrExists: Create found a record with that id.
	ErrExists = errors.New("ledger: execution exists")
	// ErrConflict: the record is not in the state/attempt the transition
	// expected (someone else moved it first).
	ErrConflict = errors.New("ledger: state conflict")
	// ErrTerminal: the record is terminal and never changes.
	ErrTerminal = errors.New("ledger: record is terminal")
	// ErrIllegalTransition: the grammar does not allow the transition.
	ErrIllegalTransition = errors.New("ledger: illegal transition")
	// ErrAttemptsExhausted: a dispatch past the attempt cap.
	ErrAttemptsExhausted = errors.New("ledger: attempts exhausted")
	// ErrOutcomeRecorded: a second outcome for one attempt.
	ErrOutcomeRecorded = errors.New("ledger: outcome already recorded for this attempt")
	// ErrPruned: the record was pruned by retention; its id stays fenced.
	ErrPruned = errors.New("ledger: execution pruned")
	// ErrClosed: the ledger was closed.
	ErrClosed = errors.New("ledger: closed")
	// ErrCorrupt: a stored value does not decode, or (as a *DamageError
	// from Open) the ledger is missing, behind its mark, another ledger,
	// or its write-ahead log is damaged.
	ErrCorrupt = errors.New("ledger: corrupt record")
	// ErrProtocol: the data directory was written by an incompatible
	// protocol version.
	ErrProtocol = errors.New("ledger: incompatible protocol version")
)

// Errors added with the Pebble implementation. Callers compare with
// errors.Is.
var (
	// ErrInvalid: Create, BulkLoad or Open was given a value that can
	// never be stored (an empty id, MaxAttempts below 1, bad Options).
	ErrInvalid = errors.New("ledger: invalid argument")
	// ErrTooLarge: the encoded record exceeds Options.MaxRecordBytes.
	ErrTooLarge = errors.New("ledger: record too large")
	// ErrNoLedger: Open with CreateNever found neither a ledger nor its
	// mark.
	ErrNoLedger = errors.New("ledger: no ledger")
	// ErrDuplicate: Create found a recent execution of the same intent
	// for a guarded record (see Record.DuplicateWindow); it returns that
	// execution's record.
	ErrDuplicate = errors.New("ledger: duplicate of a recent execution")
)

// DamageKind says what Open found wrong with a ledger (see DamageError).
type DamageKind string

// What Open refuses. Every kind is a loss Open would otherwise hide: a
// ledger that opened as empty or short would unfence sessions and run
// again calls that already ran.
const (
	// DamageMissing: the mark exists, but the ledger directory is missing
	// or holds no ledger.
	DamageMissing DamageKind = "missing"
	// DamageBehind: the directory holds fewer writes than its mark
	// records: committed writes were lost (a truncated or deleted
	// write-ahead log, an older copy of the directory).
	DamageBehind DamageKind = "behind"
	// DamageIdentity: the directory holds another ledger than the one its
	// mark names.
	DamageIdentity DamageKind = "identity"
	// DamageLog: the write-ahead log is damaged before its end, so that
	// replaying it would silently stop at the damage.
	DamageLog DamageKind = "log"
	// DamageMark: the mark file is unreadable.
	DamageMark DamageKind = "mark"
	// DamageStore: the storage engine found its own files damaged.
	DamageStore DamageKind = "store"
)

// DamageError is Open's refusal of a ledger that is missing or damaged.
// It matches ErrCorrupt. When Open returns it, Open has written nothing to
// the directory or the mark.
type DamageError struct {
	// Kind says what is wrong.
	Kind DamageKind
	// Dir and Mark are the ledger directory and its mark file.
	Dir, Mark string
	// What says what is wrong and what is missing, for people.
	What string
	// Err is the underlying error, if there is one.
	Err error
}

func (e *DamageError) Error() string {
	return "ledger: " + e.What + "; " + e.Remedy("open it with init (Options.Create = CreateInit)")
}

// Remedy says what an operator can do about the damage. init says how the
// caller asks for a new ledger (a command-line flag, an option).
func (e *DamageError) Remedy(init string) string {
	fresh := init + " to start a new, empty ledger (the old data is set aside, not deleted)"
	switch e.Kind {
	case DamageMark:
		return fmt.Sprintf("restore %s from a backup, or remove it to accept %s as it is, or %s", e.Mark, e.Dir, fresh)
	case DamageIdentity:
		return fmt.Sprintf("put this ledger's own directory back at %s, or remove %s to accept the directory found there, or %s", e.Dir, e.Mark, fresh)
	default:
		return fmt.Sprintf("restore %s from a backup (and remove %s to accept the backup as it is), or %s", e.Dir, e.Mark, fresh)
	}
}

// Unwrap returns ErrCorrupt and the underlying error, if any.
func (e *DamageError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}
