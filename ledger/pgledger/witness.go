package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/ledger/internal/witness"
)

// The witness on PostgreSQL. A database can be restored from an older
// dump, rolled back to a point in time, replaced by a replica promoted
// without the last commits, or have its tables emptied or dropped; the
// ledger in it is then behind what the nodes acknowledged, and a manual
// call they ran would run again. Each node (each DB with
// Options.WitnessPath) keeps a witness file outside the database with the
// ledger's identity, generation and commit position (connhost_ledger, see
// migration 1) and a probe execution, and refuses, at Open and while it
// runs, a database that is another ledger or behind its witness.
//
// The commit position is one row that nodes advance, each at most once a
// witness interval and only after writes of its own: a node drains the
// sessions it wrote to, advances the position (recording as probe an
// execution as one of its writes left it), and once that UPDATE has
// committed writes the new position into its witness. Every write the node
// acknowledged before the UPDATE began precedes it in the database's
// commit order, so any state of the database that holds the UPDATE holds
// them: a dump, a point-in-time recovery or a replica's replay that is
// behind a write is behind the position too. A node that did not write
// reads the row instead and takes the fleet's position and probe into its
// witness, so every node sees a rollback of any node's writes, within an
// interval of its own. The row is written about once a second per writing
// node, not once per write: no contention on the commit path.

// ledgerRow is connhost_ledger as a witness check reads it, with the
// events of the witness's probe execution (-1: missing).
type ledgerRow struct {
	identity             string
	generation, position uint64
	probe                *witness.Probe
	probeEvents          int64
}

const readLedgerSQL = `SELECT identity, generation, position, probe_id, probe_events,
    (SELECT events FROM connhost_executions WHERE id = $1)
FROM connhost_ledger`

const advanceSQL = `UPDATE connhost_ledger SET position = position + 1, probe_id = $2, probe_events = $3
RETURNING identity, generation, position, probe_id, probe_events,
    (SELECT events FROM connhost_executions WHERE id = $1)`

// scanLedger reads one connhost_ledger row; a missing row or table is a
// *ledger.DamageError (the ledger is gone), other errors are returned as
// they are.
func (d *DB) scanLedger(row pgx.Row) (ledgerRow, error) {
	var (
		r           ledgerRow
		gen, pos    int64
		probeID     []byte
		probeEvents *int64
		events      *int64
	)
	err := row.Scan(&r.identity, &gen, &pos, &probeID, &probeEvents, &events)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, d.missing("its table connhost_ledger holds no row: the ledger's tables were emptied")
	case errors.As(err, &pgErr) && pgErr.Code == "42P01": // undefined_table
		return r, d.missing("its tables are gone (" + pgErr.Message + ")")
	case err != nil:
		return r, err
	}
	r.generation, r.position = uint64(gen), uint64(pos)
	if probeID != nil && probeEvents != nil {
		r.probe = &witness.Probe{ID: string(probeID), Events: uint64(*probeEvents)}
	}
	r.probeEvents = -1
	if events != nil {
		r.probeEvents = *events
	}
	return r, nil
}

// missing is the refusal of a database whose ledger is gone, though the
// witness names one.
func (d *DB) missing(how string) *ledger.DamageError {
	what := fmt.Sprintf("the %s holds no connhost ledger: %s", d.name, how)
	if w := d.wit; w != nil {
		what += fmt.Sprintf("; but its witness %s says it held ledger %s at commit position %d (witness written %s)",
			d.opts.WitnessPath, w.Identity, w.Position, w.UpdatedAt.UTC().Format(time.RFC3339))
	}
	return &ledger.DamageError{Kind: ledger.DamageMissing, Dir: d.name, Witness: d.opts.WitnessPath, What: what}
}

func probeArg(w *witness.File) []byte {
	if w == nil || w.Probe == nil {
		return nil
	}
	return []byte(w.Probe.ID)
}

func behindPhrase(found, seen uint64) string {
	return fmt.Sprintf("its commit position is %d, but the witness saw %d: writes acknowledged before position %d were reached are missing", found, seen, seen)
}

// readWitness reads the witness of d (nil without one).
func (d *DB) readWitness() (*witness.File, error) {
	if d.opts.WitnessPath == "" {
		return nil, nil
	}
	w, err := witness.Read(d.opts.WitnessPath)
	var me *witness.MalformedError
	switch {
	case errors.As(err, &me):
		return nil, &ledger.DamageError{Kind: ledger.DamageWitness, Dir: d.name, Witness: d.opts.WitnessPath,
			What: fmt.Sprintf("the witness %s of the ledger in the %s is unreadable (%v)", d.opts.WitnessPath, d.name, me.Err), Err: err}
	case err != nil:
		return nil, fmt.Errorf("pgledger: %w", err)
	case w != nil && w.Backend != witness.BackendPostgres:
		return nil, &ledger.DamageError{Kind: ledger.DamageIdentity, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
			"the witness %s names a ledger on %s (%s), not one on PostgreSQL", d.opts.WitnessPath, w.Backend, w.Identity)}
	}
	return w, nil
}

// checkTables refuses a database that lacks some of the ledger's tables
// (dropped by hand: the recorded migrations cannot tell).
func (d *DB) checkTables(ctx context.Context) error {
	var missing []string
	rows, err := d.pool.Query(ctx, `SELECT t FROM unnest($1::TEXT[]) AS t WHERE to_regclass(t) IS NULL`, ledgerTables)
	if err != nil {
		return fmt.Errorf("pgledger: read the ledger's tables: %w", err)
	}
	missing, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgledger: read the ledger's tables: %w", err)
	}
	if len(missing) > 0 {
		return d.missing("its tables " + strings.Join(missing, ", ") + " are gone, though its schema migrations are recorded")
	}
	return nil
}

var ledgerTables = []string{"connhost_executions", "connhost_pending", "connhost_sessions", "connhost_nodes", "connhost_ledger", "connhost_restores", "connhost_console_sessions"}

// openWitness checks the ledger against the witness w Open read (nil if
// there is none) and starts keeping the witness; existed says whether the
// database held a ledger before Open (else Open created it). It runs
// after the migrations.
func (d *DB) openWitness(ctx context.Context, w *witness.File, existed bool) error {
	d.wit = w
	if err := d.checkTables(ctx); err != nil {
		return err
	}
	row, err := d.scanLedger(d.pool.QueryRow(ctx, readLedgerSQL, probeArg(w)))
	if err != nil {
		return fmt.Errorf("pgledger: read connhost_ledger: %w", err)
	}
	d.identity = row.identity
	d.wit = nil
	if !existed {
		d.opts.Logger.Info("pgledger: created a new, empty ledger", "database", d.name, "identity", row.identity, "witness", d.opts.WitnessPath)
	}
	if d.opts.WitnessPath == "" {
		return nil
	}
	v := witness.Holds
	if w != nil {
		var says string
		v, says = witness.Check(*w, witness.Found{Identity: row.identity, Generation: row.generation, Position: row.position, ProbeEvents: row.probeEvents}, behindPhrase)
		switch {
		case v == witness.Other && d.opts.Init:
			if err := d.setAsideWitness(); err != nil {
				return err
			}
			w, v = nil, witness.Holds
		case v == witness.Other:
			return &ledger.DamageError{Kind: ledger.DamageIdentity, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
				"the ledger in the %s is not the one its witness %s names: %s; the database was replaced by another ledger's (or re-created), or the witness is another deployment's",
				d.name, d.opts.WitnessPath, says)}
		case v == witness.Behind:
			what := fmt.Sprintf("the ledger in the %s is behind its witness %s (written %s): %s; the database was restored from an older dump or point in time, a replica was promoted without the last commits, or its tables were emptied",
				d.name, d.opts.WitnessPath, w.UpdatedAt.UTC().Format(time.RFC3339), says)
			switch {
			case d.opts.accepting:
				d.sessions = witness.NewTracker()
				restored := row.position
				if row.generation == w.Generation && row.position >= w.Position {
					// Only the probe is missing: the tables were emptied or
					// rolled back under an intact position, which then says
					// nothing about how far back they went.
					restored = 0
				}
				d.restored = &restoreFound{what: what, generation: w.Generation, position: w.Position, restored: restored, row: row}
				d.found, d.frozen = w, true
				return nil
			case d.opts.Init:
				return fmt.Errorf("%w: %s; init starts a new ledger only where the database holds none or another one: accept this one with AcceptRestore (connhost ledger accept-restore), or drop its tables first",
					ledger.ErrInvalid, what)
			}
			return &ledger.DamageError{Kind: ledger.DamageBehind, Dir: d.name, Witness: d.opts.WitnessPath, What: what}
		}
	}
	if d.opts.Init && existed && w != nil {
		return fmt.Errorf("%w: the %s holds a healthy ledger (%s, commit position %d) that its witness %s names: init replaces only a missing ledger or another one; to discard this one, drop its tables first",
			ledger.ErrInvalid, d.name, row.identity, row.position, d.opts.WitnessPath)
	}
	if d.opts.Init && existed && w == nil && !d.setAside {
		return fmt.Errorf("%w: the %s holds a ledger (%s, commit position %d) and there is no witness at %s: init replaces only a missing ledger or another one; open it without init",
			ledger.ErrInvalid, d.name, row.identity, row.position, d.opts.WitnessPath)
	}
	d.sessions = witness.NewTracker()
	switch v {
	case witness.Holds:
		if w != nil {
			d.wit = w
			break
		}
		d.wit = &witness.File{Version: witness.Version, Backend: witness.BackendPostgres, Identity: row.identity,
			Generation: row.generation, Position: row.position, Probe: row.probe, Horizon: row.position, UpdatedAt: d.opts.Now().UTC()}
		if d.opts.MustExist {
			d.wit = nil // a reader checks a witness, it does not start one
			return nil
		}
		merged, err := witness.Merge(d.opts.WitnessPath, *d.wit, d.opts.WitnessSessions)
		if err != nil {
			return fmt.Errorf("pgledger: %w", err)
		}
		d.wit = &merged
		if existed {
			d.opts.Logger.Info("pgledger: the ledger had no witness here; wrote one", "database", d.name, "witness", d.opts.WitnessPath,
				"identity", row.identity, "position", row.position)
		}
	case witness.Accepted:
		if d.opts.MustExist {
			return nil // the next writer fences what this witness saw
		}
		if err := d.adoptRestore(ctx, w, row); err != nil {
			return err
		}
	}
	if d.opts.MustExist {
		d.wit = nil
		return nil
	}
	d.stopWitness, d.witnessDone = make(chan struct{}), make(chan struct{})
	go d.runWitness()
	return nil
}

// setAsideWitness renames the witness aside (init).
func (d *DB) setAsideWitness() error {
	to, err := witness.SetAside(d.opts.WitnessPath, d.opts.Now().UTC().Format("20060102T150405Z"))
	if err != nil {
		return fmt.Errorf("pgledger: %w", err)
	}
	if to != "" {
		d.opts.Logger.Warn("pgledger: set aside the witness of a missing ledger or another one", "from", d.opts.WitnessPath, "to", to)
	}
	d.setAside = true
	return nil
}

// noteWrite records a committed write of rec for the witness: the next
// advance follows it, with rec as its probe, and its session is noted.
// The position must be owed before the session is noted (see advance).
func (d *DB) noteWrite(rec ledger.Record) {
	if d.sessions == nil {
		return
	}
	d.probe.Store(&witness.Probe{ID: rec.ID, Events: rec.Events})
	d.dirty.Store(true)
	d.sessions.Touch(rec.Namespace, rec.SessionID, 0)
}

// runWitness brings the witness up to date every WitnessInterval until
// Close, or until the ledger is found behind it.
func (d *DB) runWitness() {
	defer close(d.witnessDone)
	t := time.NewTicker(d.opts.WitnessInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stopWitness:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(d.opts.WitnessInterval, 5*time.Second))
		err := d.advance(ctx)
		cancel()
		var de *ledger.DamageError
		switch {
		case errors.As(err, &de):
			return
		case err != nil:
			d.opts.Logger.Warn("pgledger: could not bring the witness up to date (retried)", "witness", d.opts.WitnessPath, "error", err)
		}
	}
}

// advance checks the ledger against the witness and brings the witness
// up to date: after writes of this DB it advances the commit position
// (one UPDATE) and records the new one, else it takes the fleet's. The
// sessions noted are drained before, and the position owed read after
// the drain, so a session is recorded with a position its write precedes.
// A ledger found behind the witness, another ledger, or one whose restore
// was accepted meanwhile fails every later operation of d (a
// *ledger.DamageError, also returned); other errors leave what is owed for
// the next call.
func (d *DB) advance(ctx context.Context) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	if d.wit == nil || d.frozen || d.damage.Load() != nil {
		return nil
	}
	touched := d.sessions.Drain()
	dirty := d.dirty.Swap(false)
	var (
		row ledgerRow
		err error
	)
	if dirty {
		p := d.probe.Load()
		err = d.retry(ctx, func() error {
			row, err = d.scanLedger(d.pool.QueryRow(ctx, advanceSQL, probeArg(d.wit), []byte(p.ID), int64(p.Events)))
			return err
		})
	} else {
		err = d.retry(ctx, func() error {
			row, err = d.scanLedger(d.pool.QueryRow(ctx, readLedgerSQL, probeArg(d.wit)))
			return err
		})
	}
	var de *ledger.DamageError
	switch {
	case errors.As(err, &de):
		d.fail(de)
		return de
	case err != nil:
		if dirty {
			d.dirty.Store(true)
		}
		for _, s := range touched {
			d.sessions.Touch(s.Namespace, s.ID, 0)
		}
		return err
	}
	found := witness.Found{Identity: row.identity, Generation: row.generation, Position: row.position, ProbeEvents: row.probeEvents}
	if dirty {
		found.Position-- // where this advance found it
	}
	switch v, says := witness.Check(*d.wit, found, behindPhrase); v {
	case witness.Other:
		de = &ledger.DamageError{Kind: ledger.DamageIdentity, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
			"while this process had it open, the ledger in the %s became another one: %s; the database was replaced (or re-created)", d.name, says)}
	case witness.Behind:
		de = &ledger.DamageError{Kind: ledger.DamageBehind, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
			"while this process had it open, the ledger in the %s went behind its witness %s: %s; the database was restored from an older dump or point in time, a replica was promoted without the last commits, or its tables were emptied",
			d.name, d.opts.WitnessPath, says)}
	case witness.Accepted:
		de = &ledger.DamageError{Kind: ledger.DamageBehind, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
			"while this process had it open, an operator accepted a restore of the ledger in the %s (generation %d, this process saw %d): "+
				"restart this process, so that it fences the sessions it saw written that the restored ledger may not hold", d.name, row.generation, d.wit.Generation)}
	}
	if de != nil {
		d.fail(de)
		return de
	}
	if !dirty && row.position == d.wit.Position && len(touched) == 0 && !d.unsaved {
		return nil
	}
	for i := range touched {
		touched[i].Position = row.position
	}
	d.wit.Position, d.wit.Probe, d.wit.UpdatedAt = row.position, row.probe, d.opts.Now().UTC()
	d.wit.Note(touched, d.opts.WitnessSessions)
	merged, err := witness.Merge(d.opts.WitnessPath, *d.wit, d.opts.WitnessSessions)
	if err != nil {
		d.unsaved = true
		return fmt.Errorf("pgledger: %w", err)
	}
	if merged.Generation > d.wit.Generation {
		de := &ledger.DamageError{Kind: ledger.DamageBehind, Dir: d.name, Witness: d.opts.WitnessPath, What: fmt.Sprintf(
			"while this process had it open, another process accepted a restore of the ledger in the %s (its witness %s is at generation %d, this process saw %d): "+
				"restart this process, so that it fences the sessions it saw written that the restored ledger may not hold", d.name, d.opts.WitnessPath, merged.Generation, d.wit.Generation)}
		d.fail(de)
		return de
	}
	d.wit, d.unsaved = &merged, false
	return nil
}

// fail makes every later operation of d fail with de: the ledger is not
// what this process acknowledged, and nothing more may be written to it
// or read from it as if it were.
func (d *DB) fail(de *ledger.DamageError) {
	if d.damage.CompareAndSwap(nil, de) {
		d.opts.Logger.Error("pgledger: the shared ledger is not what this node acknowledged; every operation is refused from now on", "error", de.Error())
	}
}

// restoreFound is what an accepting Open found: what the ledger is behind,
// the generation and position the witness saw, the position the restored
// tables are known to hold (0 when only the probe says they are behind),
// and the row.
type restoreFound struct {
	what                 string
	generation, position uint64
	restored             uint64
	row                  ledgerRow
}

// acceptance reads the accepted restore that started generation gen.
func (d *DB) acceptance(ctx context.Context, gen uint64) (restored uint64, by, reason string, err error) {
	var p int64
	err = d.pool.QueryRow(ctx, `SELECT restored_position, accepted_by, reason FROM connhost_restores WHERE generation = $1`, int64(gen)).Scan(&p, &by, &reason)
	if err != nil {
		return 0, "", "", fmt.Errorf("pgledger: read the accepted restore of generation %d: %w", gen, err)
	}
	return uint64(p), by, reason, nil
}

// adoptRestore brings a witness of an older generation than the ledger up
// to date: a restore was accepted without it (on a fleet, with another
// node's witness), so the sessions it saw written after the restored
// position are fenced now, before Open returns.
func (d *DB) adoptRestore(ctx context.Context, w *witness.File, row ledgerRow) error {
	restored, by, reason, err := d.acceptance(ctx, w.Generation+1)
	if err != nil {
		return err
	}
	after, complete := w.After(restored)
	_, fenced, err := ledger.FenceRestore(ctx, d, ledger.RestorePlan{Generation: w.Generation + 1, RestoredPosition: restored,
		WitnessedPosition: w.Position, Sessions: fencedSessions(after), By: by,
		Reason: reason + " (fenced from the witness " + d.opts.WitnessPath + " when this node next opened the ledger)", Now: d.opts.Now()})
	if err != nil {
		return err
	}
	d.wit = &witness.File{Version: witness.Version, Backend: witness.BackendPostgres, Identity: row.identity,
		Generation: row.generation, Position: row.position, Probe: row.probe, Horizon: row.position, UpdatedAt: d.opts.Now().UTC()}
	merged, err := witness.Merge(d.opts.WitnessPath, *d.wit, d.opts.WitnessSessions)
	if err != nil {
		return fmt.Errorf("pgledger: %w", err)
	}
	d.wit = &merged
	d.opts.Logger.Warn("pgledger: a restore of this ledger was accepted since this node's witness was written; fenced the sessions the witness saw written after it",
		"database", d.name, "witness", d.opts.WitnessPath, "generation", row.generation, "restored_position", restored,
		"sessions_fenced", len(fenced), "all_named", complete)
	return nil
}

func fencedSessions(ss []witness.Session) []ledger.FencedSession {
	out := make([]ledger.FencedSession, len(ss))
	for i, s := range ss {
		out[i] = ledger.FencedSession{Namespace: s.Namespace, SessionID: s.ID, LastWrite: s.Position}
	}
	return out
}

// AcceptRestore accepts the ledger in the database as it is after a
// restore (an older dump, a point in time, tables emptied) although it is
// behind the witness at opts.WitnessPath: it fences what the restore may
// have forgotten, as ledger.AcceptRestore does for the Pebble ledger
// (every unfinished execution, and every session a witness saw written
// after the restored position), starts a new generation (recorded in
// connhost_restores) and rewrites the witness. On a fleet, acc.Witnesses
// are the other nodes' witnesses; a node whose witness was not given
// fences its own sessions when it next opens the ledger, but calls of
// those sessions sent to another node before that run again. A database
// whose ledger is gone, or that holds another ledger, is refused as Open
// refuses it; a ledger that is not behind is left as it is (Accepted
// false). When the tables were emptied under an intact position, the
// restored position is unknown and every session the witnesses name is
// fenced.
func AcceptRestore(ctx context.Context, opts Options, acc ledger.RestoreAcceptance) (ledger.RestoreReport, error) {
	if acc.By == "" || acc.Reason == "" {
		return ledger.RestoreReport{}, fmt.Errorf("%w: accepting a restore needs the operator's name and a reason", ledger.ErrInvalid)
	}
	if opts.WitnessPath == "" {
		return ledger.RestoreReport{}, fmt.Errorf("%w: accepting a restore needs the witness (Options.WitnessPath)", ledger.ErrInvalid)
	}
	opts.accepting, opts.MustExist, opts.Init = true, true, false
	d, err := Open(ctx, opts)
	if err != nil {
		return ledger.RestoreReport{}, err
	}
	rep, err := d.acceptRestore(ctx, acc)
	return rep, errors.Join(err, d.Close())
}

func (d *DB) acceptRestore(ctx context.Context, acc ledger.RestoreAcceptance) (ledger.RestoreReport, error) {
	rep := ledger.RestoreReport{Ledger: d.name, Identity: d.identity, Executions: []ledger.FencedExecution{}, Sessions: []ledger.FencedSession{}}
	r := d.restored
	if r == nil {
		return rep, nil
	}
	rep.Behind, rep.RestoredPosition, rep.WitnessedPosition, rep.Generation = []string{r.what}, r.restored, r.position, r.row.generation
	ws := []*witness.File{d.found}
	rep.Witnesses = []string{d.opts.WitnessPath}
	for _, path := range acc.Witnesses {
		w, err := witness.Read(path)
		switch {
		case err != nil:
			return rep, fmt.Errorf("pgledger: %w", err)
		case w == nil:
			return rep, fmt.Errorf("%w: witness %s: no such file", ledger.ErrInvalid, path)
		case w.Identity != d.identity || w.Backend != witness.BackendPostgres:
			return rep, fmt.Errorf("%w: witness %s names ledger %s (%s), not this one (%s)", ledger.ErrInvalid, path, w.Identity, w.Backend, d.identity)
		}
		ws = append(ws, w)
		rep.Witnesses = append(rep.Witnesses, path)
	}
	named, complete, err := witness.ToFence(ws, r.row.generation, r.restored, func(gen uint64) (uint64, error) {
		p, _, _, err := d.acceptance(ctx, gen)
		return p, err
	})
	if err != nil {
		return rep, err
	}
	if !complete && !acc.Unnamed {
		return rep, fmt.Errorf("%w: the restored ledger is at commit position %d and the backup is older than the oldest session the witnesses remember (or the tables were emptied, so how far back they went is unknown): calls of sessions written after the backup that no witness names would run again if a runtime sent them; give every node's witness, or accept that explicitly",
			ledger.ErrUnnamedSessions, r.row.position)
	}
	rep.Unnamed = !complete
	next := r.row.generation + 1
	plan := ledger.RestorePlan{Generation: next, RestoredPosition: r.restored, WitnessedPosition: r.position, Pending: true,
		Sessions: fencedSessions(named), By: acc.By, Reason: acc.Reason, Now: d.opts.Now()}
	execs, sessions, err := ledger.FenceRestore(ctx, d, plan)
	if execs != nil {
		rep.Executions = execs
	}
	if sessions != nil {
		rep.Sessions = sessions
	}
	if err != nil {
		return rep, err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	touched := d.sessions.Drain()
	var probeID []byte
	var probeEvents *int64
	if p := d.probe.Load(); p != nil {
		ev := int64(p.Events)
		probeID, probeEvents = []byte(p.ID), &ev
	}
	var row ledgerRow
	err = d.retry(ctx, func() error {
		tx, err := d.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		row, err = d.scanLedger(tx.QueryRow(ctx, `UPDATE connhost_ledger SET generation = generation + 1, position = position + 1, probe_id = $2, probe_events = $3
WHERE generation = $4
RETURNING identity, generation, position, probe_id, probe_events, (SELECT events FROM connhost_executions WHERE id = $1)`,
			probeID, probeID, probeEvents, int64(r.row.generation)))
		if errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO connhost_restores (generation, restored_position, witnessed_position, accepted_by, reason, executions, sessions, unnamed_sessions)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, int64(next), int64(r.restored), int64(r.position), acc.By, acc.Reason,
			len(rep.Executions), len(rep.Sessions), rep.Unnamed); err != nil {
			return err
		}
		// The restored tables may hold console sessions signed out after
		// the dump was taken: everyone signs in again.
		if _, err := tx.Exec(ctx, `UPDATE connhost_console_sessions SET revoked_ns = $1 WHERE revoked_ns IS NULL`, d.opts.Now().UnixNano()); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	var de *ledger.DamageError
	if errors.As(err, &de) {
		return rep, fmt.Errorf("%w: another process accepted a restore of this ledger meanwhile (or its tables went): run accept-restore again", ledger.ErrConflict)
	}
	if err != nil {
		return rep, fmt.Errorf("pgledger: record the accepted restore: %w", err)
	}
	for i := range touched {
		touched[i].Position = row.position
	}
	d.wit = &witness.File{Version: witness.Version, Backend: witness.BackendPostgres, Identity: row.identity,
		Generation: row.generation, Position: row.position, Probe: row.probe, Horizon: r.row.position, UpdatedAt: d.opts.Now().UTC()}
	d.wit.Note(touched, d.opts.WitnessSessions)
	merged, err := witness.Merge(d.opts.WitnessPath, *d.wit, d.opts.WitnessSessions)
	if err != nil {
		return rep, fmt.Errorf("pgledger: %w", err)
	}
	d.wit = &merged
	d.frozen = false
	d.dirty.Store(false)
	rep.Accepted, rep.Generation = true, row.generation
	d.opts.Logger.Warn("pgledger: accepted a restored ledger", "database", d.name, "identity", d.identity, "generation", row.generation,
		"restored_position", r.restored, "witnessed_position", r.position,
		"executions_fenced", len(rep.Executions), "sessions_fenced", len(rep.Sessions), "unnamed_sessions", rep.Unnamed, "by", acc.By)
	return rep, nil
}
