package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// fakeClock is a deterministic Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// memOptions returns options for an in-memory, unsynced ledger (tests only).
func memOptions(fs vfs.FS, clock *fakeClock) Options {
	o := Options{Dir: "ledger", fs: fs, noSync: true, Logger: discardLogger()}
	if clock != nil {
		o.Now = clock.Now
	}
	return o
}

func openMem(t testing.TB, clock *fakeClock) *DB {
	t.Helper()
	db, err := Open(context.Background(), memOptions(vfs.NewMem(), clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// rawKeys returns every key of the database with its value.
func rawKeys(t testing.TB, db *DB) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	if err := scanRange(db.db, nil, nil, func(k, v []byte) error {
		m[string(k)] = bytes.Clone(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkInvariants scans r/, e/, p/, f/, t/, c/ and s/ and fails t unless they
// agree: p/ holds exactly the non-terminal records, f/ exactly the
// recovery_required ones (under their session), t/ exactly the terminal
// ones (at their UpdatedAt), c/ exactly the records that are not pruned
// (at their CreatedAt), every record's session has a marker, every
// record has events 1..Events whose last one ends in its state, and a
// tombstone has no events or index entries. The in-memory fence counts
// must match f/.
func checkInvariants(t testing.TB, db *DB) {
	t.Helper()
	keys := rawKeys(t, db)
	if _, ok := keys[string(protocolKey)]; !ok {
		t.Errorf("invariant: no protocol marker")
	}
	for _, k := range [][]byte{identityKey, hwmKey} {
		if _, ok := keys[string(k)]; !ok {
			t.Errorf("invariant: no %s", k)
		}
	}
	want := map[string]bool{string(protocolKey): true, string(identityKey): true, string(hwmKey): true}
	// Each accepted restore is recorded, and the generation counts them.
	if v, ok := keys[string(generationKey)]; ok {
		want[string(generationKey)] = true
		gen := binary.BigEndian.Uint64(v)
		for g := uint64(1); g <= gen; g++ {
			want[string(restoreKey(g))] = true
		}
	}
	for k, v := range keys {
		if !bytes.HasPrefix([]byte(k), []byte(prefixRecord)) {
			continue
		}
		want[k] = true
		id := k[len(prefixRecord):]
		if len(v) > 0 && v[0] == tombstoneTag {
			if _, err := decodeTombstone(v); err != nil {
				t.Errorf("invariant: %s: %v", id, err)
			}
			continue
		}
		rec, err := decodeRecord(v)
		if err != nil {
			t.Errorf("invariant: %s: %v", id, err)
			continue
		}
		if rec.ID != id {
			t.Errorf("invariant: key %q holds record %q", k, rec.ID)
		}
		if !rec.State.Terminal() {
			pk := string(pendingKey(id))
			want[pk] = true
			// The pending entry carries the record, byte for byte.
			if pv, ok := keys[pk]; ok && !bytes.Equal(pv, v) {
				t.Errorf("invariant: pending entry of %s differs from its record", id)
			}
		} else {
			want[string(termKey(rec.UpdatedAt, id))] = true
		}
		if rec.State == StateRecoveryRequired {
			want[string(fenceKey(rec.Namespace, rec.SessionID, id))] = true
		}
		if rec.State == StateAwaitingApproval {
			want[string(awaitKey(rec.Namespace, id))] = true
		}
		if due, ok := DueAt(rec); ok {
			want[string(dueKey(due, id))] = true
		}
		want[string(sessionKey(rec.Namespace, rec.SessionID))] = true
		want[string(createdKey(rec.CreatedAt, id))] = true
		if rec.DuplicateWindow > 0 {
			want[string(intentKey(rec))] = true
		}
		for seq := uint64(1); seq <= rec.Events; seq++ {
			ek := string(eventKey(id, seq))
			want[ek] = true
			ev, err := decodeEvent(keys[ek])
			if err != nil {
				t.Errorf("invariant: %s event %d: %v", id, seq, err)
				continue
			}
			if ev.Seq != seq || ev.ExecutionID != id {
				t.Errorf("invariant: %s event %d is %d of %q", id, seq, ev.Seq, ev.ExecutionID)
			}
			if seq == rec.Events && (ev.To != rec.State || ev.Attempt != rec.Attempt) {
				t.Errorf("invariant: %s last event ends in %s@%d, record is %s@%d", id, ev.To, ev.Attempt, rec.State, rec.Attempt)
			}
		}
		if rec.Outcome != nil && rec.Outcome.Attempt > rec.Attempt {
			t.Errorf("invariant: %s outcome for future attempt %d", id, rec.Outcome.Attempt)
		}
		if rec.Attempt > rec.MaxAttempts {
			t.Errorf("invariant: %s attempt %d > max %d", id, rec.Attempt, rec.MaxAttempts)
		}
	}
	// The write path's per-shard cache holds only non-terminal records,
	// each equal to what is stored.
	for i := range db.recent {
		st := &db.recent[i]
		st.mu.Lock()
		for id, cached := range st.m {
			stored, err := decodeRecord(keys[string(recordKey(id))])
			if err != nil || cached.State.Terminal() || !reflect.DeepEqual(cached, stored) {
				t.Errorf("invariant: cached %s = %+v, stored %+v (%v)", id, cached, stored, err)
			}
		}
		st.mu.Unlock()
	}
	// The in-memory fence count agrees with the stored fence index.
	stored := map[string]int{}
	for k := range keys {
		if p, ok := fenceSessionPrefix([]byte(k)); ok {
			stored[string(p)]++
		}
	}
	db.fenceMu.RLock()
	if !reflect.DeepEqual(stored, db.fences) {
		t.Errorf("invariant: fence counts %v, stored fence index %v", db.fences, stored)
	}
	db.fenceMu.RUnlock()
	// So does the approval count, per namespace and in total.
	awaiting, total := map[string]int{}, 0
	for k := range keys {
		if ns, ok := awaitNamespace([]byte(k)); ok {
			awaiting[ns]++
			total++
		}
	}
	db.awaitMu.RLock()
	if !reflect.DeepEqual(awaiting, db.awaiting) || total != db.awaitTotal {
		t.Errorf("invariant: approval counts %v (total %d), stored approval index %v (total %d)", db.awaiting, db.awaitTotal, awaiting, total)
	}
	db.awaitMu.RUnlock()
	var extra, missing []string
	for k := range keys {
		// Session markers outlive pruned records, so they are not extra.
		if !want[k] && !bytes.HasPrefix([]byte(k), []byte(prefixSession)) && !consoleSessionKey(t, k, keys[k]) {
			extra = append(extra, fmt.Sprintf("%q", k))
		}
	}
	for k := range want {
		if _, ok := keys[k]; !ok {
			missing = append(missing, fmt.Sprintf("%q", k))
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra) > 0 {
		t.Errorf("invariant: keys that no record explains: %v", extra)
	}
	if len(missing) > 0 {
		t.Errorf("invariant: keys missing for records: %v", missing)
	}
}

// consoleSessionKey reports whether k is a console session's key, whose
// value must decode.
func consoleSessionKey(t testing.TB, k string, v []byte) bool {
	if !bytes.HasPrefix([]byte(k), []byte(prefixConsole)) {
		return false
	}
	if _, err := decodeConsoleSession([]byte(k), v); err != nil {
		t.Errorf("invariant: %v", err)
	}
	return true
}
