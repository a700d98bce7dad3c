// Package crashtest runs the fault-injection matrix of docs/design.md with real
// process kills: for every crash point × operation × approval variant (a
// "cell") it runs a tool call through separate connhost processes the way
// an agent runtime would, with CONNHOST_CRASH_AT set so that one process
// SIGKILLs itself at the point, restarts connhost on the same data
// directory without the variable (opening runs recovery), drives the call
// to a final status and judges what the provider saw against the
// operation's declared recovery policy.
//
// It is used by the package's test suite (against `connhost sandbox` and a
// real Mailpit) and by `connhost crashtest` (against in-process emulators).
// Run is not safe for concurrent use with another Run on the same
// provider: effects are counted as a before/after difference.
package crashtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/manifests"
)

// Options configures Run.
type Options struct {
	// Binary is the path of a built connhost binary. Required.
	Binary string
	// Manifest is the connector's manifest file. Required. Run never
	// modifies it: each cell gets a copy (see Gated).
	Manifest string
	// Modules is the directory holding the connector's module under the
	// manifest's module name. Required.
	Modules string
	// Config is a connhost.toml giving the connector its config (provider
	// URLs, keys) and allow_http for the provider's origin. Required.
	Config string
	// Operations are the operations to run. The default value is every
	// operation of the manifest.
	Operations []string
	// Args returns the sample arguments of an operation. It is called once
	// per cell, before the effect count is taken, so it may create the
	// provider objects the arguments name. Required.
	Args func(ctx context.Context, operation string) (json.RawMessage, error)
	// Effects counts the effects of an operation at the provider so far
	// (for the shipped connectors: PaymentIntents + Refunds + Messages,
	// whatever the operation). Only its increase over a cell counts, so a
	// count of what a delete removes may run downwards from any start
	// (see ProbeConfig). Required.
	Effects func(ctx context.Context, operation string) (int, error)
	// CheckReceipt checks the receipt of a succeeded external call
	// against the provider, the empty receipt included: it returns "" when
	// the receipt is what the call's effect left behind, else what is
	// wrong with it; an error means the provider could not be asked. The
	// default value skips the check.
	CheckReceipt func(ctx context.Context, operation, receipt string) (problem string, err error)
	// Preflight runs every operation once, without a crash and ungated,
	// before the first cell, and stops the run with an error wrapping
	// ErrPreflight when a call does not succeed: a connector that cannot
	// work at all (a refused credential, a wrong URL) fails every cell
	// the same way, slowly. The default value is false.
	Preflight bool
	// Points are the crash points. The default value is crash.Points.
	Points []string
	// Variants are the approval variants of external operations: true
	// runs the operation with requires_approval = true, false without.
	// The default value is both, in the order gated, ungated.
	Variants []bool
	// GatedReads also runs read operations gated. The default value is
	// false: a read is run ungated only (approval adds nothing to judge).
	GatedReads bool
	// WorkDir is where cell directories are created. The default value is
	// a new temporary directory, removed when Run returns.
	WorkDir string
	// ProcessTimeout bounds every connhost process. The default value is
	// 2 minutes; a process that outlives it is killed (with its process
	// group) and the cell fails.
	ProcessTimeout time.Duration
	// LoseUnsynced runs every connhost process so that a kill loses the
	// ledger writes not yet synced, as a power loss would
	// (crash.LoseUnsyncedEnv): lazily written outcomes are then lost at
	// the kill, and recovery must re-derive them. The default value is
	// false.
	LoseUnsynced bool
	// Ledger, when set, runs every cell on a shared ledger (PostgreSQL)
	// instead of the Pebble ledger in the cell's data directory: it is
	// called once per cell and returns the connection string of a fresh,
	// empty database for it. Every process of the cell gets it as
	// --ledger, with one --node for the cell, so that a restarted process
	// is the same node under a new epoch and takes the killed one's calls
	// over at once. The default value is nil: Pebble.
	Ledger func(ctx context.Context) (dsn string, err error)
	// Progress, when set, is called after every cell.
	Progress func(Row)
	// OnCell, when set, is called after every cell with the number of
	// cells done and the number the run holds.
	OnCell func(done, total int, row Row)
	// ProviderName says which provider the connector talks to, for the
	// report: every row carries it. The default value is "".
	ProviderName string
	// Receipts, when set, checks that the receipt of every succeeded
	// external call names that call's own effect, not another object
	// that exists (another call's, one made before the cell). The
	// default value checks only what CheckReceipt checks.
	Receipts ReceiptOwner
	// Removes, when set, reports whether an operation's effect removes
	// an object (a delete): two calls with equal arguments then make one
	// effect, and the row PointEqualArgs is n/a for it. The default value
	// is false for every operation.
	Removes func(operation string) bool
	// Prover, when set, repeats requests at the provider, and adds the
	// row PointProviderKey for every idempotent-retry operation of a
	// manifest whose [provider] declares a key. The default value is nil.
	Prover KeyProver
	// Clock, when set, moves the provider's clock, and adds the rows
	// PointKeyKept and PointKeyExpired for every idempotent-retry
	// operation. The default value is nil: the rows are n/a.
	Clock Clock
	// Hold, when set, adds the row PointInFlight for every external
	// operation (it is skipped otherwise): the provider holds the call's
	// request, the process running it is SIGKILLed, the call is re-driven
	// for longer than the host's whole retry budget while the request is
	// still held, and only then does the request land. The row passes if
	// the call never answered failed and the provider saw one effect.
	Hold Holder
}

// PointInFlight names the row in which the provider still processes the
// killed attempt (see Options.Hold). It is not a crash point: the process
// is killed from outside while its request is held.
const PointInFlight = "in_flight"

// PointEqualArgs names the row of two different calls with equal
// arguments: the same session, two tool-call ids, no crash. Each must
// make an effect of its own — a connector whose key is derived from the
// arguments, or a provider that deduplicates by an argument, merges them
// — except where the operation's duplicate_window says otherwise
// (on_duplicate = "answer": the second is answered with the first's
// outcome; "hold": it waits for a reviewer, who here approves it). It
// runs for every external operation that does not remove an object (see
// Options.Removes).
const PointEqualArgs = "equal_args"

// PointKeyKept and PointKeyExpired name the rows of the provider's key
// retention, for an idempotent-retry operation and a provider whose
// clock moves (Options.Clock): the process is killed after the connector
// returned (the effect applied, its outcome unknown), then the provider's
// clock and the host's move ahead, just short of the retention the
// manifest declares ([provider] idempotency_retention, at most the host's
// default 24h) in key_kept, just past it in key_expired, and the call is
// driven to its end. key_kept: the key is re-sent and the provider, which
// must still know it, answers with the one effect; a provider that keeps
// its keys for less than the manifest says makes a second. key_expired:
// the key is never re-sent; reconcile finds the effect (when the module
// exports it) or the call waits for an operator.
const (
	PointKeyKept    = "key_kept"
	PointKeyExpired = "key_expired"
)

// PointProviderKey names the row that proves the manifest's [provider]
// claim, for an idempotent-retry operation and a provider whose requests
// the matrix can repeat (Options.Prover): one call without a crash, then
// the request that took its effect is sent again as it was — the
// provider must make no second effect — and with the declared key (a
// header, or a body field) changed — it must make one. The first shows
// that it deduplicates, the second that it deduplicates by that key and
// not by something else (the arguments), which would merge two genuine
// calls. It runs ungated only (approval changes nothing the provider
// sees).
const PointProviderKey = "provider_key"

// KeyProver repeats a call's effectful request at the provider to prove
// the manifest's [provider] claim (see PointProviderKey).
type KeyProver interface {
	// CaptureNext keeps the next request of operation that takes its
	// effect and that the provider answers 2xx.
	CaptureNext(operation string) error
	// ProveKey sends the captured request again, as it was and with the
	// key pv declares changed, and returns "" when the provider made no
	// second effect for the first and one for the second, else what it
	// did instead. An error means the provider could not be asked.
	ProveKey(ctx context.Context, operation string, pv manifests.Provider) (problem string, err error)
}

// DefaultKeyRetention is the host's default key retention
// (host.Options.KeyRetention), which a manifest's [provider]
// idempotency_retention may only shorten.
const DefaultKeyRetention = 24 * time.Hour

// Clock moves a provider's clock, as an emulator's control API does.
type Clock interface {
	// Advance moves the provider's clock d ahead.
	Advance(ctx context.Context, d time.Duration) error
}

// Rows are the rows that are no crash point, in the order they run after
// an operation's crash points: each is asked for by its name in
// Options.Points like a point.
var Rows = []string{PointInFlight, PointEqualArgs, PointKeyKept, PointKeyExpired, PointProviderKey}

// ReceiptOwner knows which objects the calls of a cell made: the
// requests that take the operation's effect and what the provider
// answered them. A receipt that names an existing object the cell's call
// did not make is a wrong receipt (a reconcile that finds another
// object; a provider that answers with an object of another call).
type ReceiptOwner interface {
	// StartCell forgets what earlier cells made: a cell of operation
	// begins.
	StartCell(ctx context.Context, operation string) error
	// OwnReceipt returns "" when receipt names an object a call of the
	// cell made (or, for a delete, removed), else what is wrong with it.
	// An error means the provider could not be asked.
	OwnReceipt(ctx context.Context, operation, receipt string) (problem string, err error)
}

// Errors of Run and of the providers it asks.
var (
	// ErrCannotHold is what Holder.Arm returns for an operation whose
	// request the provider cannot hold; the in-flight row is then n/a.
	ErrCannotHold = errors.New("crashtest: the provider cannot hold this operation's request")
	// ErrPreflight: with Options.Preflight, an operation's call did not
	// succeed without any crash, so no cell could tell anything.
	ErrPreflight = errors.New("crashtest: preflight call did not succeed")
	// ErrNoHeldAnswer is what HeldAnswerer.HeldAnswer returns when the
	// provider does not tell what it answered the released request; the
	// row is then judged as with a Holder that cannot tell.
	ErrNoHeldAnswer = errors.New("crashtest: the provider does not tell what it answered the held request")
)

// Holder makes a provider hold a request it has received, as a provider
// still processing it does.
type Holder interface {
	// Arm holds the next request of the operation, received but not yet
	// applied, or returns ErrCannotHold.
	Arm(ctx context.Context, operation string) error
	// WaitHeld returns once a request is held.
	WaitHeld(ctx context.Context) error
	// Release lets held requests go on and take effect, whether or not
	// their client is still there.
	Release(ctx context.Context) error
}

// HeldAnswerer is a Holder that can tell what the provider answered the
// released request. With it the in-flight row is judged by the effects
// after the held request was answered, so an effect that appears while
// the request is held (the re-dispatch's, which the held request then
// meets as a duplicate the provider refuses) is no failure by itself;
// without it the row cannot tell that effect from the held request's own,
// and fails it.
type HeldAnswerer interface {
	Holder
	// HeldAnswer waits, after Release, until the provider has answered the
	// released request and returns that answer's HTTP status.
	HeldAnswer(ctx context.Context) (status int, err error)
}

// Row is the outcome of one cell.
type Row struct {
	Point     string `json:"point"`
	Operation string `json:"operation"`
	Policy    string `json:"policy"`
	Effect    string `json:"effect"`
	Gated     bool   `json:"gated"`
	// Reached is false when no process died at the point: the point is
	// not on this operation's path (the cell is "n/a").
	Reached bool `json:"reached"`
	// Kills is the number of processes that died by SIGKILL.
	Kills int `json:"kills"`
	// Decision is the first recovery decision of the audit trail
	// (recover_retry, reconciled_applied, manual_policy, …) or "none".
	Decision string `json:"decision"`
	// Effects is the number of effects the provider gained.
	Effects int    `json:"effects"`
	Final   string `json:"final"`
	Receipt string `json:"receipt,omitempty"`
	Attempt int    `json:"attempt"`
	Pass    bool   `json:"pass"`
	Problem string `json:"problem,omitempty"`
	// Provider is Options.ProviderName: which provider the cell ran
	// against.
	Provider string `json:"provider,omitempty"`
	// ConnectorError is the error the connector reported for the call
	// (the last attempt's), when it reported one.
	ConnectorError string `json:"connector_error,omitempty"`
	// Duplicate marks an external effect beyond the policy's promise.
	Duplicate bool `json:"duplicate,omitempty"`
	// Lost marks a call that ended neither terminal nor
	// recovery_required.
	Lost bool `json:"lost,omitempty"`
	// AppliedButFailed marks a call answered failed (or cancelled,
	// expired, rejected: "nothing happened") whose effect exists at the
	// provider: a runtime that believes it issues the call again.
	AppliedButFailed bool `json:"applied_but_failed,omitempty"`
	// SucceededWithoutEffect marks a call answered succeeded of which the
	// provider holds no effect (or, with two calls, fewer effects than
	// calls that succeeded): its caller believes in an effect that is not
	// there.
	SucceededWithoutEffect bool `json:"succeeded_without_effect,omitempty"`
	// EffectUndone marks a cell after which the provider holds fewer
	// effects than before it (an object made earlier went away; for a
	// delete, a deleted object came back).
	EffectUndone bool `json:"effect_undone,omitempty"`
	// WrongReceipt marks a succeeded call whose receipt names an object
	// that exists but is not this call's effect (another call's, an
	// object that was there before).
	WrongReceipt bool `json:"wrong_receipt,omitempty"`
	// ProvenKey is, in a provider_key row that passed, the key the
	// provider was shown to deduplicate by ("header Idempotency-Key").
	ProvenKey string `json:"proven_key,omitempty"`
	// HeldAnswer is, in the in-flight row of a provider that tells
	// (HeldAnswerer), the HTTP status the provider answered the held
	// request once it was released.
	HeldAnswer int `json:"held_answer,omitempty"`
	// Trail is, for a cell that failed, its execution's audit trail as
	// the ledger recorded it, one line per event (time since the first,
	// attempt, transition, decision, actor, evidence): what each attempt
	// met, where the table shows only the last.
	Trail []string `json:"trail,omitempty"`
}

// Totals sums a report.
type Totals struct {
	Cells int `json:"cells"`
	NA    int `json:"not_applicable"`
	// Kills counts the processes killed (by their crash point, or from
	// outside in the in-flight row) whose call was then driven to its end:
	// one per reached cell, two in an after_reconcile_return cell, which
	// kills once after the connector returned and once after reconcile.
	Kills int `json:"kills_survived"`
	// KilledCells counts the cells in which a process was killed.
	KilledCells int `json:"killed_cells"`
	Failed      int `json:"failed"`
	// Every cell that failed counts in at least one of the classes
	// below, or in Other.
	Duplicates int `json:"duplicates_beyond_policy"`
	Lost       int `json:"executions_lost"`
	// AppliedButFailed, SucceededWithoutEffect, EffectsUndone and
	// WrongReceipts count the rows so marked (see Row).
	AppliedButFailed       int `json:"applied_but_failed"`
	SucceededWithoutEffect int `json:"succeeded_without_effect"`
	EffectsUndone          int `json:"effects_undone"`
	WrongReceipts          int `json:"receipts_naming_another_object"`
	// Other counts the failed cells in none of the classes above (a
	// wrong recovery decision, a manual call re-executed, a second
	// answer that differs from the first, …): their rows say why.
	Other int `json:"other_failures"`
}

// Report is the matrix of one connector.
type Report struct {
	Connector string `json:"connector"`
	Rows      []Row  `json:"rows"`
	Totals    Totals `json:"totals"`
}

// OK reports whether every cell passed.
func (r Report) OK() bool { return r.Totals.Failed == 0 }

// Failed returns the failing rows.
func (r Report) Failed() []Row {
	var out []Row
	for _, row := range r.Rows {
		if !row.Pass {
			out = append(out, row)
		}
	}
	return out
}

// WriteTable renders the report as an aligned text table and totals.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tOPERATION\tPOLICY\tGATED\tDECISION\tEFFECTS\tFINAL\tRESULT\tPROVIDER\tPROBLEM")
	for _, row := range r.Rows {
		res := "pass"
		switch {
		case !row.Pass:
			res = "FAIL"
		case !row.Reached:
			res = "n/a"
		}
		gated := "no"
		if row.Gated {
			gated = "yes"
		}
		policy := row.Policy
		if policy == "" {
			policy = row.Effect
		}
		problem := row.Problem
		if !row.Pass && row.ConnectorError != "" {
			problem += "; the connector said: " + row.ConnectorError
		}
		// A connector's error may span lines (a provider's error page):
		// the table keeps one row per cell.
		problem = oneLine(problem)
		fmt.Fprintf(tw, "%s\t%s.%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", row.Point, r.Connector, row.Operation, policy,
			gated, row.Decision, row.Effects, row.Final, res, orDash(row.Provider), problem)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	t := r.Totals
	_, err := fmt.Fprintf(w, "cells %d (n/a %d), kills survived %d in %d cells, failed %d, duplicates beyond policy %d, executions lost %d, "+
		"applied but answered failed %d, succeeded without effect %d, effects undone %d, receipts naming another object %d, other failures %d\n",
		t.Cells, t.NA, t.Kills, t.KilledCells, t.Failed, t.Duplicates, t.Lost,
		t.AppliedButFailed, t.SucceededWithoutEffect, t.EffectsUndone, t.WrongReceipts, t.Other)
	for _, row := range r.Rows {
		if row.Pass || len(row.Trail) == 0 || err != nil {
			continue
		}
		gated := ""
		if row.Gated {
			gated = ", gated"
		}
		_, err = fmt.Fprintf(w, "trail of %s.%s at %s%s:\n", r.Connector, row.Operation, row.Point, gated)
		for _, l := range row.Trail {
			if err == nil {
				_, err = fmt.Fprintf(w, "  %s\n", oneLine(l))
			}
		}
	}
	return err
}

// oneLine folds s onto one line: line breaks and tabs (which would break
// the table's rows and columns) become single spaces.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// cellSpec is one cell to run.
type cellSpec struct {
	point string
	op    *manifests.Operation
	gated bool
}

// Run runs the matrix and returns its report. An error means the matrix
// could not run (bad options, a provider that does not answer, a connhost
// process that failed for another reason than the injected kill); a cell
// that breaks the policy is a failing Row, not an error.
func Run(ctx context.Context, o Options) (Report, error) {
	if err := o.validate(); err != nil {
		return Report{}, err
	}
	m, err := manifests.Load(o.Manifest)
	if err != nil {
		return Report{}, err
	}
	src, err := os.ReadFile(o.Manifest)
	if err != nil {
		return Report{}, fmt.Errorf("crashtest: %w", err)
	}
	if m.Connector.SHA256 == "" {
		// An unpinned manifest cannot load outside dev: pin the copies to
		// the module under test (the original stays untouched).
		d, err := fileDigest(m.ModulePath(o.Modules))
		if err != nil {
			return Report{}, fmt.Errorf("crashtest: module of %s: %w", o.Manifest, err)
		}
		if src, err = manifests.SetSHA256(src, d); err != nil {
			return Report{}, fmt.Errorf("crashtest: pin %s: %w", o.Manifest, err)
		}
	}
	if o.WorkDir == "" {
		dir, err := os.MkdirTemp("", "connhost-crashtest-")
		if err != nil {
			return Report{}, fmt.Errorf("crashtest: %w", err)
		}
		defer os.RemoveAll(dir)
		o.WorkDir = dir
	}
	if o.ProcessTimeout <= 0 {
		o.ProcessTimeout = 2 * time.Minute
	}
	points := o.Points
	if len(points) == 0 {
		points = crash.Points
	}
	variants := o.Variants
	if len(variants) == 0 {
		variants = []bool{true, false}
	}
	var ops []*manifests.Operation
	if len(o.Operations) == 0 {
		ops = m.Operations
	} else {
		for _, name := range o.Operations {
			op, ok := m.Operation(name)
			if !ok {
				return Report{}, fmt.Errorf("crashtest: connector %s has no operation %q", m.Connector.Name, name)
			}
			ops = append(ops, op)
		}
	}
	// Each cell's data directory is fresh; its processes load the
	// modules from the machine's compilation cache (--cache-dir's
	// default), compiled once for every cell.
	rep := Report{Connector: m.Connector.Name}
	total := countCells(o, ops, points, variants, m.Provider)
	// Every run has sessions (and so idempotency keys) of its own.
	var rb [6]byte
	_, _ = rand.Read(rb[:])
	runID := hex.EncodeToString(rb[:])
	if o.Preflight {
		if err := preflight(ctx, &o, m, src, ops, runID); err != nil {
			return rep, err
		}
	}
	n := 0
	for _, op := range ops {
		for _, gated := range variants {
			if gated && op.Effect == manifests.EffectRead && !o.GatedReads {
				continue
			}
			text, err := variant(src, op.Name, gated)
			if err != nil {
				return rep, err
			}
			// The effects of one call killed before its intent: what a
			// normal run leaves at the provider (0 for an operation the
			// provider refuses), the yardstick of the manual cells.
			var baseline *int
			rowPoints := o.rowPoints(op, points, gated, m.Provider)
			for _, point := range rowPoints {
				n++
				c := &cell{o: &o, runID: runID, spec: cellSpec{point: point, op: op, gated: gated}, connector: m.Connector.Name,
					dir: filepath.Join(o.WorkDir, fmt.Sprintf("cell-%03d", n)), manifest: text, baseline: baseline,
					retention: keyRetention(m), provider: m.Provider}
				row, err := c.run(ctx)
				if err != nil {
					return rep, fmt.Errorf("crashtest: cell %s × %s.%s gated=%t: %w", point, m.Connector.Name, op.Name, gated, err)
				}
				if point == crash.BeforeIntent && row.Reached && row.Pass {
					baseline = &row.Effects
				}
				row.Provider = o.ProviderName
				rep.add(row)
				if o.Progress != nil {
					o.Progress(row)
				}
				if o.OnCell != nil {
					o.OnCell(len(rep.Rows), total, row)
				}
			}
		}
	}
	return rep, nil
}

// preflight runs each operation once, ungated and without a crash, and
// fails with ErrPreflight, naming the connector's error, when one does
// not succeed.
func preflight(ctx context.Context, o *Options, m *manifests.Manifest, src []byte, ops []*manifests.Operation, runID string) error {
	for _, op := range ops {
		text, err := variant(src, op.Name, false)
		if err != nil {
			return err
		}
		c := &cell{o: o, runID: runID, spec: cellSpec{point: "preflight", op: op}, connector: m.Connector.Name,
			dir: filepath.Join(o.WorkDir, "preflight-"+op.Name), manifest: text}
		res, err := c.preflight(ctx)
		if err != nil {
			return fmt.Errorf("crashtest: preflight %s.%s: %w", m.Connector.Name, op.Name, err)
		}
		if res.Status == "succeeded" {
			continue
		}
		why := res.Error
		if res.Code != "" {
			why = res.Code + ": " + res.Detail
		}
		if why == "" {
			why = "no error reported"
		}
		return fmt.Errorf("%w: %s.%s with the sample arguments, before any crash, ended %s: %s; every cell would run into the same: fix the connector, its config or the arguments first",
			ErrPreflight, m.Connector.Name, op.Name, orDash(res.Status), oneLine(why))
	}
	return nil
}

// countCells is the number of cells Run runs for ops: the loop of Run,
// counted.
func countCells(o Options, ops []*manifests.Operation, points []string, variants []bool, pv manifests.Provider) int {
	n := 0
	for _, op := range ops {
		for _, gated := range variants {
			if gated && op.Effect == manifests.EffectRead && !o.GatedReads {
				continue
			}
			n += len(o.rowPoints(op, points, gated, pv))
		}
	}
	return n
}

// keyRetention is how long the host re-sends the key of an uncertain
// call of m: its declared idempotency_retention, at most the default.
func keyRetention(m *manifests.Manifest) time.Duration {
	if d := m.Provider.IdempotencyRetention; d > 0 && d < DefaultKeyRetention {
		return d
	}
	return DefaultKeyRetention
}

// rowPoints are the rows of op: the crash points, then the rows that are
// no crash point (in flight, equal arguments) where they apply and were
// asked for (Options.Points empty, or naming them).
func (o *Options) rowPoints(op *manifests.Operation, points []string, gated bool, pv manifests.Provider) []string {
	out := slices.DeleteFunc(slices.Clone(points), func(p string) bool { return slices.Contains(Rows, p) })
	asked := func(p string) bool { return len(o.Points) == 0 || slices.Contains(o.Points, p) }
	external := op.Effect == manifests.EffectExternal
	if o.Hold != nil && external && asked(PointInFlight) {
		out = append(out, PointInFlight)
	}
	if external && asked(PointEqualArgs) && (o.Removes == nil || !o.Removes(op.Name)) {
		out = append(out, PointEqualArgs)
	}
	for _, p := range []string{PointKeyKept, PointKeyExpired} {
		if o.Clock != nil && external && op.Recovery == manifests.PolicyIdempotentRetry && asked(p) {
			out = append(out, p)
		}
	}
	if o.Prover != nil && external && op.Recovery == manifests.PolicyIdempotentRetry && pv.IdempotencyKey() != "" && !gated && asked(PointProviderKey) {
		out = append(out, PointProviderKey)
	}
	return out
}

func (rep *Report) add(row Row) {
	rep.Rows = append(rep.Rows, row)
	t := &rep.Totals
	t.Cells++
	t.Kills += row.Kills
	if row.Kills > 0 {
		t.KilledCells++
	}
	if !row.Reached {
		t.NA++
	}
	if !row.Pass {
		t.Failed++
	}
	if row.Duplicate {
		t.Duplicates++
	}
	if row.Lost {
		t.Lost++
	}
	classes := 0
	for _, c := range []struct {
		marked bool
		n      *int
	}{{row.AppliedButFailed, &t.AppliedButFailed}, {row.SucceededWithoutEffect, &t.SucceededWithoutEffect},
		{row.EffectUndone, &t.EffectsUndone}, {row.WrongReceipt, &t.WrongReceipts}} {
		if c.marked {
			*c.n++
			classes++
		}
	}
	if !row.Pass && !row.Duplicate && !row.Lost && classes == 0 {
		t.Other++
	}
}

func (o *Options) validate() error {
	var errs []error
	for name, v := range map[string]string{"Binary": o.Binary, "Manifest": o.Manifest, "Modules": o.Modules, "Config": o.Config} {
		if v == "" {
			errs = append(errs, fmt.Errorf("crashtest: Options.%s is required", name))
		}
	}
	if o.Args == nil {
		errs = append(errs, errors.New("crashtest: Options.Args is required"))
	}
	if o.Effects == nil {
		errs = append(errs, errors.New("crashtest: Options.Effects is required"))
	}
	for _, p := range o.Points {
		if (p == PointKeyKept || p == PointKeyExpired) && o.Clock == nil {
			errs = append(errs, fmt.Errorf("crashtest: row %s needs Options.Clock (a provider whose clock moves)", p))
		}
		if p == PointInFlight {
			if o.Hold == nil {
				errs = append(errs, fmt.Errorf("crashtest: point %s needs Options.Hold", PointInFlight))
			}
			continue
		}
		if !slices.Contains(crash.Points, p) && !slices.Contains(Rows, p) {
			errs = append(errs, fmt.Errorf("crashtest: unknown crash point %q (known: %s)", p, strings.Join(append(slices.Clone(crash.Points), Rows...), ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// variant returns the manifest text with requires_approval of the named
// operation set to gated. Everything else — the module pin included — is
// kept byte for byte.
func variant(src []byte, op string, gated bool) ([]byte, error) {
	out, err := manifests.SetOperationField(src, op, "requires_approval", gated)
	if err == nil {
		_, err = manifests.Parse("variant.toml", out)
	}
	if err != nil {
		return nil, fmt.Errorf("crashtest: manifest variant of %s (requires_approval=%t): %w", op, gated, err)
	}
	return out, nil
}

// fileDigest is the hex sha256 of a file.
func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return digestReader(f)
}

// connhost runs one connhost process in its own process group with the
// given crash spec ("" for none). A process that died by SIGKILL (the
// injected crash) is a Result; any other signal is an error.
func (c *cell) connhost(ctx context.Context, crashAt string, args ...string) (proc.Result, error) {
	return c.run1(ctx, crashAt, nil, args...)
}

// connhostKilledWhen runs one connhost process and SIGKILLs it (its whole
// group) as soon as until returns nil.
func (c *cell) connhostKilledWhen(ctx context.Context, until func(context.Context) error, args ...string) (proc.Result, error) {
	return c.run1(ctx, "", until, args...)
}

func (c *cell) run1(ctx context.Context, crashAt string, killWhen func(context.Context) error, args ...string) (proc.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.ProcessTimeout)
	defer cancel()
	full := []string{"--data", c.data, "--manifests", c.manifests, "--modules", c.o.Modules, "--config", c.config, "--json"}
	if c.dsn != "" {
		full = append(full, "--ledger", c.dsn, "--node", "crashtest-"+filepath.Base(c.dir))
	}
	full = append(full, args...)
	var env []string // nil: this process's
	if c.o.LoseUnsynced {
		env = append(os.Environ(), crash.LoseUnsyncedEnv+"=1")
	}
	if c.clockOffset > 0 {
		if env == nil {
			env = os.Environ()
		}
		env = append(env, crash.ClockOffsetEnv+"="+c.clockOffset.String())
	}
	p, err := proc.Start(proc.Cmd{Path: c.o.Binary, Args: full, Env: env, CrashAt: crashAt})
	if err != nil {
		return proc.Result{}, fmt.Errorf("connhost %s: %w", strings.Join(args, " "), err)
	}
	if killWhen != nil {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			if killWhen(wctx) == nil {
				p.Kill()
			}
		}()
	}
	res, err := p.Wait(ctx)
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("connhost %s: no answer within %s (killed): %s", strings.Join(args, " "), c.o.ProcessTimeout, clip(string(res.Stderr)))
	case err != nil:
		return res, fmt.Errorf("connhost %s: %w", strings.Join(args, " "), err)
	case res.Killed():
		c.kills++
	case res.Signal != 0:
		return res, fmt.Errorf("connhost %s: %s", strings.Join(args, " "), res)
	}
	return res, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
