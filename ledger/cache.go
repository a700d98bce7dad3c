package ledger

import (
	"bytes"
	"hash/maphash"
	"sync"
)

// cacheShard caches the latest committed version of a few non-terminal
// records, so the Apply that follows a Create (the hot path: dispatch, then
// outcome) skips reading and decoding the record it just wrote. An id's
// entry is only read and written while holding the id's lock, only after a
// successful commit, and never holds a terminal record — Prune, which
// writes without the locks, touches terminal records only. The shard's own
// mutex only guards the map.
type cacheShard struct {
	mu sync.Mutex
	m  map[string]Record
	_  [48]byte // keep shards on separate cache lines
}

const (
	numCacheShards = 1024
	// shardCacheSize caps the records cached per shard (1,024 × 8).
	shardCacheSize = 8
)

func (d *DB) shard(id string) *cacheShard {
	return &d.recent[maphash.String(d.seed, id)%numCacheShards]
}

// cached returns a copy of id's cached record. The caller holds id's lock.
func (d *DB) cached(id string) (Record, bool) {
	s := d.shard(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.m[id]
	if !ok {
		return Record{}, false
	}
	return cloneRecord(rec), true
}

// remember caches rec as just committed. The caller holds rec.ID's lock.
func (d *DB) remember(rec Record) {
	s := d.shard(rec.ID)
	if rec.State.Terminal() {
		s.mu.Lock()
		delete(s.m, rec.ID)
		s.mu.Unlock()
		return
	}
	rec = cloneRecord(rec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil || len(s.m) >= shardCacheSize {
		s.m = make(map[string]Record, shardCacheSize)
	}
	s.m[rec.ID] = rec
}

// cloneRecord copies everything a caller could mutate through a Record.
func cloneRecord(r Record) Record {
	r.Args = bytes.Clone(r.Args)
	if r.Approval != nil {
		a := *r.Approval
		r.Approval = &a
	}
	if r.Outcome != nil {
		o := *r.Outcome
		o.Result = bytes.Clone(o.Result)
		r.Outcome = &o
	}
	if r.Resolution != nil {
		res := *r.Resolution
		r.Resolution = &res
	}
	return r
}
