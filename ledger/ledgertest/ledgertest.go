// Package ledgertest is the conformance suite every ledger.Ledger backend
// must pass: the transition grammar's scenarios (testdata/grammar, shared by
// all backends, so their expected output is one), identical concurrent calls
// that must yield exactly one write, crashes between steps, and the
// behaviours a caller relies on (ErrExists with the existing record,
// tombstones, session classification, fences, List order and filters, the
// due index, the count of approval requests, the duplicate-intent guard,
// console sessions).
//
// A backend's test calls Run with a Backend that opens its ledgers on fresh
// storage. Everything is observed through the ledger.Ledger interface only;
// a backend adds checks of its own storage through Backend.Check.
package ledgertest

import (
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/ledger"
)

// Store is the storage of one test: every ledger Open returns reads and
// writes the same data.
type Store interface {
	// Open opens a ledger on the store with the clock now. The test closes
	// it (or passes it to Crash).
	Open(t testing.TB, now func() time.Time) ledger.Ledger
	// Crash ends l as a crash of its process would: l is abandoned, not
	// closed, and what l acknowledged must be all that survives of its
	// writes. Afterwards Open opens the store again.
	Crash(t testing.TB, l ledger.Ledger)
}

// Backend is a ledger implementation under test.
type Backend struct {
	// New returns new, empty storage for one test. Tests may run in
	// parallel only if New allows it; Run does not call t.Parallel.
	New func(t testing.TB) Store
	// Check, if set, runs after every step of the scenarios and of the
	// random test, with checks of the backend's own storage (raw indexes,
	// caches) that the interface cannot see.
	Check func(t testing.TB, l ledger.Ledger)
}

// Run runs the whole suite against b.
func Run(t *testing.T, b Backend) {
	t.Run("Grammar", func(t *testing.T) { Grammar(t, b) })
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"ConcurrentCreateSameID", ConcurrentCreateSameID},
		{"ConcurrentDispatchOnce", ConcurrentDispatchOnce},
		{"ConcurrentOutcomeOnce", ConcurrentOutcomeOnce},
		{"ParallelExecutions", ParallelExecutions},
		{"ConcurrentFirstRecordsOfASession", ConcurrentFirstRecordsOfASession},
		{"CrashBetweenSteps", CrashBetweenSteps},
		{"RandomTransitions", RandomTransitions},
		{"OddKeys", OddKeys},
		{"ListPagesInIDOrder", ListPagesInIDOrder},
		{"ListNewest", ListNewest},
		{"DueAndAwaiting", DueAndAwaiting},
		{"ListDue", ListDue},
		{"WriteReturnsWhatGetReads", WriteReturnsWhatGetReads},
		{"ReturnedRecordIsACopy", ReturnedRecordIsACopy},
		{"PendingStopsAtError", PendingStopsAtError},
		{"FailurePaths", FailurePaths},
		{"DuplicateIntent", DuplicateIntent},
		{"DuplicateRefusals", DuplicateRefusals},
		{"ConcurrentDuplicates", ConcurrentDuplicates},
		{"ConsoleSessions", ConsoleSessions},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// Clock is a deterministic clock for a ledger under test.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at 2026-01-01T00:00:00Z.
func NewClock() *Clock { return &Clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// open opens a ledger on a new store of b and closes it at the end of the
// test.
func open(t *testing.T, b Backend, now func() time.Time) (Store, ledger.Ledger) {
	t.Helper()
	if now == nil {
		now = time.Now
	}
	st := b.New(t)
	l := st.Open(t, now)
	t.Cleanup(func() { _ = l.Close() })
	return st, l
}

// Dispatched returns an ungated execution's first record in session s1.
func Dispatched(id string) ledger.Record {
	return ledger.Record{ID: id, Namespace: ledger.DefaultNamespace, SessionID: "s1", ToolCallID: "call-" + id,
		Connector: "payments", Operation: "create_payment", Effect: "external", Policy: "idempotent-retry",
		Args: []byte(`{"amount":100}`), ArgsDigest: "d-" + id, State: ledger.StateDispatched, Attempt: 1, MaxAttempts: 3}
}
