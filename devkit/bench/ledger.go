// Package bench measures connhost on the machine it runs on, always against
// a baseline taken in the same run, so the figures are ratios a reader can
// compare across machines. `connhost bench` prints them.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// LedgerOptions configures RunLedger. Zero values take the defaults.
type LedgerOptions struct {
	// Dir is a scratch directory; it is removed afterwards. The default
	// value is a new temporary directory.
	Dir string
	// History is the number of terminal executions bulk-loaded for the
	// recovery measurement. The default value is 1,000,000; a negative
	// value means none.
	History int
	// Pending is the number of pending executions. The default value is
	// 1,000.
	Pending int
	// Concurrency is the number of concurrent writers/callers. The default
	// value is 64.
	Concurrency int
	// SeqOps is the number of sequential operations measured. The default
	// value is 500.
	SeqOps int
	// ParOps is the number of operations at Concurrency. The default value
	// is 100 per writer.
	ParOps int
	// Rounds is the number of alternating rounds the sequential and the
	// concurrent measurements are split into (see RunLedger). The default
	// value is 5.
	Rounds int
	// WitnessRun is how long each run of the witness measurement lasts:
	// long enough to hold witness updates (about one a second). The
	// default value is 2s.
	WitnessRun time.Duration
	// SyncCallers are the numbers of callers the fsync sharing is measured
	// at (see SyncShare). The default value is 16 and 64.
	SyncCallers []int
	// Progress, when set, receives one line per phase.
	Progress func(phase string)
}

func (o *LedgerOptions) ensureDefaults() {
	switch {
	case o.History == 0:
		o.History = 1_000_000
	case o.History < 0:
		o.History = 0
	}
	if o.Pending == 0 {
		o.Pending = 1000
	}
	if o.Concurrency == 0 {
		o.Concurrency = 64
	}
	if o.SeqOps == 0 {
		o.SeqOps = 500
	}
	if o.ParOps == 0 {
		o.ParOps = 100 * o.Concurrency
	}
	if o.Rounds <= 0 {
		o.Rounds = 5
	}
	if o.WitnessRun <= 0 {
		o.WitnessRun = 2 * time.Second
	}
	if len(o.SyncCallers) == 0 {
		o.SyncCallers = []int{16, 64}
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
}

// LedgerReport is the result of RunLedger. Raw is two synced Pebble batches
// per operation: the floor an execution (intent+dispatch, then outcome)
// cannot beat. Ledger is the ledger's writes alone (Create, then Apply of
// the outcome, for records shaped like the executor's), without parsing,
// validation or a connector call: it separates what the ledger costs from
// what the executor adds. Each figure is the median over the rounds, and
// each ratio the median of the per-round ratios (a round's raw, ledger and
// execute runs ran back to back, under the same load).
type LedgerReport struct {
	RawSeqMicros        float64 `json:"raw_seq_us"`
	RawParPerSecond     float64 `json:"raw_par_per_s"`
	LedgerSeqMicros     float64 `json:"ledger_seq_us"`
	LedgerParPerSecond  float64 `json:"ledger_par_per_s"`
	ExecuteSeqMicros    float64 `json:"execute_seq_us"`
	ExecuteParPerSecond float64 `json:"execute_par_per_s"`
	// The lazy figures: an idempotent-retry no-op whose succeeded outcome
	// is written without its own sync (outcome_durability lazy), against
	// raw with the second batch unsynced (RawLazy*) and the two-synced raw.
	RawLazySeqMicros        float64 `json:"raw_one_sync_seq_us"`
	RawLazyParPerSecond     float64 `json:"raw_one_sync_par_per_s"`
	LazySeqMicros           float64 `json:"execute_lazy_seq_us"`
	LazyParPerSecond        float64 `json:"execute_lazy_par_per_s"`
	LazySeqRatio            float64 `json:"execute_lazy_seq_over_raw_seq"`
	LazySeqOverRawLazyRatio float64 `json:"execute_lazy_seq_over_raw_one_sync_seq"`
	LazyParRatio            float64 `json:"execute_lazy_par_over_raw_par"`
	RecoverWithHistoryMs    float64 `json:"recover_with_history_ms"`
	RecoverPendingOnlyMs    float64 `json:"recover_pending_only_ms"`
	BytesPerExecution       float64 `json:"bytes_per_execution"`
	LedgerSeqRatio          float64 `json:"ledger_seq_over_raw_seq"`
	LedgerParRatio          float64 `json:"ledger_par_over_raw_par"`
	SeqRatio                float64 `json:"execute_seq_over_raw_seq"`
	ParRatio                float64 `json:"execute_par_over_raw_par"`
	RecoverRatio            float64 `json:"recover_history_over_pending_only"`
	// The floor (OpenFloorBench): raw's two synced batches under derived
	// ids, each looked up first, the storage work any ledger keyed by
	// derived execution ids must do. The ledger's writes and a manual
	// Execute against it, in the same rounds.
	FloorSeqMicros          float64 `json:"floor_seq_us"`
	FloorParPerSecond       float64 `json:"floor_par_per_s"`
	FloorSeqRatio           float64 `json:"floor_seq_over_raw_seq"`
	FloorParRatio           float64 `json:"floor_par_over_raw_par"`
	LedgerSeqOverFloorRatio float64 `json:"ledger_seq_over_floor_seq"`
	LedgerParOverFloorRatio float64 `json:"ledger_par_over_floor_par"`
	SeqOverFloorRatio       float64 `json:"execute_seq_over_floor_seq"`
	ParOverFloorRatio       float64 `json:"execute_par_over_floor_par"`
	// The connector call's share of a sequential execution, manual and
	// lazy: the time the executor reported (host.Observer.ConnectorCall)
	// per execution of the sequential runs, the rest being the two writes,
	// parsing and validation.
	ExecuteSeqCallMicros float64 `json:"execute_seq_connector_call_us"`
	LazySeqCallMicros    float64 `json:"execute_lazy_seq_connector_call_us"`
	Rounds               int     `json:"rounds"`
	History              int     `json:"history"`
	Pending              int     `json:"pending"`
	Concurrency          int     `json:"concurrency"`
	// The witness's cost (ledger.Options.WitnessPath): the ledger's writes
	// with a witness against the same writes without one, each execution
	// in a session of its own (the witness then always names its full
	// 4,096 sessions, which it rewrites about once a second), in runs of
	// LedgerOptions.WitnessRun each, so that every run holds witness
	// updates.
	WitnessSeqMicros      float64 `json:"witness_seq_us"`
	NoWitnessSeqMicros    float64 `json:"no_witness_seq_us"`
	WitnessSeqRatio       float64 `json:"witness_seq_over_no_witness_seq"`
	WitnessParPerSecond   float64 `json:"witness_par_per_s"`
	NoWitnessParPerSecond float64 `json:"no_witness_par_per_s"`
	WitnessParRatio       float64 `json:"witness_par_over_no_witness_par"`
	// WitnessBytes is the size of that full witness file.
	WitnessBytes int64 `json:"witness_bytes"`
	// SyncShares says, at each of LedgerOptions.SyncCallers, how many
	// commits each fsync of the write-ahead log made durable, for raw and
	// for Execute.
	SyncShares []SyncShare `json:"sync_shares"`
	// GOMAXPROCS and CPUs describe the process the figures were measured
	// in: connhost runs with two Ps more than CPUs unless told otherwise.
	GOMAXPROCS int `json:"gomaxprocs"`
	CPUs       int `json:"cpus"`
}

// SyncShare is how the fsyncs of the write-ahead log were shared at one
// number of callers, for raw (two synced batches per operation), Execute
// of a manual operation (intent and outcome synced) and Execute with a
// lazy outcome (intent synced). Each concurrent commit that asks for a
// sync waits for the next fsync of the log, so the fewer commits each
// fsync covers, the more fsyncs a run pays for, and on a disk whose fsync
// costs a few hundred microseconds that bounds the throughput. Each figure
// is the median over the rounds.
type SyncShare struct {
	Callers int `json:"callers"`
	// PerSecond: operations or executions per second.
	RawPerSecond     float64 `json:"raw_per_s"`
	ExecutePerSecond float64 `json:"execute_per_s"`
	LazyPerSecond    float64 `json:"execute_lazy_per_s"`
	// CommitsPerSync: batches committed per fsync of the log.
	RawCommitsPerSync     float64 `json:"raw_commits_per_sync"`
	ExecuteCommitsPerSync float64 `json:"execute_commits_per_sync"`
	LazyCommitsPerSync    float64 `json:"execute_lazy_commits_per_sync"`
	// SyncsPerOp: fsyncs of the log per operation or execution.
	RawSyncsPerOp           float64 `json:"raw_syncs_per_op"`
	ExecuteSyncsPerOp       float64 `json:"execute_syncs_per_execution"`
	LazySyncsPerOp          float64 `json:"execute_lazy_syncs_per_execution"`
	ExecuteCommitsPerOp     float64 `json:"execute_commits_per_execution"`
	RawBytesPerSync         float64 `json:"raw_bytes_per_sync"`
	ExecuteBytesPerSync     float64 `json:"execute_bytes_per_sync"`
	ExecuteBytesPerOp       float64 `json:"execute_wal_bytes_per_execution"`
	RawBytesPerOp           float64 `json:"raw_wal_bytes_per_op"`
	ExecuteOverRawPerSecond float64 `json:"execute_per_s_over_raw_per_s"`
	// CPUMicrosPerOp: the process's CPU time (user and system) per
	// operation or execution: where it is larger than the wall time one
	// CPU gives each operation, the run was bound by CPU, not by fsyncs.
	RawCPUMicrosPerOp     float64 `json:"raw_cpu_us_per_op"`
	ExecuteCPUMicrosPerOp float64 `json:"execute_cpu_us_per_execution"`
	LazyCPUMicrosPerOp    float64 `json:"execute_lazy_cpu_us_per_execution"`
}

// walCounter is what WALStats the ledger and the raw database give.
type walCounter interface {
	WALStats() (ledger.WALStats, error)
}

// walRun is one run's write-ahead log counts.
type walRun struct {
	perSecond            float64
	ops                  float64
	syncs, bytes, commit float64
	cpuMicros            float64
}

// countedRun runs fn ops times from callers goroutines and returns the
// rate and what the log of w did meanwhile.
func countedRun(ops, callers int, fn func() error, w walCounter) (walRun, error) {
	before, err := w.WALStats()
	if err != nil {
		return walRun{}, err
	}
	cpuBefore := processCPU()
	rate, err := parallel(ops, callers, fn)
	if err != nil {
		return walRun{}, err
	}
	cpu := processCPU() - cpuBefore
	after, err := w.WALStats()
	if err != nil {
		return walRun{}, err
	}
	return walRun{perSecond: rate, ops: float64(ops), syncs: float64(after.Syncs - before.Syncs),
		bytes: float64(after.Bytes - before.Bytes), commit: float64(after.Commits - before.Commits),
		cpuMicros: float64(cpu) / float64(time.Microsecond)}, nil
}

// perSync returns x per fsync of r (0 when the run synced nothing).
func (r walRun) perSync(x float64) float64 {
	if r.syncs == 0 {
		return 0
	}
	return x / r.syncs
}

// medianShare returns the share whose every figure is the median of that
// figure over rounds (all of one number of callers).
func medianShare(rounds []SyncShare) SyncShare {
	out := rounds[0]
	v := reflect.ValueOf(&out).Elem()
	for i := range v.NumField() {
		if v.Field(i).Kind() != reflect.Float64 {
			continue
		}
		xs := make([]float64, len(rounds))
		for j := range rounds {
			xs[j] = reflect.ValueOf(rounds[j]).Field(i).Float()
		}
		v.Field(i).SetFloat(median(xs))
	}
	return out
}

// measureSyncShares alternates rounds of raw, execute and lazy execute
// runs at each of o.SyncCallers, counting the fsyncs of each database's
// log, and fills rep.SyncShares.
func measureSyncShares(o LedgerOptions, rep *LedgerReport, raw *RawBench, exLedger walCounter, execute, executeLazy func() error) error {
	for _, callers := range o.SyncCallers {
		ops := max(o.ParOps/o.Rounds, 20*callers)
		o.Progress(fmt.Sprintf("fsync sharing: %d rounds at %d callers", o.Rounds, callers))
		var rounds []SyncShare
		for range o.Rounds {
			r, err := countedRun(ops, callers, func() error { return raw.op(pebble.Sync) }, raw)
			if err != nil {
				return err
			}
			// A lazy run's last outcomes are synced by the ledger's
			// background syncer within its interval: let that fsync
			// happen before the manual run, which would otherwise count
			// it as one of its own.
			time.Sleep(3 * ledger.DefaultLazySyncInterval)
			e, err := countedRun(ops, callers, execute, exLedger)
			if err != nil {
				return err
			}
			z, err := countedRun(ops, callers, executeLazy, exLedger)
			if err != nil {
				return err
			}
			rounds = append(rounds, SyncShare{Callers: callers,
				RawPerSecond: r.perSecond, ExecutePerSecond: e.perSecond, LazyPerSecond: z.perSecond,
				RawCommitsPerSync: r.perSync(r.commit), ExecuteCommitsPerSync: e.perSync(e.commit), LazyCommitsPerSync: z.perSync(z.commit),
				RawSyncsPerOp: r.syncs / r.ops, ExecuteSyncsPerOp: e.syncs / e.ops, LazySyncsPerOp: z.syncs / z.ops,
				ExecuteCommitsPerOp: e.commit / e.ops,
				RawBytesPerSync:     r.perSync(r.bytes), ExecuteBytesPerSync: e.perSync(e.bytes),
				ExecuteBytesPerOp: e.bytes / e.ops, RawBytesPerOp: r.bytes / r.ops,
				ExecuteOverRawPerSecond: e.perSecond / r.perSecond,
				RawCPUMicrosPerOp:       r.cpuMicros / r.ops, ExecuteCPUMicrosPerOp: e.cpuMicros / e.ops, LazyCPUMicrosPerOp: z.cpuMicros / z.ops,
			})
		}
		rep.SyncShares = append(rep.SyncShares, medianShare(rounds))
	}
	return nil
}

const noopManifest = `
[connector]
name = "noop"
version = "1.0.0"
abi = 1
module = "noop.wasm"
sha256 = "%s"
[limits]
instances = %d
[[operation]]
name = "echo"
description = "Echo the arguments."
effect = "external"
recovery = "manual"
max_attempts = 1
input_schema = '''{"type":"object","properties":{"i":{"type":"integer"}},"additionalProperties":false}'''
[[operation]]
name = "keyed"
description = "Return the key, idempotently."
effect = "external"
recovery = "idempotent-retry"
max_attempts = 1
input_schema = '''{"type":"object","properties":{"i":{"type":"integer"}},"additionalProperties":false}'''
`

// openNoop opens an executor in dir with the no-op connector (built from
// the source tree) allowed instances instances, reporting to obs (nil:
// nowhere), and returns it with the connector's manifest.
func openNoop(ctx context.Context, dir string, instances int, obs host.Observer) (*host.Executor, *manifests.Manifest, error) {
	modPath, digest, err := wasmbuild.Cached(ctx, "devkit/testing/testconnectors/noop")
	if err != nil {
		return nil, nil, err
	}
	m, err := manifests.Parse("noop.toml", fmt.Appendf(nil, noopManifest, digest, instances))
	if err != nil {
		return nil, nil, err
	}
	m.Connector.Module = modPath
	ex, err := host.Open(ctx, host.Options{DataDir: dir, Manifests: []*manifests.Manifest{m}, ModuleDir: "/", Logger: quiet, Observer: obs})
	if err != nil {
		return nil, nil, err
	}
	if err := waitForPool(ctx, ex); err != nil {
		ex.Close(ctx)
		return nil, nil, err
	}
	return ex, m, nil
}

// waitForPool waits until ex has filled the no-op connector's pool, which
// Open does in the background, so that no measured call shares the CPUs
// with instantiation (tens of milliseconds of CPU per instance).
func waitForPool(ctx context.Context, ex *host.Executor) error {
	deadline := time.Now().Add(time.Minute)
	for {
		st, _ := ex.PoolStats("noop")
		switch {
		case st.Idle+st.Busy >= st.Size:
			return nil
		case ctx.Err() != nil || time.Now().After(deadline):
			return fmt.Errorf("bench: the no-op connector's pool did not fill (%d of %d instances): %w",
				st.Idle+st.Busy, st.Size, cmp.Or(ctx.Err(), context.DeadlineExceeded))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// callClock is a host.Observer that adds up the time of the connector
// calls the executor reports, and nothing else.
type callClock struct{ total atomic.Int64 }

func (c *callClock) ConnectorCall(_ context.Context, _, _, _ string, d time.Duration, _ error) {
	c.total.Add(int64(d))
}
func (*callClock) LedgerWrite(context.Context, time.Duration) {}
func (*callClock) Transition(ledger.State, string)            {}
func (*callClock) GuestLogDropped(string, int64, int64)       {}

// sequential is sequential(ops, fn) for ops executions, which also
// returns the microseconds of their connector calls per execution.
func (c *callClock) sequential(ops int, fn func() error) (us, callUs float64, err error) {
	before := c.total.Load()
	us, err = sequential(ops, fn)
	return us, float64(c.total.Load()-before) / float64(ops) / float64(time.Microsecond), err
}

// noopCall returns a function that executes tool (noop.echo or noop.keyed)
// once, with a new tool-call id from seq, and fails unless it succeeded.
func noopCall(ctx context.Context, ex *host.Executor, tool string, seq *atomic.Int64) func() error {
	return func() error {
		i := seq.Add(1)
		res, err := ex.Execute(ctx, host.ToolCall{SessionID: "bench", ToolCallID: fmt.Sprint("t", i), Tool: tool, Arguments: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if err == nil && res.Status != host.StatusSucceeded {
			err = fmt.Errorf("bench: execute %s: status %s: %s", tool, res.Status, res.Error)
		}
		return err
	}
}

// RunLedger measures the ledger and the executor; see LedgerReport.
func RunLedger(ctx context.Context, o LedgerOptions) (LedgerReport, error) {
	o.ensureDefaults()
	rep := LedgerReport{History: o.History, Pending: o.Pending, Concurrency: o.Concurrency, Rounds: o.Rounds,
		GOMAXPROCS: runtime.GOMAXPROCS(0), CPUs: runtime.NumCPU()}
	if o.Dir == "" {
		d, err := os.MkdirTemp("", "connhost-bench-")
		if err != nil {
			return rep, err
		}
		o.Dir = d
	}
	defer os.RemoveAll(o.Dir)

	// One raw database for the sequential and the concurrent runs, as the
	// executor has one ledger for both: each sequential round then writes
	// into a database of the same age as the executor's.
	raw, err := OpenRawBench(filepath.Join(o.Dir, "raw"))
	if err != nil {
		return rep, err
	}
	defer raw.Close()
	floor, err := OpenFloorBench(filepath.Join(o.Dir, "floor"))
	if err != nil {
		return rep, err
	}
	defer floor.Close()

	o.Progress("building the noop connector")
	exDir := filepath.Join(o.Dir, "exec")
	calls := &callClock{}
	ex, m, err := openNoop(ctx, exDir, min(o.Concurrency, 256), calls)
	if err != nil {
		return rep, err
	}
	var seq atomic.Int64
	run, runLazy := noopCall(ctx, ex, "noop.echo", &seq), noopCall(ctx, ex, "noop.keyed", &seq)
	// Warm the pool to its full size, and the write paths.
	if _, err := parallel(2*o.Concurrency, o.Concurrency, run); err != nil {
		ex.Close(ctx)
		return rep, err
	}
	led, writeOnly, err := ledgerWrites(ctx, ledger.Options{Dir: filepath.Join(o.Dir, "ledger-only")}, ex, false)
	if err != nil {
		ex.Close(ctx)
		return rep, err
	}
	defer led.Close()
	if _, err := parallel(2*o.Concurrency, o.Concurrency, runLazy); err != nil {
		ex.Close(ctx)
		return rep, err
	}
	err = measureWrites(ctx, o, &rep, raw, floor, calls, writeOnly, run, runLazy)
	if err == nil {
		exLedger, ok := ex.Ledger().(walCounter)
		if !ok {
			err = fmt.Errorf("bench: the executor's ledger %T does not count its log", ex.Ledger())
		} else {
			err = measureSyncShares(o, &rep, raw, exLedger, run, runLazy)
		}
	}
	if err == nil {
		err = measureWitness(ctx, o, &rep, ex, filepath.Join(o.Dir, "witness"))
	}
	total := int(seq.Load())
	if cerr := ex.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, err
	}
	size, err := dirSize(filepath.Join(exDir, "ledger"))
	if err != nil {
		return rep, err
	}
	rep.BytesPerExecution = float64(size) / float64(total)

	o.Progress(fmt.Sprintf("recovery: loading %d pending only", o.Pending))
	pendingDir := filepath.Join(o.Dir, "rec-pending")
	if err := loadRecovery(ctx, pendingDir, 0, o.Pending, m); err != nil {
		return rep, err
	}
	o.Progress(fmt.Sprintf("recovery: loading %d pending + %d history (bulk load)", o.Pending, o.History))
	historyDir := filepath.Join(o.Dir, "rec-history")
	if err := loadRecovery(ctx, historyDir, o.History, o.Pending, m); err != nil {
		return rep, err
	}
	// Alternate the two opens, as the write measurements alternate.
	o.Progress("recovery: opening each ledger")
	rep.RecoverPendingOnlyMs, rep.RecoverWithHistoryMs, rep.RecoverRatio, err = compareOpens(func(dir string) (float64, error) {
		return timeOpen(ctx, dir, o.Pending)
	}, pendingDir, historyDir)
	return rep, err
}

// compareOpens times open of the pending-only ledger and of the one with
// history alternately, recoverOpens times each, and returns the median
// milliseconds of each and the median of the per-round ratios.
func compareOpens(open func(ledger string) (float64, error), pendingOnly, withHistory string) (pendingMs, historyMs, ratio float64, err error) {
	var ps, hs, ratios []float64
	for range recoverOpens {
		p, err := open(pendingOnly)
		if err != nil {
			return 0, 0, 0, err
		}
		h, err := open(withHistory)
		if err != nil {
			return 0, 0, 0, err
		}
		ps, hs, ratios = append(ps, p), append(hs, h), append(ratios, h/p)
	}
	return median(ps), median(hs), median(ratios), nil
}

// measureWrites alternates short rounds of raw, ledger-only and execute
// runs, sequential and at o.Concurrency, so that all three see the same
// machine load and databases of similar age (on a shared machine the load
// changes within seconds, and one long run of each compares different
// machines), and fills rep's write figures.
func measureWrites(ctx context.Context, o LedgerOptions, rep *LedgerReport, raw, floor *RawBench, calls *callClock, writeOnly, execute, executeLazy func() error) error {
	if _, _, err := raw.Run(ctx, 2*o.Concurrency, o.Concurrency); err != nil {
		return err
	}
	if _, _, err := floor.Run(ctx, 2*o.Concurrency, o.Concurrency); err != nil {
		return err
	}
	if _, err := parallel(2*o.Concurrency, o.Concurrency, writeOnly); err != nil {
		return err
	}
	var rawUs, ledUs, exeUs, ledSeqRatios, exeSeqRatios []float64
	var rawPerS, ledPerS, exePerS, ledParRatios, exeParRatios []float64
	var rawLazyUs, lazyUs, lazySeqRatios, lazySeqLazyRatios []float64
	var rawLazyPerS, lazyPerS, lazyParRatios []float64
	var floorUs, floorPerS, floorSeqRatios, floorParRatios []float64
	var ledSeqFloorRatios, exeSeqFloorRatios, ledParFloorRatios, exeParFloorRatios []float64
	var exeCallUs, lazyCallUs []float64
	seqOps, parOps := max(1, o.SeqOps/o.Rounds), max(o.Concurrency, o.ParOps/o.Rounds)
	for r := range o.Rounds {
		o.Progress(fmt.Sprintf("round %d of %d: raw, floor, ledger and execute, sequential and with %d callers", r+1, o.Rounds, o.Concurrency))
		rawPerOp, _, err := raw.Run(ctx, seqOps, 1)
		if err != nil {
			return err
		}
		rUs := float64(rawPerOp) / float64(time.Microsecond)
		floorPerOp, _, err := floor.Run(ctx, seqOps, 1)
		if err != nil {
			return err
		}
		fUs := float64(floorPerOp) / float64(time.Microsecond)
		lUs, err := sequential(seqOps, writeOnly)
		if err != nil {
			return err
		}
		eUs, eCallUs, err := calls.sequential(seqOps, execute)
		if err != nil {
			return err
		}
		_, rRate, err := raw.Run(ctx, parOps, o.Concurrency)
		if err != nil {
			return err
		}
		_, fRate, err := floor.Run(ctx, parOps, o.Concurrency)
		if err != nil {
			return err
		}
		lRate, err := parallel(parOps, o.Concurrency, writeOnly)
		if err != nil {
			return err
		}
		eRate, err := parallel(parOps, o.Concurrency, execute)
		if err != nil {
			return err
		}
		rawLazyPerOp, _, err := raw.RunLazy(ctx, seqOps, 1)
		if err != nil {
			return err
		}
		rlUs := float64(rawLazyPerOp) / float64(time.Microsecond)
		zUs, zCallUs, err := calls.sequential(seqOps, executeLazy)
		if err != nil {
			return err
		}
		exeCallUs, lazyCallUs = append(exeCallUs, eCallUs), append(lazyCallUs, zCallUs)
		_, rlRate, err := raw.RunLazy(ctx, parOps, o.Concurrency)
		if err != nil {
			return err
		}
		zRate, err := parallel(parOps, o.Concurrency, executeLazy)
		if err != nil {
			return err
		}
		rawLazyUs, lazyUs = append(rawLazyUs, rlUs), append(lazyUs, zUs)
		lazySeqRatios, lazySeqLazyRatios = append(lazySeqRatios, zUs/rUs), append(lazySeqLazyRatios, zUs/rlUs)
		rawLazyPerS, lazyPerS, lazyParRatios = append(rawLazyPerS, rlRate), append(lazyPerS, zRate), append(lazyParRatios, zRate/rRate)
		rawUs, ledUs, exeUs = append(rawUs, rUs), append(ledUs, lUs), append(exeUs, eUs)
		floorUs, floorPerS = append(floorUs, fUs), append(floorPerS, fRate)
		floorSeqRatios, floorParRatios = append(floorSeqRatios, fUs/rUs), append(floorParRatios, fRate/rRate)
		ledSeqFloorRatios, exeSeqFloorRatios = append(ledSeqFloorRatios, lUs/fUs), append(exeSeqFloorRatios, eUs/fUs)
		ledParFloorRatios, exeParFloorRatios = append(ledParFloorRatios, lRate/fRate), append(exeParFloorRatios, eRate/fRate)
		ledSeqRatios, exeSeqRatios = append(ledSeqRatios, lUs/rUs), append(exeSeqRatios, eUs/rUs)
		rawPerS, ledPerS, exePerS = append(rawPerS, rRate), append(ledPerS, lRate), append(exePerS, eRate)
		ledParRatios, exeParRatios = append(ledParRatios, lRate/rRate), append(exeParRatios, eRate/rRate)
	}
	rep.RawSeqMicros, rep.LedgerSeqMicros, rep.ExecuteSeqMicros = median(rawUs), median(ledUs), median(exeUs)
	rep.LedgerSeqRatio, rep.SeqRatio = median(ledSeqRatios), median(exeSeqRatios)
	rep.RawParPerSecond, rep.LedgerParPerSecond, rep.ExecuteParPerSecond = median(rawPerS), median(ledPerS), median(exePerS)
	rep.LedgerParRatio, rep.ParRatio = median(ledParRatios), median(exeParRatios)
	rep.RawLazySeqMicros, rep.LazySeqMicros = median(rawLazyUs), median(lazyUs)
	rep.LazySeqRatio, rep.LazySeqOverRawLazyRatio = median(lazySeqRatios), median(lazySeqLazyRatios)
	rep.RawLazyParPerSecond, rep.LazyParPerSecond, rep.LazyParRatio = median(rawLazyPerS), median(lazyPerS), median(lazyParRatios)
	rep.FloorSeqMicros, rep.FloorParPerSecond = median(floorUs), median(floorPerS)
	rep.FloorSeqRatio, rep.FloorParRatio = median(floorSeqRatios), median(floorParRatios)
	rep.LedgerSeqOverFloorRatio, rep.SeqOverFloorRatio = median(ledSeqFloorRatios), median(exeSeqFloorRatios)
	rep.LedgerParOverFloorRatio, rep.ParOverFloorRatio = median(ledParFloorRatios), median(exeParFloorRatios)
	rep.ExecuteSeqCallMicros, rep.LazySeqCallMicros = median(exeCallUs), median(lazyCallUs)
	return nil
}

// measureWitness alternates runs of the ledger's writes with and without a
// witness (see LedgerReport), sequential and at o.Concurrency.
func measureWitness(ctx context.Context, o LedgerOptions, rep *LedgerReport, ex *host.Executor, dir string) error {
	witnessPath := filepath.Join(dir, "with.witness")
	with, writeWith, err := ledgerWrites(ctx, ledger.Options{Dir: filepath.Join(dir, "with", "ledger"), WitnessPath: witnessPath}, ex, true)
	if err != nil {
		return err
	}
	defer with.Close()
	without, writeWithout, err := ledgerWrites(ctx, ledger.Options{Dir: filepath.Join(dir, "without", "ledger")}, ex, true)
	if err != nil {
		return err
	}
	defer without.Close()
	// Fill the witness with its sessions, and warm both write paths.
	for _, w := range []func() error{writeWith, writeWithout} {
		if _, err := parallel(2*ledger.DefaultWitnessSessions, o.Concurrency, w); err != nil {
			return err
		}
	}
	c, err := compareWitness(o, writeWith, writeWithout)
	if err != nil {
		return err
	}
	rep.WitnessSeqMicros, rep.NoWitnessSeqMicros, rep.WitnessSeqRatio = c.withUs, c.withoutUs, c.seqRatio
	rep.WitnessParPerSecond, rep.NoWitnessParPerSecond, rep.WitnessParRatio = c.withPerS, c.withoutPerS, c.parRatio
	st, err := os.Stat(witnessPath)
	if err != nil {
		return err
	}
	rep.WitnessBytes = st.Size()
	return nil
}

// witnessRounds is the least number of rounds of the witness measurement:
// its difference is small beside a loaded machine's noise.
const witnessRounds = 7

// sequentialFor runs fn one call after another for at least d and returns
// the microseconds per call.
func sequentialFor(d time.Duration, fn func() error) (float64, error) {
	start, n := time.Now(), 0
	for time.Since(start) < d {
		if err := fn(); err != nil {
			return 0, err
		}
		n++
	}
	return float64(time.Since(start)) / float64(n) / float64(time.Microsecond), nil
}

// parallelFor runs fn in workers goroutines for at least d and returns the
// calls per second.
func parallelFor(d time.Duration, workers int, fn func() error) (float64, error) {
	var n atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for time.Since(start) < d {
				if err := fn(); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, *p
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}

// ledgerWrites opens a ledger with opts and returns it with a function
// that performs the ledger's writes of one ungated execution, Create
// (dispatched) then Apply (succeeded), for a record shaped like the
// executor's first bench execution; with ownSessions each execution is in
// a session of its own.
func ledgerWrites(ctx context.Context, opts ledger.Options, ex *host.Executor, ownSessions bool) (*ledger.DB, func() error, error) {
	tmpl, err := ex.Ledger().Get(ctx, ledger.ExecutionID(ledger.DefaultNamespace, "bench", "t1"))
	if err != nil {
		return nil, nil, err
	}
	if tmpl.State != ledger.StateSucceeded || tmpl.Outcome == nil {
		return nil, nil, fmt.Errorf("bench: template execution is %s, want succeeded with an outcome", tmpl.State)
	}
	outcome := *tmpl.Outcome
	led, err := ledger.Open(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	var seq atomic.Int64
	return led, func() error {
		rec := tmpl
		call := fmt.Sprint("w", seq.Add(1))
		if ownSessions {
			rec.SessionID = "bench-" + call
		}
		rec.ID, rec.ToolCallID = ledger.ExecutionID(rec.Namespace, rec.SessionID, call), call
		rec.IdempotencyKey = ledger.IdempotencyKey(rec.Namespace, rec.Connector, rec.ID)
		rec.State, rec.Attempt, rec.Outcome, rec.Events = ledger.StateDispatched, 1, nil, 0
		rec.CreatedAt, rec.UpdatedAt = time.Time{}, time.Time{}
		if _, err := led.Create(ctx, rec, ledger.Event{Actor: "executor", Decision: string(host.DecisionDispatch)}); err != nil {
			return err
		}
		_, err := led.Apply(ctx, rec.ID, ledger.Transition{
			From: ledger.StateDispatched, FromAttempt: 1, To: ledger.StateSucceeded, Attempt: 1,
			Outcome: &outcome, Event: ledger.Event{Actor: "executor", Decision: string(host.DecisionOutcome)},
		})
		return err
	}, nil
}

// sequential runs fn ops times, one after another, and returns the
// microseconds per call.
func sequential(ops int, fn func() error) (float64, error) {
	start := time.Now()
	for range ops {
		if err := fn(); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start)) / float64(ops) / float64(time.Microsecond), nil
}

func parallel(ops, workers int, fn func() error) (perSecond float64, err error) {
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(ops) {
				if err := fn(); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return 0, *p
	}
	return float64(ops) / time.Since(start).Seconds(), nil
}

// loadRecovery bulk-loads history terminal executions and pending ones
// awaiting approval (recovery must read and keep them) into a ledger in
// dir, compacted as a live ledger would be.
func loadRecovery(ctx context.Context, dir string, history, pending int, m *manifests.Manifest) error {
	db, err := ledger.Open(ctx, ledger.Options{Dir: filepath.Join(dir, "ledger"), Logger: quiet})
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	const chunk = 50_000
	recs := make([]ledger.Record, 0, chunk)
	flush := func() error {
		err := db.BulkLoad(ctx, recs)
		recs = recs[:0]
		return err
	}
	add := func(r ledger.Record) error {
		recs = append(recs, r)
		if len(recs) == chunk {
			return flush()
		}
		return nil
	}
	op := m.Operations[0]
	for i := range history + pending {
		id := ledger.ExecutionID("bench", fmt.Sprint("s", i%1000), fmt.Sprint("t", i))
		r := ledger.Record{Version: ledger.RecordVersion, ID: id, Namespace: "bench", SessionID: fmt.Sprint("s", i%1000), ToolCallID: fmt.Sprint("t", i),
			Connector: "noop", Operation: "echo", Effect: "external", Policy: "manual", PolicyVersion: op.PolicyVersion(),
			Args: []byte(`{"i":1}`), ArgsDigest: "d", IdempotencyKey: ledger.IdempotencyKey("bench", "noop", id),
			CreatedAt: now, UpdatedAt: now, MaxAttempts: 1}
		if i < history {
			r.State, r.Attempt = ledger.StateSucceeded, 1
			r.Outcome = &ledger.Outcome{Kind: "ok", Result: []byte(`{"i":1}`), Source: "connector", Attempt: 1}
		} else {
			r.State = ledger.StateAwaitingApproval
			r.Approval = &ledger.Approval{ID: ledger.ApprovalID(id), ArgsDigest: "d", PolicyVersion: op.PolicyVersion(), RequestedAt: now, ExpiresAt: now.Add(24 * time.Hour), Decision: ledger.ApprovalPending}
		}
		if err := add(r); err != nil {
			db.Close()
			return err
		}
	}
	if err := flush(); err != nil {
		db.Close()
		return err
	}
	// A live ledger's history has been compacted in the background long
	// before a restart; a freshly bulk-loaded one has not.
	if err := db.Compact(ctx); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

// timeOpen measures opening an executor on dir, which opens the ledger and
// runs recovery before it returns, in milliseconds. It opens without
// connectors: the measurement is the ledger's open plus the recovery pass,
// not the compilation of a module (pending approvals need no connector to
// be examined, and recovery leaves them as they are, so every open sees
// the same ledger).
func timeOpen(ctx context.Context, dir string, pending int) (float64, error) {
	start := time.Now()
	ex, err := host.Open(ctx, host.Options{DataDir: dir, Logger: quiet})
	if err != nil {
		return 0, err
	}
	ms := float64(time.Since(start)) / float64(time.Millisecond)
	rep, err := ex.Recover(ctx) // confirm what recovery saw
	ex.Close(ctx)
	if err != nil {
		return 0, err
	}
	if rep.Pending != pending {
		return 0, fmt.Errorf("bench: recovery saw %d pending executions, loaded %d", rep.Pending, pending)
	}
	return ms, nil
}

// recoverOpens is the number of timed opens of each recovery ledger.
const recoverOpens = 7

// median returns the median of xs (the mean of the middle two for an even
// count); xs is reordered.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 1 {
		return xs[n/2]
	} else {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	return n, err
}

// witnessComparison holds the medians of alternating rounds of a ledger's
// writes with and without a witness (compareWitness).
type witnessComparison struct {
	withUs, withoutUs, seqRatio     float64 // sequential µs per write, and their ratio
	withPerS, withoutPerS, parRatio float64 // writes per second at o.Concurrency, and their ratio
}

// compareWitness runs max(o.Rounds, witnessRounds) rounds of writeWith and
// writeWithout, o.WitnessRun each, sequentially and with o.Concurrency
// callers, alternating which goes first, and returns the medians.
func compareWitness(o LedgerOptions, writeWith, writeWithout func() error) (witnessComparison, error) {
	run := o.WitnessRun
	var withUs, withoutUs, seqRatios, withPerS, withoutPerS, parRatios []float64
	rounds := max(o.Rounds, witnessRounds)
	for r := range rounds {
		o.Progress(fmt.Sprintf("witness round %d of %d: the ledger's writes with and without a witness, sequential and with %d callers", r+1, rounds, o.Concurrency))
		var wUs, nUs, wRate, nRate float64
		steps := []func() error{
			func() (err error) { wUs, err = sequentialFor(run, writeWith); return err },
			func() (err error) { nUs, err = sequentialFor(run, writeWithout); return err },
			func() (err error) { wRate, err = parallelFor(run, o.Concurrency, writeWith); return err },
			func() (err error) { nRate, err = parallelFor(run, o.Concurrency, writeWithout); return err },
		}
		if r%2 == 1 {
			steps[0], steps[1], steps[2], steps[3] = steps[1], steps[0], steps[3], steps[2]
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return witnessComparison{}, err
			}
		}
		withUs, withoutUs, seqRatios = append(withUs, wUs), append(withoutUs, nUs), append(seqRatios, wUs/nUs)
		withPerS, withoutPerS, parRatios = append(withPerS, wRate), append(withoutPerS, nRate), append(parRatios, wRate/nRate)
	}
	return witnessComparison{median(withUs), median(withoutUs), median(seqRatios), median(withPerS), median(withoutPerS), median(parRatios)}, nil
}
