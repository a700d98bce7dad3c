package ledger

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/pebbleconf"
	"github.com/connhost/connhost/ledger/internal/witness"
)

// Open opens the ledger in opts.Dir, or creates one where there has never
// been one (see Options.Create). It refuses, with a *DamageError (which
// matches ErrCorrupt) and without writing anything, a ledger that would
// otherwise open short, empty, or other than the deployment acknowledged:
//
//   - the mark or the witness exists but the directory is missing or
//     holds no ledger;
//   - the directory holds another ledger than the one the mark or the
//     witness names;
//   - the directory holds fewer writes than the mark or the witness
//     records, or an older generation (a copy from before an accepted
//     restore);
//   - the newest write-ahead log is damaged before its end;
//   - the mark or the witness is unreadable, or Pebble finds its own files
//     damaged.
//
// A ledger restored from a backup on purpose is opened with AcceptRestore
// first. A ledger without a mark (one written before marks, or whose mark
// was removed) is adopted as it is: Open writes its mark and logs that it
// did. With Options.WitnessPath, a ledger without a witness gets one (and
// Open logs it); a witness of an older generation than the ledger (a
// restore was accepted without it) has the sessions it saw written after
// the restore's position fenced before Open returns.
// A new or adopted directory gets a protocol marker; an existing one must
// carry the marker of ProtocolVersion, else Open fails with ErrProtocol
// naming both versions. The caller owns the returned DB and must Close it.
func Open(ctx context.Context, opts Options) (*DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.loseUnsynced = opts.loseUnsynced || crash.LosesUnsynced(ctx)
	d, err := open(opts)
	if opts.Create != CreateInit {
		return d, err
	}
	var de *DamageError
	switch {
	case errors.As(err, &de):
		if err := setAside(opts); err != nil {
			return nil, err
		}
		return open(opts)
	case err == nil && !d.created:
		n := d.writes.Load()
		_ = d.Close()
		away := opts.Dir + " and " + opts.MarkPath
		if opts.WitnessPath != "" {
			away = opts.Dir + ", " + opts.MarkPath + " and " + opts.WitnessPath
		}
		return nil, fmt.Errorf("%w: %s holds a healthy ledger (%s, %d writes): init replaces only a missing or damaged ledger; to discard this one, move %s away first",
			ErrInvalid, opts.Dir, d.identity, n, away)
	}
	return d, err
}

// dirState is what a ledger directory holds before Pebble opens it.
type dirState int

const (
	dirMissing dirState = iota
	dirEmpty            // nothing but, perhaps, Pebble's lock file
	dirPresent
)

func (s dirState) String() string {
	if s == dirMissing {
		return "is missing"
	}
	return "is empty"
}

// lockFile is the name of Pebble's lock file in its directory.
const lockFile = "LOCK"

func inspectDir(fsys vfs.FS, dir string) (dirState, error) {
	names, err := fsys.List(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return dirMissing, nil
	}
	if err != nil {
		return 0, fmt.Errorf("ledger: list %s: %w", dir, err)
	}
	for _, n := range names {
		if n != lockFile {
			return dirPresent, nil
		}
	}
	return dirEmpty, nil
}

// open runs Open's checks and opens the ledger; it never sets anything
// aside.
func open(opts Options) (*DB, error) {
	fsys := opts.fs
	onDisk := fsys == nil
	if onDisk {
		fsys = privateFS{vfs.Default}
		opts.fs = fsys
	}
	if opts.loseUnsynced {
		fsys = lossyFS{fsys}
		opts.fs = fsys
	}
	mk, err := readMark(fsys, opts.MarkPath, opts.Dir)
	if err != nil {
		return nil, err
	}
	w, err := readWitness(opts)
	if err != nil {
		return nil, err
	}
	st, err := inspectDir(fsys, opts.Dir)
	if err != nil {
		return nil, err
	}
	if st != dirPresent {
		switch {
		case mk != nil:
			return nil, missingError(opts, mk, st.String())
		case w != nil:
			return nil, witnessMissingError(opts, w, st.String()+", and so is its mark")
		case opts.Create == CreateNever:
			return nil, noLedgerError(opts)
		}
	}
	for _, d := range []string{opts.Dir, fsys.PathDir(opts.MarkPath)} {
		if err := fsys.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("ledger: create %s: %w", d, err)
		}
	}
	if onDisk {
		if err := tightenLedger(opts.Dir, opts.MarkPath, opts.Logger); err != nil {
			return nil, err
		}
	}
	// The lock is held from before the log check until Close, so no other
	// process writes the log, the directory or the mark in between.
	lock, err := pebble.LockDirectory(opts.Dir, fsys)
	if err != nil {
		return nil, fmt.Errorf("ledger: lock %s (is another process using this ledger?): %w", opts.Dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = lock.Close()
		}
	}()
	if st == dirPresent {
		dmg, err := checkWAL(fsys, opts.Dir)
		if err != nil {
			return nil, err
		}
		if dmg != nil {
			return nil, &DamageError{Kind: DamageLog, Dir: opts.Dir, Mark: opts.MarkPath, What: fmt.Sprintf(
				"the write-ahead log %s of the ledger in %s is damaged at byte %d, and records of the same log follow at byte %d: "+
					"opening it would silently drop every write after the damage", dmg.Path, opts.Dir, dmg.Offset, dmg.Next)}
		}
	}
	popts := pebbleOptions(opts)
	defer popts.Cache.Unref() // the DB holds its own reference
	popts.Lock = lock
	pdb, err := pebble.Open(opts.Dir, popts)
	if err != nil {
		if errors.Is(err, pebble.ErrCorruption) {
			return nil, &DamageError{Kind: DamageStore, Dir: opts.Dir, Mark: opts.MarkPath,
				What: fmt.Sprintf("the storage engine found the ledger in %s damaged (%v)", opts.Dir, err), Err: err}
		}
		return nil, fmt.Errorf("ledger: open %s: %w", opts.Dir, err)
	}
	d := &DB{opts: opts, db: pdb, wo: pebble.Sync, seed: maphash.MakeSeed(), fs: fsys, dirLock: lock}
	if opts.noSync {
		d.wo = pebble.NoSync
	}
	if err := d.setup(mk, w); err != nil {
		_ = pdb.Close()
		return nil, err
	}
	if err := d.loadFences(); err != nil {
		_ = pdb.Close()
		return nil, err
	}
	if err := d.loadAwaiting(); err != nil {
		_ = pdb.Close()
		return nil, err
	}
	if d.adopt != nil {
		if err := d.adoptRestore(context.Background()); err != nil {
			_ = pdb.Close()
			return nil, err
		}
	}
	d.stopMarker, d.markerDone = make(chan struct{}), make(chan struct{})
	go d.runMarker()
	d.stopSyncer, d.syncerDone = make(chan struct{}), make(chan struct{})
	go d.runLazySyncer()
	ok = true
	return d, nil
}

func missingError(opts Options, mk *mark, how string) error {
	return &DamageError{Kind: DamageMissing, Dir: opts.Dir, Mark: opts.MarkPath, What: fmt.Sprintf(
		"the ledger directory %s %s, but its mark %s says it held ledger %s with %d committed writes (mark written %s)",
		opts.Dir, how, opts.MarkPath, mk.Identity, mk.HighWater, mk.UpdatedAt.UTC().Format(time.RFC3339))}
}

func witnessMissingError(opts Options, w *witness.File, how string) error {
	return &DamageError{Kind: DamageMissing, Dir: opts.Dir, Mark: opts.MarkPath, Witness: opts.WitnessPath, What: fmt.Sprintf(
		"the ledger directory %s %s, but its witness %s says it held ledger %s with %d committed writes (witness written %s): "+
			"the ledger was deleted, or the data directory was replaced",
		opts.Dir, how, opts.WitnessPath, w.Identity, w.Position, w.UpdatedAt.UTC().Format(time.RFC3339))}
}

// readWitness reads the witness of opts: nil without one, a *DamageError
// if it is unreadable.
func readWitness(opts Options) (*witness.File, error) {
	if opts.WitnessPath == "" {
		return nil, nil
	}
	w, err := witness.Read(opts.WitnessPath)
	var me *witness.MalformedError
	switch {
	case errors.As(err, &me):
		return nil, &DamageError{Kind: DamageWitness, Dir: opts.Dir, Mark: opts.MarkPath, Witness: opts.WitnessPath,
			What: fmt.Sprintf("the witness %s of the ledger in %s is unreadable (%v)", opts.WitnessPath, opts.Dir, me.Err), Err: err}
	case err != nil:
		return nil, fmt.Errorf("ledger: %w", err)
	case w != nil && w.Backend != witness.BackendPebble:
		return nil, &DamageError{Kind: DamageIdentity, Dir: opts.Dir, Mark: opts.MarkPath, Witness: opts.WitnessPath, What: fmt.Sprintf(
			"the witness %s names a ledger on %s (%s), not the Pebble ledger in %s", opts.WitnessPath, w.Backend, w.Identity, opts.Dir)}
	}
	return w, nil
}

func noLedgerError(opts Options) error {
	return fmt.Errorf("%w in %s (and no mark %s); open with Options.Create = CreateIfNew to create one", ErrNoLedger, opts.Dir, opts.MarkPath)
}

// setup checks the opened directory against the mark mk and the witness
// w (nil if there is none) and creates or adopts the ledger as Open
// documents. It refuses before it writes anything.
func (d *DB) setup(mk *mark, w *witness.File) error {
	empty, err := d.empty()
	if err != nil {
		return fmt.Errorf("ledger: read %s: %w", d.opts.Dir, err)
	}
	if empty {
		switch {
		case mk != nil:
			return missingError(d.opts, mk, "holds no data")
		case w != nil:
			return witnessMissingError(d.opts, w, "holds no data, and its mark is missing")
		case d.opts.Create == CreateNever:
			return noLedgerError(d.opts)
		}
		if err := d.create(); err != nil {
			return err
		}
		return d.startWitness(nil)
	}
	id, stored, gen, err := d.readMeta()
	if err != nil {
		return err
	}
	if mk != nil {
		switch {
		case id != mk.Identity:
			found := "ledger " + id
			if id == "" {
				found = "a ledger without an identity"
			}
			return &DamageError{Kind: DamageIdentity, Dir: d.opts.Dir, Mark: d.opts.MarkPath, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
				"%s holds %s, but its mark %s belongs to ledger %s (%d committed writes): the directory was replaced by another ledger's",
				d.opts.Dir, found, d.opts.MarkPath, mk.Identity, mk.HighWater)}
		case mk.Generation > gen, mk.Generation == gen && stored < mk.HighWater:
			what := fmt.Sprintf(
				"the ledger in %s is behind its mark %s: the mark records %d committed writes (written %s), the directory holds only %d: "+
					"at least %d committed writes are missing, e.g. from a truncated or deleted write-ahead log",
				d.opts.Dir, d.opts.MarkPath, mk.HighWater, mk.UpdatedAt.UTC().Format(time.RFC3339), stored, mk.HighWater-min(stored, mk.HighWater))
			if mk.Generation > gen {
				what = fmt.Sprintf("the ledger in %s is behind its mark %s: the mark records generation %d (%d accepted restores), the directory holds generation %d: "+
					"it is a copy from before a restore was accepted", d.opts.Dir, d.opts.MarkPath, mk.Generation, mk.Generation, gen)
			}
			if !d.opts.accepting {
				return &DamageError{Kind: DamageBehind, Dir: d.opts.Dir, Mark: d.opts.MarkPath, Witness: d.opts.WitnessPath, What: what}
			}
			d.noteRestored(what, mk.Generation, mk.HighWater)
		}
		// A mark of an older generation was written before a restore was
		// accepted and not since (a crash in between): it is rewritten.
	}
	v := witness.Holds
	if w != nil {
		var says string
		v, says = witness.Check(*w, witness.Found{Identity: id, Generation: gen, Position: stored, ProbeEvents: -1}, func(found, seen uint64) string {
			return fmt.Sprintf("it holds %d writes, but the witness saw %d: at least %d acknowledged writes are missing", found, seen, seen-found)
		})
		switch v {
		case witness.Other:
			return &DamageError{Kind: DamageIdentity, Dir: d.opts.Dir, Mark: d.opts.MarkPath, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
				"the ledger in %s is not the one its witness %s names: %s; the directory was replaced by another ledger's, or the witness is another deployment's",
				d.opts.Dir, d.opts.WitnessPath, says)}
		case witness.Behind:
			what := fmt.Sprintf("the ledger in %s is behind its witness %s (written %s): %s; the directory (with its mark) was replaced by an older copy, e.g. restored from a backup",
				d.opts.Dir, d.opts.WitnessPath, w.UpdatedAt.UTC().Format(time.RFC3339), says)
			if !d.opts.accepting {
				return &DamageError{Kind: DamageBehind, Dir: d.opts.Dir, Mark: d.opts.MarkPath, Witness: d.opts.WitnessPath, What: what}
			}
			d.noteRestored(what, w.Generation, w.Position)
		}
	}
	if d.opts.replaced && d.restored == nil {
		// The mark and the witness lag the last writes by up to their
		// interval: a backup put in place is behind what it replaced,
		// whatever they say.
		d.noteRestored(fmt.Sprintf("the ledger in %s was replaced by a backup holding %d committed writes", d.opts.Dir, stored), gen, stored)
	}
	if err := d.checkProtocol(); err != nil {
		return err
	}
	d.identity, d.stored, d.generation = id, stored, gen
	d.writes.Store(stored)
	d.openWrites = stored
	switch {
	case mk != nil && mk.Generation == gen:
		d.inMark = mk.HighWater
	case mk != nil:
		if err := d.writeMark(stored); err != nil {
			return err
		}
	default:
		// No mark: adopt the directory as it is.
		if err := d.adoptUnmarked(stored); err != nil {
			return err
		}
	}
	// An accepting Open that found the ledger behind writes neither the
	// mark nor the witness until the restore is accepted: lowering them
	// would accept it without fencing anything.
	d.frozen = d.restored != nil
	d.found = w
	switch v {
	case witness.Accepted:
		d.adopt = w
		return d.startWitness(nil)
	case witness.Behind:
		return d.startWitness(nil)
	}
	return d.startWitness(w)
}

// noteRestored records, for AcceptRestore, what the ledger is behind.
func (d *DB) noteRestored(what string, generation, position uint64) {
	if d.restored == nil {
		d.restored = &restoreFound{}
	}
	r := d.restored
	r.what = append(r.what, what)
	if generation > r.generation || generation == r.generation && position > r.position {
		r.generation, r.position = generation, position
	}
}

// adoptUnmarked adopts a directory without a mark as it is: it gets an
// identity if it has none (a ledger written before marks), and its mark.
func (d *DB) adoptUnmarked(stored uint64) error {
	if d.identity == "" {
		d.identity = newIdentity()
		b := d.db.NewBatch()
		_ = b.Set(identityKey, []byte(d.identity), nil)
		_ = b.Set(hwmKey, encodeHWM(stored), nil)
		err := b.Commit(pebble.Sync)
		_ = b.Close()
		if err != nil {
			return fmt.Errorf("ledger: write identity: %w", err)
		}
		d.opts.Logger.Info("ledger: adopted a ledger written before marks", "dir", d.opts.Dir, "mark", d.opts.MarkPath, "identity", d.identity)
	} else {
		d.opts.Logger.Warn("ledger: the mark was missing; adopted the directory as it is (writes lost since the mark's last update cannot be detected)",
			"dir", d.opts.Dir, "mark", d.opts.MarkPath, "witness", d.opts.WitnessPath, "identity", d.identity, "writes", stored)
	}
	return d.writeMark(stored)
}

// startWitness starts keeping the witness (with Options.WitnessPath):
// from w, the witness found and checked, or else a new one for the ledger
// as it stands, written now. A new ledger's witness names every session
// written since its first write; an existing ledger's, only those written
// from now on.
func (d *DB) startWitness(w *witness.File) error {
	if d.opts.WitnessPath == "" {
		return nil
	}
	d.sessions = witness.NewTracker()
	if w != nil {
		d.wit, d.inWitness = w, w.Position
		return nil
	}
	d.wit = &witness.File{Version: witness.Version, Backend: witness.BackendPebble, Identity: d.identity, Generation: d.generation, Horizon: d.stored}
	d.inWitness = ^uint64(0)
	if d.frozen || d.adopt != nil {
		return nil // AcceptRestore and adoptRestore write it
	}
	if err := d.writeWitness(d.stored); err != nil {
		return err
	}
	if !d.created {
		d.opts.Logger.Info("ledger: the ledger had no witness; wrote one", "dir", d.opts.Dir, "witness", d.opts.WitnessPath, "identity", d.identity, "writes", d.stored)
	}
	return nil
}

// create writes a new ledger's protocol marker, identity and high-water
// mark into the empty directory (one synced batch), then its mark. A crash
// between the two leaves a directory without a mark, which the next Open
// adopts.
func (d *DB) create() error {
	d.identity = newIdentity()
	b := d.db.NewBatch()
	pm, _ := json.Marshal(protocolMarker{Protocol: ProtocolVersion})
	_ = b.Set(protocolKey, pm, nil)
	_ = b.Set(identityKey, []byte(d.identity), nil)
	_ = b.Set(hwmKey, encodeHWM(0), nil)
	err := b.Commit(pebble.Sync)
	_ = b.Close()
	if err != nil {
		return fmt.Errorf("ledger: create in %s: %w", d.opts.Dir, err)
	}
	d.created = true
	if err := d.writeMark(0); err != nil {
		return err
	}
	d.opts.Logger.Info("ledger: created a new, empty ledger", "dir", d.opts.Dir, "mark", d.opts.MarkPath, "witness", d.opts.WitnessPath, "identity", d.identity)
	return nil
}

// readMeta reads the identity ("" if none), the high-water mark and the
// generation (0 if none).
func (d *DB) readMeta() (string, uint64, uint64, error) {
	var id string
	v, closer, err := d.db.Get(identityKey)
	switch {
	case err == nil:
		id = string(v)
		_ = closer.Close()
		if !validIdentity(id) {
			return "", 0, 0, fmt.Errorf("%w: %s: identity %q", ErrCorrupt, d.opts.Dir, id)
		}
	case !errors.Is(err, pebble.ErrNotFound):
		return "", 0, 0, fmt.Errorf("ledger: read identity: %w", err)
	}
	hw, err := d.readCount(hwmKey, "high-water mark")
	if err != nil {
		return "", 0, 0, err
	}
	gen, err := d.readCount(generationKey, "generation")
	return id, hw, gen, err
}

// readCount reads a u64 BE value (0 if there is none).
func (d *DB) readCount(key []byte, what string) (uint64, error) {
	v, closer, err := d.db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("ledger: read %s: %w", what, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s: %s of %d bytes", ErrCorrupt, d.opts.Dir, what, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func encodeHWM(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// writeMark writes the mark with high-water mark n, which the directory
// already holds durably. The caller holds markMu or is Open.
func (d *DB) writeMark(n uint64) error {
	err := writeMark(d.fs, d.opts.MarkPath, mark{Identity: d.identity, Protocol: ProtocolVersion, Generation: d.generation, HighWater: n, UpdatedAt: d.opts.Now().UTC()})
	if err == nil {
		d.inMark = n
	}
	return err
}

// writeWitness writes the witness with count n, which the directory
// already holds durably, and the sessions written since the last one.
// The caller holds markMu or is Open. Sessions noted stay noted if the
// write fails, for the next one.
func (d *DB) writeWitness(n uint64) error {
	w := d.wit
	w.Generation, w.Position, w.UpdatedAt = d.generation, n, d.opts.Now().UTC()
	w.Note(d.sessions.Drain(), d.opts.WitnessSessions)
	if err := witness.Write(d.opts.WitnessPath, *w); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	d.inWitness = n
	return nil
}

// runMarker brings the mark up to date every MarkInterval until Close.
func (d *DB) runMarker() {
	defer close(d.markerDone)
	t := time.NewTicker(d.opts.MarkInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stopMarker:
			return
		case <-t.C:
			if err := d.updateMark(); err != nil {
				d.opts.Logger.Error("ledger: update the mark", "mark", d.opts.MarkPath, "err", err)
			}
		}
	}
}

// updateMark makes the count of committed writes durable in the directory
// (m/hwm, a synced write) and then in the mark and the witness, if it
// moved since the last update. Every write counted was committed before the m/hwm write, so it
// precedes it in the write-ahead log: a log that lost one of them lost the
// m/hwm write too, and the next Open finds the directory behind the mark.
func (d *DB) updateMark() error {
	d.markMu.Lock()
	defer d.markMu.Unlock()
	n := d.writes.Load()
	if n != d.stored {
		if err := d.db.Set(hwmKey, encodeHWM(n), d.wo); err != nil {
			return fmt.Errorf("ledger: write high-water mark: %w", err)
		}
		d.stored = n
	}
	if d.frozen {
		return nil
	}
	if n != d.inMark {
		if err := d.writeMark(n); err != nil {
			return err
		}
	}
	if d.wit != nil && n != d.inWitness {
		return d.writeWitness(n)
	}
	return nil
}

// Close implements Ledger. It waits for operations in flight, brings the
// mark and the witness up to date and flushes the memtables, so that after a clean Close
// the data is in the checksummed table files and the write-ahead log holds
// nothing that is needed. Afterwards every method returns ErrClosed.
func (d *DB) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.closed = true
	close(d.stopSyncer)
	<-d.syncerDone
	close(d.stopMarker)
	<-d.markerDone
	var errs []error
	d.markMu.Lock()
	n := d.writes.Load()
	if n != d.stored {
		if err := d.db.Set(hwmKey, encodeHWM(n), d.wo); err != nil {
			errs = append(errs, fmt.Errorf("ledger: write high-water mark: %w", err))
		} else {
			d.stored = n
		}
	}
	if err := d.db.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("ledger: flush on close: %w", err))
	}
	if d.stored != d.inMark && !d.frozen {
		errs = append(errs, d.writeMark(d.stored))
	}
	if d.wit != nil && d.stored != d.inWitness && !d.frozen {
		errs = append(errs, d.writeWitness(d.stored))
	}
	d.markMu.Unlock()
	errs = append(errs, d.db.Close(), d.dirLock.Close())
	return errors.Join(errs...)
}

// setAside renames the remains of a damaged ledger (its directory, then
// its mark, then its witness, whichever exist) to <name>.aside-<UTC
// time>, so that Open can start a new one in their place. The directory
// goes first: a crash in between leaves a mark or a witness without a
// directory, which is refused, never a damaged directory without them,
// which would be adopted.
func setAside(opts Options) error {
	fsys := opts.fs
	if fsys == nil {
		fsys = vfs.Default
	}
	if opts.loseUnsynced {
		fsys = lossyFS{fsys}
		opts.fs = fsys
	}
	suffix := ".aside-" + opts.Now().UTC().Format("20060102T150405Z")
	for _, p := range []string{opts.Dir, opts.MarkPath} {
		if _, err := fsys.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("ledger: set aside %s: %w", p, err)
		}
		to := p + suffix
		for i := 2; ; i++ {
			if _, err := fsys.Stat(to); errors.Is(err, fs.ErrNotExist) {
				break
			}
			to = p + suffix + "-" + strconv.Itoa(i)
		}
		if err := fsys.Rename(p, to); err != nil {
			return fmt.Errorf("ledger: set aside %s: %w", p, err)
		}
		if err := syncDir(fsys, fsys.PathDir(p)); err != nil {
			return fmt.Errorf("ledger: set aside %s: %w", p, err)
		}
		opts.Logger.Warn("ledger: set aside the remains of a missing or damaged ledger", "from", p, "to", to)
	}
	if opts.WitnessPath != "" {
		to, err := witness.SetAside(opts.WitnessPath, suffix[len(".aside-"):])
		if err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
		if to != "" {
			opts.Logger.Warn("ledger: set aside the witness of a missing or damaged ledger", "from", opts.WitnessPath, "to", to)
		}
	}
	return nil
}

type protocolMarker struct {
	Protocol int `json:"protocol"`
}

// checkProtocol checks the protocol marker of a directory that holds data.
func (d *DB) checkProtocol() error {
	v, closer, err := d.db.Get(protocolKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("%w: %s holds data without a protocol marker, this release speaks protocol %d",
			ErrProtocol, d.opts.Dir, ProtocolVersion)
	case err != nil:
		return fmt.Errorf("ledger: read protocol marker: %w", err)
	}
	defer closer.Close()
	var m protocolMarker
	if err := json.Unmarshal(v, &m); err != nil {
		return fmt.Errorf("%w: %s has an unreadable protocol marker %q, this release speaks protocol %d",
			ErrProtocol, d.opts.Dir, v, ProtocolVersion)
	}
	switch m.Protocol {
	case ProtocolVersion:
		return nil
	default:
		return fmt.Errorf("%w: %s was written by protocol %d, this release speaks protocol %d",
			ErrProtocol, d.opts.Dir, m.Protocol, ProtocolVersion)
	}
}

func (d *DB) empty() (bool, error) {
	it, err := d.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	defer it.Close()
	return !it.First(), it.Error()
}

// pebbleOptions returns the Pebble configuration of a ledger (see
// internal/pebbleconf, which the raw benchmark baseline shares). The
// caller owns the returned options' cache reference.
func pebbleOptions(opts Options) *pebble.Options {
	return pebbleconf.Options(opts.CacheBytes, opts.Logger, opts.fs)
}
