package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// ConsoleSession is one sign-in to the console (package server/console),
// as the ledger keeps it, so that every process reading the ledger (a
// restart, every node of a fleet) knows whether it is still signed in.
// The ledger holds a hash of the session's id, never the id: a copy of
// the ledger (a backup, a reader of the database) cannot sign anyone in.
type ConsoleSession struct {
	// Key is ConsoleSessionKey of the session's id.
	Key [32]byte
	// Principal is the name of the principal signed in.
	Principal string
	// Created is when the session was signed in, Expires when it ends
	// unless revoked before.
	Created, Expires time.Time
	// Revoked is when the session was signed out (zero: it was not).
	Revoked time.Time
}

// Live reports whether s is signed in at now: not revoked, not expired.
func (s ConsoleSession) Live(now time.Time) bool {
	return s.Revoked.IsZero() && now.Before(s.Expires)
}

// ConsoleSessionKey is the key under which a ledger keeps the console
// session whose id is id.
func ConsoleSessionKey(id string) [32]byte {
	return sha256.Sum256([]byte("connhost/console-session/v1\x00" + id))
}

// ConsoleSessions is the part of a ledger that keeps console sessions;
// both backends (DB, and package ledger/pgledger) implement it. Sessions
// are few (one per sign-in), so revoking a principal's sessions may read
// them all. Prune deletes the sessions that expired before its olderThan;
// accepting a restore revokes every session (the backup may hold some
// signed out after it was taken).
type ConsoleSessions interface {
	// AddConsoleSession records a new session. A key already recorded is
	// ErrExists, and changes nothing.
	AddConsoleSession(ctx context.Context, s ConsoleSession) error
	// ConsoleSession returns the session recorded under key, or
	// ErrNotFound (never recorded, or pruned).
	ConsoleSession(ctx context.Context, key [32]byte) (ConsoleSession, error)
	// RevokeConsoleSession records that the session was signed out at
	// at; a session revoked before keeps its first revocation. An
	// unknown key is ErrNotFound.
	RevokeConsoleSession(ctx context.Context, key [32]byte, at time.Time) error
	// RevokeConsoleSessions revokes, at at, every session of principal
	// that is live at at ("sign out everywhere"), and returns how many.
	RevokeConsoleSessions(ctx context.Context, principal string, at time.Time) (int, error)
}

var _ ConsoleSessions = (*DB)(nil)

// prefixConsole is the keyspace of console sessions:
//
//	u/<key, 32 bytes>    the session (consoleVersion, then JSON)
const prefixConsole = "u/"

const consoleVersion = 1

func consoleKey(key [32]byte) []byte { return append([]byte(prefixConsole), key[:]...) }

// consoleValue is the stored form of a ConsoleSession (its key is the
// Pebble key's).
type consoleValue struct {
	Principal string `json:"principal"`
	Created   int64  `json:"created_ns"`
	Expires   int64  `json:"expires_ns"`
	Revoked   int64  `json:"revoked_ns,omitempty"`
}

func encodeConsoleSession(s ConsoleSession) []byte {
	v := consoleValue{Principal: s.Principal, Created: s.Created.UnixNano(), Expires: s.Expires.UnixNano()}
	if !s.Revoked.IsZero() {
		v.Revoked = s.Revoked.UnixNano()
	}
	b, _ := json.Marshal(v) // strings and integers only
	return append([]byte{consoleVersion}, b...)
}

func decodeConsoleSession(k, b []byte) (ConsoleSession, error) {
	var s ConsoleSession
	if len(k) != len(prefixConsole)+len(s.Key) || len(b) == 0 || b[0] != consoleVersion {
		return s, fmt.Errorf("%w: console session %x", ErrCorrupt, k)
	}
	var v consoleValue
	if err := json.Unmarshal(b[1:], &v); err != nil {
		return s, fmt.Errorf("%w: console session %x: %v", ErrCorrupt, k, err)
	}
	copy(s.Key[:], k[len(prefixConsole):])
	s.Principal = v.Principal
	s.Created, s.Expires = time.Unix(0, v.Created).UTC(), time.Unix(0, v.Expires).UTC()
	if v.Revoked != 0 {
		s.Revoked = time.Unix(0, v.Revoked).UTC()
	}
	return s, nil
}

// AddConsoleSession implements ConsoleSessions.
func (d *DB) AddConsoleSession(ctx context.Context, s ConsoleSession) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	k := consoleKey(s.Key)
	mu := d.lock(string(k))
	defer mu.Unlock()
	ok, err := d.has(k)
	if err != nil {
		return err
	}
	if ok {
		return ErrExists
	}
	return d.commitConsole(func(b *pebble.Batch) error { return b.Set(k, encodeConsoleSession(s), nil) })
}

// ConsoleSession implements ConsoleSessions.
func (d *DB) ConsoleSession(ctx context.Context, key [32]byte) (ConsoleSession, error) {
	if err := d.enter(ctx); err != nil {
		return ConsoleSession{}, err
	}
	defer d.exit()
	return d.getConsole(consoleKey(key))
}

func (d *DB) getConsole(k []byte) (ConsoleSession, error) {
	v, closer, err := d.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return ConsoleSession{}, ErrNotFound
	}
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("ledger: read console session: %w", err)
	}
	defer closer.Close()
	return decodeConsoleSession(k, v)
}

// RevokeConsoleSession implements ConsoleSessions.
func (d *DB) RevokeConsoleSession(ctx context.Context, key [32]byte, at time.Time) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	defer d.exit()
	_, err := d.revokeConsole(consoleKey(key), at, false)
	return err
}

// revokeConsole revokes the session under k at at, unless it was revoked
// before or, with liveOnly, has expired at at; it reports whether it did.
func (d *DB) revokeConsole(k []byte, at time.Time, liveOnly bool) (bool, error) {
	mu := d.lock(string(k))
	defer mu.Unlock()
	s, err := d.getConsole(k)
	if err != nil {
		return false, err
	}
	if !s.Revoked.IsZero() || liveOnly && !s.Live(at) {
		return false, nil
	}
	s.Revoked = at
	return true, d.commitConsole(func(b *pebble.Batch) error { return b.Set(k, encodeConsoleSession(s), nil) })
}

// RevokeConsoleSessions implements ConsoleSessions: it reads every
// session, and revokes the principal's live ones one synced write each.
func (d *DB) RevokeConsoleSessions(ctx context.Context, principal string, at time.Time) (int, error) {
	if err := d.enter(ctx); err != nil {
		return 0, err
	}
	defer d.exit()
	var keys [][]byte
	err := scan(d.db, []byte(prefixConsole), func(k, v []byte) error {
		s, err := decodeConsoleSession(k, v)
		if err != nil {
			return err
		}
		if s.Principal == principal && s.Live(at) {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		done, err := d.revokeConsole(k, at, true)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return n, err
		}
		if done {
			n++
		}
	}
	return n, nil
}

// pruneConsole deletes the console sessions that expired before
// olderThan, in one synced batch.
func (d *DB) pruneConsole(olderThan time.Time) error {
	var keys [][]byte
	err := scan(d.db, []byte(prefixConsole), func(k, v []byte) error {
		s, err := decodeConsoleSession(k, v)
		if err != nil {
			return err
		}
		if s.Expires.Before(olderThan) {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil || len(keys) == 0 {
		return err
	}
	return d.commitConsole(func(b *pebble.Batch) error {
		for _, k := range keys {
			if err := b.Delete(k, nil); err != nil {
				return err
			}
		}
		return nil
	})
}

// revokeConsoleAll adds to b the revocation, at at, of every console
// session not revoked yet: accepting a restore signs everyone out, since
// the backup may hold sessions signed out after it was taken.
func (d *DB) revokeConsoleAll(b *pebble.Batch, at time.Time) error {
	return scan(d.db, []byte(prefixConsole), func(k, v []byte) error {
		s, err := decodeConsoleSession(k, v)
		if err != nil {
			return err
		}
		if !s.Revoked.IsZero() {
			return nil
		}
		s.Revoked = at
		return b.Set(bytes.Clone(k), encodeConsoleSession(s), nil)
	})
}

// commitConsole writes what fill puts in a batch, synced, and counts the
// write (see mark.go). A console session is no execution's: no session
// of calls is noted for the witness.
func (d *DB) commitConsole(fill func(b *pebble.Batch) error) error {
	b := d.db.NewBatch()
	defer b.Close()
	if err := fill(b); err != nil {
		return fmt.Errorf("ledger: console session: %w", err)
	}
	if err := b.Commit(d.wo); err != nil {
		return fmt.Errorf("ledger: commit console session: %w", err)
	}
	d.writes.Add(1)
	return nil
}
