package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// SessionKnown implements Ledger.
func (d *DB) SessionKnown(ctx context.Context, namespace, sessionID string) (bool, error) {
	if err := d.enter(ctx); err != nil {
		return false, err
	}
	defer d.exit()
	v, closer, err := d.db.Get(sessionKey(namespace, sessionID))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: read session marker: %w", err)
	}
	legacy := string(v) == legacySession
	return !legacy, closer.Close()
}

// legacySession marks a session whose first record was a call resumed from
// history the ledger did not see: the session predates the ledger, so "no
// record" never proves "never ran" in it — not even after that first call
// is resolved, and not for calls added to it later.
const legacySession = "legacy"

// sessionMarker is the value of a new session's marker: empty (known under
// the current protocol) unless its first record is a resumed call the
// ledger had no record of.
func sessionMarker(first Record) []byte {
	if StartsLegacySession(first) {
		return []byte(legacySession)
	}
	return nil
}

// sessionMarked reports whether sk is known to have a committed session
// marker. Markers are never deleted, so a yes stays true.
func (d *DB) sessionMarked(sk []byte) bool {
	d.markedMu.RLock()
	defer d.markedMu.RUnlock()
	_, ok := d.marked[string(sk)]
	return ok
}

// maxMarkedSessions bounds the set of sessions known to be marked; past
// it, the set starts again (and Create reads a marker to learn it again).
const maxMarkedSessions = 1 << 16

func (d *DB) noteSessionMarked(sk []byte) {
	if d.sessionMarked(sk) {
		return
	}
	d.markedMu.Lock()
	defer d.markedMu.Unlock()
	if d.marked == nil || len(d.marked) >= maxMarkedSessions {
		d.marked = make(map[string]struct{})
	}
	d.marked[string(sk)] = struct{}{}
}
