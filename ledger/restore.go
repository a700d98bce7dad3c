package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/connhost/connhost/ledger/internal/witness"
)

// Accepting a restore. A ledger restored from a backup (or a database
// rolled back, or a directory copied back) is behind what the deployment
// acknowledged: calls the backup holds unfinished may have been approved,
// dispatched and applied since, and calls made after the backup are not in
// it at all, so a runtime that sends one again would run it a second time.
// Open refuses such a ledger; AcceptRestore is the operator's deliberate
// act of using it anyway. It fences what the backup may have forgotten:
//
//   - every execution the backup holds unfinished (awaiting approval,
//     approved, dispatched, waiting for a retry) becomes recovery_required,
//     marked uncertain: its later history is lost, and only an operator
//     who checked the provider may say it ran (resolve --applied), did not
//     and may run (--not-applied --retry; a call never approved cannot),
//     or must not (--abandon). Reads are left alone (rule 9).
//   - every session the witness saw written after the backup's position
//     gets a recovery_required record of its own (tool connhost.restore),
//     which fences the session: a call of it that the backup does not know
//     is refused as fenced instead of running again, until an operator
//     resolves the record once the session's calls are reconciled.
//
// Then the ledger starts a new generation, which its mark and witness
// record: a copy from before the acceptance is behind them.

// RestoreAcceptance is an operator's acceptance of a restored ledger (see
// AcceptRestore).
type RestoreAcceptance struct {
	// By and Reason are recorded with every fence; both are required.
	By, Reason string
	// Witnesses are more witness files whose sessions are fenced too: the
	// witnesses of the other processes that wrote to the ledger (every
	// node of a fleet keeps its own). A witness of another ledger is
	// refused.
	Witnesses []string
	// Unnamed accepts the restore even where no witness can name every
	// session written after the backup's position (the backup is older
	// than the oldest session a witness remembers, or there is no witness
	// at all): calls of those sessions that the backup does not know are
	// not fenced, and would run again if a runtime sent them.
	Unnamed bool
}

// RestoreReport is what AcceptRestore found and fenced.
type RestoreReport struct {
	// Accepted is false when the ledger was not behind anything: nothing
	// was written.
	Accepted bool `json:"accepted"`
	// Ledger names the ledger (its directory, or its database).
	Ledger   string `json:"ledger"`
	Identity string `json:"identity"`
	// Behind says, for people, what the ledger was behind.
	Behind []string `json:"behind,omitempty"`
	// RestoredPosition is what the restored ledger holds, WitnessedPosition
	// what the mark or witness had seen (both in the generation the backup
	// belongs to); Generation is the ledger's generation after the
	// acceptance.
	RestoredPosition  uint64 `json:"restored_position"`
	WitnessedPosition uint64 `json:"witnessed_position"`
	Generation        uint64 `json:"generation"`
	// Executions are the unfinished executions fenced; Sessions the
	// sessions fenced by a record of their own.
	Executions []FencedExecution `json:"executions"`
	Sessions   []FencedSession   `json:"sessions"`
	// Unnamed is set when no witness could name every session written
	// after the backup (RestoreAcceptance.Unnamed allowed it).
	Unnamed bool `json:"unnamed_sessions,omitempty"`
	// Witnesses are the witness files whose sessions were fenced.
	Witnesses []string `json:"witnesses,omitempty"`
}

// FencedExecution is an unfinished execution an accepted restore made
// recovery_required.
type FencedExecution struct {
	ID        string `json:"execution_id"`
	Namespace string `json:"namespace"`
	SessionID string `json:"session_id"`
	Tool      string `json:"tool"`
	// Was is its state in the restored ledger.
	Was State `json:"was"`
}

// FencedSession is a session an accepted restore fenced with a record of
// its own (ExecutionID), because a witness saw it written after the
// backup's position (LastWrite).
type FencedSession struct {
	Namespace   string `json:"namespace"`
	SessionID   string `json:"session_id"`
	ExecutionID string `json:"execution_id"`
	LastWrite   uint64 `json:"last_write"`
}

// ErrUnnamedSessions: AcceptRestore found no witness that names every
// session written after the backup's position, and was not told to accept
// that (RestoreAcceptance.Unnamed). Nothing was written.
var ErrUnnamedSessions = errors.New("ledger: sessions written after the backup cannot be named")

// RestoreConnector and RestoreOperation name the records that fence a
// session after an accepted restore.
const (
	RestoreConnector = "connhost"
	RestoreOperation = "restore"
)

// DecisionRestoreAccepted is the decision of the events an accepted
// restore writes.
const DecisionRestoreAccepted = "restore_accepted"

// RestorePlan is what FenceRestore fences. The backends build it from
// what they found and the witnesses; see AcceptRestore.
type RestorePlan struct {
	// Generation is the generation the acceptance starts; the session
	// fences are named by it, so fencing again (after a crash, or a node's
	// own witness at its next Open) finds them made.
	Generation uint64
	// RestoredPosition and WitnessedPosition are recorded in the fences.
	RestoredPosition, WitnessedPosition uint64
	// Pending fences every unfinished execution.
	Pending bool
	// Sessions are the sessions to fence, with their last write.
	Sessions   []FencedSession
	By, Reason string
	Now        time.Time
}

// FenceRestore fences what plan says in led (see AcceptRestore) and
// returns what it fenced. It may run again: an execution already
// recovery_required and a session already fenced for plan.Generation are
// left as they are (and not reported).
func FenceRestore(ctx context.Context, led Ledger, plan RestorePlan) ([]FencedExecution, []FencedSession, error) {
	var execs []FencedExecution
	if plan.Pending {
		var pending []Record
		if err := led.Pending(ctx, func(r Record) error {
			pending = append(pending, r)
			return nil
		}); err != nil {
			return nil, nil, err
		}
		for _, r := range pending {
			if r.Effect == EffectRead || r.State == StateRecoveryRequired || r.State.Terminal() {
				continue
			}
			t := Transition{From: r.State, FromAttempt: r.Attempt, To: StateRecoveryRequired, Attempt: r.Attempt, Uncertain: true,
				Event: Event{Decision: DecisionRestoreAccepted, Actor: plan.By, Reason: plan.Reason, Evidence: fmt.Sprintf(
					"the ledger was restored from a backup at position %d (the deployment had seen %d): the call was %s there, and what happened to it after the backup is unknown",
					plan.RestoredPosition, plan.WitnessedPosition, r.State)}}
			if _, err := led.Apply(ctx, r.ID, t); err != nil {
				return execs, nil, fmt.Errorf("ledger: fence execution[%s]: %w", r.ID, err)
			}
			execs = append(execs, FencedExecution{ID: r.ID, Namespace: r.Namespace, SessionID: r.SessionID, Tool: r.Connector + "." + r.Operation, Was: r.State})
		}
	}
	var sessions []FencedSession
	for _, s := range plan.Sessions {
		rec, ev := restoreFence(plan, s)
		_, err := led.Create(ctx, rec, ev)
		switch {
		case errors.Is(err, ErrExists), errors.Is(err, ErrPruned):
			continue
		case err != nil:
			return execs, sessions, fmt.Errorf("ledger: fence session %q: %w", s.SessionID, err)
		}
		s.ExecutionID = rec.ID
		sessions = append(sessions, s)
	}
	return execs, sessions, nil
}

// restoreFence returns the record that fences session s after the restore
// of plan, and its first event.
func restoreFence(plan RestorePlan, s FencedSession) (Record, Event) {
	toolCall := fmt.Sprintf("connhost:restore:%d", plan.Generation)
	args, _ := json.Marshal(map[string]uint64{
		"generation": plan.Generation, "restored_position": plan.RestoredPosition,
		"witnessed_position": plan.WitnessedPosition, "last_write": s.LastWrite,
	})
	sum := sha256.Sum256(args)
	id := ExecutionID(s.Namespace, s.SessionID, toolCall)
	now := plan.Now.UTC()
	rec := Record{
		Version: RecordVersion, ID: id, Namespace: s.Namespace, SessionID: s.SessionID, ToolCallID: toolCall,
		Connector: RestoreConnector, Operation: RestoreOperation, Effect: "external", Policy: "manual", PolicyVersion: "restore",
		Args: args, ArgsDigest: hex.EncodeToString(sum[:]), State: StateRecoveryRequired, MaxAttempts: 1,
		CreatedAt: now, UpdatedAt: now,
	}
	ev := Event{Decision: DecisionRestoreAccepted, Actor: plan.By, Reason: plan.Reason, Evidence: fmt.Sprintf(
		"the ledger was restored from a backup at position %d (the deployment had seen %d), and a witness saw this session written at position %d: "+
			"calls of it made after the backup are unknown to the ledger, so the session is fenced until an operator has reconciled them with the providers and resolves this record",
		plan.RestoredPosition, plan.WitnessedPosition, s.LastWrite)}
	return rec, ev
}

// fencedSessions returns the sessions a witness names as sessions to fence.
func fencedSessions(ss []witness.Session) []FencedSession {
	out := make([]FencedSession, len(ss))
	for i, s := range ss {
		out[i] = FencedSession{Namespace: s.Namespace, SessionID: s.ID, LastWrite: s.Position}
	}
	return out
}

// restoreFound is what an accepting Open found a ledger behind: the
// highest generation and position a mark or witness had seen, and the
// sentences that say so.
type restoreFound struct {
	what                 []string
	generation, position uint64
}

// acceptance is an accepted restore as the ledger keeps it
// (m/restore/<generation>).
type acceptance struct {
	Generation        uint64    `json:"generation"`
	RestoredPosition  uint64    `json:"restored_position"`
	WitnessedPosition uint64    `json:"witnessed_position"`
	By                string    `json:"by"`
	Reason            string    `json:"reason"`
	At                time.Time `json:"at"`
	Executions        int       `json:"executions"`
	Sessions          int       `json:"sessions"`
	Unnamed           bool      `json:"unnamed_sessions,omitempty"`
}

// readAcceptance reads the accepted restore that started generation gen.
func (d *DB) readAcceptance(gen uint64) (acceptance, error) {
	v, closer, err := d.db.Get(restoreKey(gen))
	if err != nil {
		return acceptance{}, fmt.Errorf("ledger: read the accepted restore of generation %d: %w", gen, err)
	}
	defer closer.Close()
	var a acceptance
	if err := json.Unmarshal(v, &a); err != nil {
		return acceptance{}, fmt.Errorf("%w: %s: the accepted restore of generation %d: %v", ErrCorrupt, d.opts.Dir, gen, err)
	}
	return a, nil
}

// AcceptRestore opens the Pebble ledger in opts.Dir although it is behind
// its mark or its witness (a backup restored on purpose), fences what the
// backup may have forgotten (see the comment at the top of this file),
// starts a new generation and brings the mark and the witness up to date,
// and closes the ledger. Every other damage is refused as Open refuses it,
// and so is a ledger that is not the one its mark or witness names. A
// ledger that is not behind anything is left as it is (Accepted false).
//
// Without a witness that names every session written after the backup's
// position, it refuses with ErrUnnamedSessions unless acc.Unnamed. What
// no witness can see is not fenced: writes after the witness's last update
// (at most Options.MarkInterval before the loss), and a witness restored
// together with the ledger. See RATIONALE.md, "Why does accepting a
// restore fence, not trust?".
func AcceptRestore(ctx context.Context, opts Options, acc RestoreAcceptance) (RestoreReport, error) {
	if acc.By == "" || acc.Reason == "" {
		return RestoreReport{}, fmt.Errorf("%w: accepting a restore needs the operator's name and a reason", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return RestoreReport{}, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return RestoreReport{}, err
	}
	return acceptRestore(ctx, opts, acc)
}

// acceptRestore is AcceptRestore after its checks; opts.replaced forces
// the acceptance (RestoreBackup).
func acceptRestore(ctx context.Context, opts Options, acc RestoreAcceptance) (RestoreReport, error) {
	opts.Create, opts.accepting = CreateNever, true
	d, err := open(opts)
	if err != nil {
		return RestoreReport{}, err
	}
	rep, err := d.acceptRestore(ctx, acc)
	return rep, errors.Join(err, d.Close())
}

func (d *DB) acceptRestore(ctx context.Context, acc RestoreAcceptance) (RestoreReport, error) {
	rep := RestoreReport{Ledger: d.opts.Dir, Identity: d.identity, RestoredPosition: d.stored, Generation: d.generation,
		Executions: []FencedExecution{}, Sessions: []FencedSession{}}
	r := d.restored
	if r == nil {
		return rep, nil
	}
	rep.Behind, rep.WitnessedPosition = r.what, r.position
	var ws []*witness.File
	if d.found != nil {
		ws = append(ws, d.found)
		rep.Witnesses = append(rep.Witnesses, d.opts.WitnessPath)
	}
	for _, path := range acc.Witnesses {
		w, err := witness.Read(path)
		switch {
		case err != nil:
			return rep, fmt.Errorf("ledger: %w", err)
		case w == nil:
			return rep, fmt.Errorf("%w: witness %s: no such file", ErrInvalid, path)
		case w.Identity != d.identity || w.Backend != witness.BackendPebble:
			return rep, fmt.Errorf("%w: witness %s names ledger %s (%s), not this one (%s)", ErrInvalid, path, w.Identity, w.Backend, d.identity)
		}
		ws = append(ws, w)
		rep.Witnesses = append(rep.Witnesses, path)
	}
	named, complete, err := witness.ToFence(ws, d.generation, d.stored, func(gen uint64) (uint64, error) {
		a, err := d.readAcceptance(gen)
		return a.RestoredPosition, err
	})
	if err != nil {
		return rep, err
	}
	sessions := fencedSessions(named)
	if !complete && !acc.Unnamed {
		why := "there is no witness"
		if len(ws) > 0 {
			why = "the backup is older than the oldest session the witnesses remember"
		}
		return rep, fmt.Errorf("%w: the restored ledger holds %d writes, and %s: calls of sessions written after the backup that no witness names would run again if a runtime sent them; give the other writers' witnesses, or accept that explicitly",
			ErrUnnamedSessions, d.stored, why)
	}
	rep.Unnamed = !complete
	next := d.generation + 1
	plan := RestorePlan{Generation: next, RestoredPosition: d.stored, WitnessedPosition: r.position, Pending: true,
		Sessions: sessions, By: acc.By, Reason: acc.Reason, Now: d.opts.Now()}
	rep.Executions, rep.Sessions, err = FenceRestore(ctx, d, plan)
	if err != nil {
		return rep, err
	}
	if rep.Executions == nil {
		rep.Executions = []FencedExecution{}
	}
	if rep.Sessions == nil {
		rep.Sessions = []FencedSession{}
	}
	a, _ := json.Marshal(acceptance{Generation: next, RestoredPosition: d.stored, WitnessedPosition: r.position, By: acc.By, Reason: acc.Reason,
		At: d.opts.Now().UTC(), Executions: len(rep.Executions), Sessions: len(rep.Sessions), Unnamed: rep.Unnamed})
	d.markMu.Lock()
	defer d.markMu.Unlock()
	b := d.db.NewBatch()
	_ = b.Set(restoreKey(next), a, nil)
	_ = b.Set(generationKey, encodeHWM(next), nil)
	// The backup may hold console sessions signed out since it was taken.
	if err := d.revokeConsoleAll(b, d.opts.Now()); err != nil {
		_ = b.Close()
		return rep, err
	}
	err = b.Commit(pebble.Sync)
	_ = b.Close()
	if err != nil {
		return rep, fmt.Errorf("ledger: record the accepted restore: %w", err)
	}
	d.writes.Add(1)
	d.generation = next
	d.frozen = false
	rep.Generation = next
	// The witness starts over: every session written in the new
	// generation is after the restored position.
	if d.wit != nil {
		d.wit = &witness.File{Version: witness.Version, Backend: witness.BackendPebble, Identity: d.identity, Generation: next, Horizon: plan.RestoredPosition}
		d.inWitness = ^uint64(0)
	}
	n := d.writes.Load()
	if err := d.db.Set(hwmKey, encodeHWM(n), d.wo); err != nil {
		return rep, fmt.Errorf("ledger: write high-water mark: %w", err)
	}
	d.stored = n
	if err := d.writeMark(n); err != nil {
		return rep, err
	}
	if d.wit != nil {
		if err := d.writeWitness(n); err != nil {
			return rep, err
		}
	}
	rep.Accepted = true
	d.opts.Logger.Warn("ledger: accepted a restored ledger", "dir", d.opts.Dir, "identity", d.identity, "generation", next,
		"restored_position", plan.RestoredPosition, "witnessed_position", plan.WitnessedPosition,
		"executions_fenced", len(rep.Executions), "sessions_fenced", len(rep.Sessions), "unnamed_sessions", rep.Unnamed, "by", acc.By)
	return rep, nil
}

// adoptRestore brings a witness of an older generation than the ledger up
// to date: a restore was accepted without it (another process's witness
// was given, or a crash stopped the acceptance before it wrote this one),
// so the sessions it saw written after the restored position are fenced
// now, before Open returns.
func (d *DB) adoptRestore(ctx context.Context) error {
	w := d.adopt
	a, err := d.readAcceptance(w.Generation + 1)
	if err != nil {
		return err
	}
	after, complete := w.After(a.RestoredPosition)
	_, fenced, err := FenceRestore(ctx, d, RestorePlan{Generation: w.Generation + 1, RestoredPosition: a.RestoredPosition,
		WitnessedPosition: max(a.WitnessedPosition, w.Position), Sessions: fencedSessions(after), By: a.By,
		Reason: strings.TrimSpace(a.Reason + " (fenced from the witness " + d.opts.WitnessPath + " when the ledger was next opened)"), Now: d.opts.Now()})
	if err != nil {
		return err
	}
	d.markMu.Lock()
	defer d.markMu.Unlock()
	n := d.writes.Load()
	if n != d.stored {
		if err := d.db.Set(hwmKey, encodeHWM(n), d.wo); err != nil {
			return fmt.Errorf("ledger: write high-water mark: %w", err)
		}
		d.stored = n
		if err := d.writeMark(n); err != nil {
			return err
		}
	}
	if err := d.writeWitness(n); err != nil {
		return err
	}
	d.opts.Logger.Warn("ledger: a restore of this ledger was accepted since its witness was written; fenced the sessions the witness saw written after it",
		"dir", d.opts.Dir, "witness", d.opts.WitnessPath, "generation", d.generation, "restored_position", a.RestoredPosition,
		"sessions_fenced", len(fenced), "all_named", complete)
	d.adopt = nil
	return nil
}
