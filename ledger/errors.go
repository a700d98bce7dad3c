package ledger

import "errors"

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
	// ErrCorrupt: a stored value does not decode.
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
)
