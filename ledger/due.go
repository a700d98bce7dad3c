package ledger

import (
	"context"
	"fmt"
	"math"
	"time"
)

// The due index: when a recovery pass must look at an execution next. A
// server's pass runs every second; reading every pending execution each
// time made an idle server with many executions awaiting approval spend a
// quarter of a core on them. Both backends index the time DueAt gives,
// updated in the same write as the record, and Due reads only the
// executions whose time has come.

// DueAt returns when a recovery pass must next look at rec, and false if no
// pass ever needs to:
//
//   - awaiting_approval, approved: when the approval expires (a pass
//     expires it then; before, only a reviewer or the runtime moves it);
//   - retry_wait: when the next attempt is due;
//   - dispatched: at once (the Unix epoch): an attempt nobody in this
//     process is running has an unknown outcome, and a pass skips the one
//     a live call holds;
//   - recovery_required and terminal records: never (an operator settles
//     the first, nothing moves the others).
//
// Times outside what a Unix-nanosecond count holds are clamped to it.
func DueAt(rec Record) (time.Time, bool) {
	var t time.Time
	switch rec.State {
	case StateAwaitingApproval, StateApproved:
		if rec.Approval == nil {
			return dueAtOnce, true // no approval to wait for: a pass expires it
		}
		t = rec.Approval.ExpiresAt
	case StateRetryWait:
		t = rec.NextAttemptAt
	case StateDispatched:
		return dueAtOnce, true
	default:
		return time.Time{}, false
	}
	return clampDue(t), true
}

// clampDue returns t within the due times a Unix-nanosecond count holds.
func clampDue(t time.Time) time.Time {
	switch {
	case t.Before(dueAtOnce):
		return dueAtOnce
	case t.After(dueLast):
		return dueLast
	}
	return normTime(t)
}

// DueUnixNano returns t in Unix nanoseconds, how a backend stores and
// compares due times: a due time (see DueAt) as it is, a time after the
// last due time as that, and a time before the Unix epoch, before which
// nothing is due, as -1.
func DueUnixNano(t time.Time) int64 {
	if t.Before(dueAtOnce) {
		return -1
	}
	return clampDue(t).UnixNano()
}

// dueAtOnce and dueLast bound the due times: the Unix epoch (what a pass
// finds due whenever it runs) and the last Unix nanosecond an int64 holds.
var (
	dueAtOnce = time.Unix(0, 0).UTC()
	dueLast   = time.Unix(0, math.MaxInt64).UTC()
)

// Due implements Ledger. It reads a consistent snapshot of the d/ index,
// in due order; fn may write to the ledger.
func (d *DB) Due(ctx context.Context, until time.Time, fn func(id string) error) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	snap := d.db.NewSnapshot()
	defer snap.Close()
	return scanRange(snap, []byte(prefixDue), dueUpper(DueUnixNano(until)), func(k, _ []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		id, ok := idFromTimeKey(prefixDue, k)
		if !ok {
			return fmt.Errorf("%w: due key %q", ErrCorrupt, k)
		}
		return fn(id)
	})
}
