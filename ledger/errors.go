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
	// ErrFenced: a create that refuses fenced sessions (Fleet.
	// CreateOwnedUnfenced) found a recovery_required execution in the
	// record's session, and no record with its id: nothing was written.
	ErrFenced = errors.New("ledger: session fenced")
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
	// from Open) the ledger is missing, behind its mark or its witness,
	// another ledger, or its write-ahead log is damaged.
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
	// ErrStateUsed: a decision names the request-state nonce that the
	// record's approval already holds: the state was consumed by the
	// decision that recorded it (Approval.StateNonce), and a replay of it
	// decides nothing.
	ErrStateUsed = errors.New("ledger: request state already used")
)

// DamageKind says what Open found wrong with a ledger (see DamageError).
type DamageKind string

// What Open refuses. Every kind is a loss Open would otherwise hide: a
// ledger that opened as empty or short would unfence sessions and run
// again calls that already ran.
const (
	// DamageMissing: the mark or the witness names a ledger, but the
	// ledger directory is missing or holds no ledger (or, on PostgreSQL,
	// the database holds no ledger, or lacks some of its tables).
	DamageMissing DamageKind = "missing"
	// DamageBehind: the ledger holds less than its mark or its witness
	// records: committed writes were lost (a truncated or deleted
	// write-ahead log, an older copy of the directory or of the database
	// restored, tables emptied).
	DamageBehind DamageKind = "behind"
	// DamageIdentity: the ledger is another ledger than the one its mark
	// or its witness names.
	DamageIdentity DamageKind = "identity"
	// DamageLog: the write-ahead log is damaged before its end, so that
	// replaying it would silently stop at the damage.
	DamageLog DamageKind = "log"
	// DamageMark: the mark file is unreadable.
	DamageMark DamageKind = "mark"
	// DamageWitness: the witness file is unreadable.
	DamageWitness DamageKind = "witness"
	// DamageStore: the storage engine found its own files damaged.
	DamageStore DamageKind = "store"
)

// DamageError is Open's refusal of a ledger that is missing, damaged, or
// other or older than what the deployment acknowledged. It matches
// ErrCorrupt. When Open returns it, Open has written nothing to the
// ledger, its mark or its witness.
type DamageError struct {
	// Kind says what is wrong.
	Kind DamageKind
	// Dir and Mark are the ledger directory and its mark file (on
	// PostgreSQL: Dir names the database, Mark is empty).
	Dir, Mark string
	// Witness is the witness file, if the ledger has one.
	Witness string
	// What says what is wrong and what is missing, for people.
	What string
	// Err is the underlying error, if there is one.
	Err error
}

func (e *DamageError) Error() string {
	return "ledger: " + e.What + "; " + e.Remedy("open it with init (Options.Create = CreateInit)", "accept it with AcceptRestore")
}

// Remedy says what an operator can do about the damage. init says how the
// caller asks for a new ledger (a command-line flag, an option), accept
// how it accepts a restore from a backup (AcceptRestore, a command). No
// remedy uses the restored ledger as it is: accepting a restore fences
// what the backup does not know.
func (e *DamageError) Remedy(init, accept string) string {
	fresh := init + " to start a new, empty ledger (the old data is set aside, not deleted)"
	switch e.Kind {
	case DamageMark:
		if e.Witness != "" {
			return fmt.Sprintf("restore %s from a backup, or remove it (the ledger is then still checked against its witness %s), or %s", e.Mark, e.Witness, fresh)
		}
		return fmt.Sprintf("restore %s from a backup, or remove it to accept %s as it is, or %s", e.Mark, e.Dir, fresh)
	case DamageWitness:
		return fmt.Sprintf("restore %s from a copy, or remove it (the ledger is then trusted as it is, and that is logged), or %s", e.Witness, fresh)
	case DamageIdentity:
		return fmt.Sprintf("put this ledger's own data back in %s (or point at this ledger's own witness), or %s", e.Dir, fresh)
	case DamageBehind:
		return fmt.Sprintf("put the newest copy of %s back; or, if it was restored from a backup on purpose, %s, which fences every call the backup holds unfinished and every session written after it until an operator resolves them; or %s", e.Dir, accept, fresh)
	default:
		return fmt.Sprintf("restore %s from a backup and %s, which fences what the backup does not know; or %s", e.Dir, accept, fresh)
	}
}

// Unwrap returns ErrCorrupt and the underlying error, if any.
func (e *DamageError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.Err}
}

// CorruptRecordsError is Pending's report of the records it could not
// decode (a row edited or copied in a shared ledger's database): every
// other record was handed to the caller's function, and these were
// skipped, so that one bad record keeps no other execution from being
// recovered. It matches ErrCorrupt.
type CorruptRecordsError struct {
	// IDs are the executions whose records do not decode, and Errs why,
	// in the same order.
	IDs  []string
	Errs []error
}

func (e *CorruptRecordsError) Error() string {
	return fmt.Sprintf("ledger: %d record(s) do not decode, skipped: %v", len(e.IDs), errors.Join(e.Errs...))
}

// Unwrap returns ErrCorrupt.
func (e *CorruptRecordsError) Unwrap() error { return ErrCorrupt }
