// Command peerbench measures connhost beside its peers on one machine, in
// one run: the same unit of work ("record the intent durably, run one step
// that performs an effect, record the outcome durably") through connhost's
// executor on PostgreSQL and on Pebble, a DBOS workflow with one step on the
// same PostgreSQL, a Restate handler with one restate.Run step whose server
// keeps its data on the same disk, and a Temporal workflow with one activity
// on SQLite on the same disk. Each system is measured sequentially and with
// concurrent callers, in rounds that alternate the systems, against the raw
// floor of its storage measured in the same rounds: two synced PostgreSQL
// commits, or two synced Pebble batches.
//
// It is a module of its own so that connhost's module never imports a peer.
// See BENCHMARKS.md, "Peers, measured", for the figures and how to re-run it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/connhost/connhost/devkit/testing/testenv"
)

// effect is the step's effect, the same for every system: an in-process
// no-op that returns its input. connhost's step is its no-op wasm connector
// (devkit/testing/testconnectors/noop), which does the same inside wazero.
func effect(i int64) (int64, error) { return i, nil }

// system is one system under measurement.
type system struct {
	name string
	// floor names the system whose operation is this one's storage floor
	// ("" for a floor itself).
	floor string
	// postgres: the system writes to the PostgreSQL server, whose write
	// transactions per execution are counted in the sequential runs.
	postgres bool
	// open starts the system and returns one operation (one execution
	// under a new id) and a function that stops it.
	open func(ctx context.Context, env *env) (op func(context.Context) error, stop func(), err error)
}

// env is what the systems share: the PostgreSQL server, the scratch
// directory on the disk under test, the number of concurrent callers.
type env struct {
	dsn     func(ctx context.Context) (string, error)
	admin   string // the server's own database, for counting transactions
	dir     string
	repo    string
	callers int
	restate string
	// temporalPragmas are SQLite pragmas for Temporal's database
	// (key=value, comma-separated).
	temporalPragmas string
	progress        func(format string, args ...any)
}

// registry holds every system by name, in the order they are measured.
var registry []system

func register(s system) { registry = append(registry, s) }

// run is one measured run: ops operations from callers goroutines.
type run struct {
	PerSecond   float64 `json:"per_s"`
	MeanMicros  float64 `json:"mean_us"`
	P50Micros   float64 `json:"p50_us"`
	P99Micros   float64 `json:"p99_us"`
	Ops         int     `json:"ops"`
	Callers     int     `json:"callers"`
	ElapsedSecs float64 `json:"elapsed_s"`
}

func measure(ctx context.Context, op func(context.Context) error, ops, callers int) (run, error) {
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, ops/callers+1)
			for next.Add(1) <= int64(ops) && ctx.Err() == nil {
				t := time.Now()
				if err := op(ctx); err != nil {
					once.Do(func() { firstErr = err })
					next.Store(int64(ops))
					break
				}
				mine = append(mine, time.Since(t))
			}
			lat[c] = mine
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return run{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return run{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return run{
		PerSecond:   float64(len(all)) / elapsed.Seconds(),
		MeanMicros:  us(sum) / float64(len(all)),
		P50Micros:   us(quantile(all, 0.50)),
		P99Micros:   us(quantile(all, 0.99)),
		Ops:         len(all),
		Callers:     callers,
		ElapsedSecs: elapsed.Seconds(),
	}, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// result is one system's figures over the rounds.
type result struct {
	System string `json:"system"`
	Floor  string `json:"floor,omitempty"`
	Seq    []run  `json:"sequential"`
	Par    []run  `json:"concurrent"`
	// Ratios per round against the floor: sequential mean time per
	// execution over the floor's, and concurrent executions per second
	// over the floor's (as connhost bench ledger reports them).
	SeqRatio []float64 `json:"seq_mean_over_floor_seq_mean,omitempty"`
	// WriteXacts: on PostgreSQL, the write transactions the server
	// committed per execution in each sequential run (transaction ids
	// consumed; read-only transactions take none).
	WriteXacts []float64 `json:"pg_write_xacts_per_execution,omitempty"`
	ParRatio   []float64 `json:"par_per_s_over_floor_par_per_s,omitempty"`
	Error      string    `json:"error,omitempty"`
}

type report struct {
	Started   time.Time `json:"started"`
	Rounds    int       `json:"rounds"`
	SeqOps    int       `json:"seq_ops"`
	ParOps    int       `json:"par_ops"`
	Callers   int       `json:"callers"`
	CPUs      int       `json:"cpus"`
	Dir       string    `json:"dir"`
	Results   []*result `json:"results"`
	TotalSecs float64   `json:"total_s"`
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "peerbench:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: go run . [flags]   (from tools/peerbench)

Measures one durable execution with one effectful step (intent recorded,
no-op step, outcome recorded) through connhost (PostgreSQL and Pebble
ledgers), DBOS (same PostgreSQL), Restate and Temporal (data on the same
disk), against two synced PostgreSQL commits and two synced Pebble batches,
in rounds that alternate the systems. Needs PostgreSQL's server binaries
(Debian's postgresql package) unless --dsn is given, and for Restate the
server from npm (npm ci in tools/peerbench).

Systems: %s

Flags:
`, strings.Join(names(), ", "))
		fs.PrintDefaults()
	}
	rounds := fs.Int("rounds", 3, "alternating rounds; each runs every system sequentially and concurrently")
	seqOps := fs.Int("seq", 300, "sequential executions per system and round")
	parOps := fs.Int("par", 1600, "concurrent executions per system and round")
	callers := fs.Int("callers", 16, "concurrent callers")
	dir := fs.String("dir", "", "scratch directory on the disk under test (default: a new temporary directory, removed afterwards)")
	dsn := fs.String("dsn", "", "a PostgreSQL server's connection string (superuser; a database per system is created); default: start a private durable cluster (fsync, synchronous commit on)")
	only := fs.String("systems", "", "comma-separated systems to measure (default: all)")
	restateBin := fs.String("restate-server", "node_modules/@restatedev/restate-server-linux-x64/bin/restate-server", "the restate-server binary (npm ci installs it here)")
	pragmas := fs.String("temporal-sqlite-pragmas", "", "SQLite pragmas for Temporal's database, key=value,… (default: none, SQLite's defaults as the Temporal CLI's dev server has them; e.g. journal_mode=wal,synchronous=full)")
	repo := fs.String("repo", "../..", "connhost's source tree (the no-op connector is built from it)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *rounds < 1 || *seqOps < 1 || *parOps < *callers || *callers < 1 {
		return fmt.Errorf("--rounds, --seq and --callers must be >= 1 and --par >= --callers")
	}
	selected := registry
	if *only != "" {
		selected = nil
		for _, n := range strings.Split(*only, ",") {
			i := slices.IndexFunc(registry, func(s system) bool { return s.name == strings.TrimSpace(n) })
			if i < 0 {
				return fmt.Errorf("unknown system %q (known: %s)", n, strings.Join(names(), ", "))
			}
			selected = append(selected, registry[i])
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	began := time.Now()
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%6.1fs  %s\n", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}

	e := &env{callers: *callers, progress: progress, temporalPragmas: *pragmas}
	var err error
	if e.repo, err = filepath.Abs(*repo); err != nil {
		return err
	}
	if e.restate, err = filepath.Abs(*restateBin); err != nil {
		return err
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "peerbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		e.dir = d
	} else {
		e.dir = *dir
	}
	needsPostgres := slices.ContainsFunc(selected, func(s system) bool { return s.postgres })
	switch {
	case !needsPostgres:
	case *dsn != "":
		base := *dsn
		e.admin = base
		var n atomic.Int64
		e.dsn = func(ctx context.Context) (string, error) {
			return createDatabase(ctx, base, fmt.Sprintf("peerbench_%d_%d", os.Getpid(), n.Add(1)))
		}
	default:
		progress("starting a private PostgreSQL cluster (durable: fsync and synchronous commit on)")
		pg, err := testenv.StartPostgres(testenv.PostgresOptions{Durable: true})
		if err != nil {
			return err
		}
		defer pg.Stop()
		e.dsn = pg.CreateDatabase
		e.admin = pg.DSN("postgres")
	}

	var admin *pgx.Conn
	if needsPostgres {
		if admin, err = pgx.Connect(ctx, e.admin); err != nil {
			return err
		}
		defer admin.Close(context.WithoutCancel(ctx))
	}
	type opened struct {
		res *result
		op  func(context.Context) error
		pg  bool
	}
	var live []opened
	rep := &report{Started: began.UTC(), Rounds: *rounds, SeqOps: *seqOps, ParOps: *parOps, Callers: *callers, CPUs: runtime.NumCPU(), Dir: e.dir}
	for _, s := range selected {
		res := &result{System: s.name, Floor: s.floor}
		rep.Results = append(rep.Results, res)
		progress("opening %s", s.name)
		op, stop, err := s.open(ctx, e)
		if err != nil {
			res.Error = err.Error()
			progress("%s: %v", s.name, err)
			continue
		}
		defer stop()
		// Warm up: connections, caches, the first plans.
		if _, err := measure(ctx, op, 2*(*callers), *callers); err != nil {
			res.Error = "warm-up: " + err.Error()
			progress("%s: %v", s.name, err)
			continue
		}
		live = append(live, opened{res, op, s.postgres})
	}
	for r := range *rounds {
		for k := range live {
			o := live[(k+r)%len(live)] // rotate who goes first
			var before, after int64
			if o.pg {
				before, err = nextXID(ctx, admin)
			}
			var seq run
			if err == nil {
				seq, err = measure(ctx, o.op, *seqOps, 1)
			}
			if err == nil && o.pg {
				after, err = nextXID(ctx, admin)
				o.res.WriteXacts = append(o.res.WriteXacts, float64(after-before)/float64(seq.Ops))
			}
			if err == nil {
				o.res.Seq = append(o.res.Seq, seq)
				var par run
				par, err = measure(ctx, o.op, *parOps, *callers)
				o.res.Par = append(o.res.Par, par)
				progress("round %d %-16s seq %7.0f µs mean (p99 %7.0f)  %d callers %7.0f/s (p50 %7.0f µs, p99 %7.0f µs)",
					r+1, o.res.System, seq.MeanMicros, seq.P99Micros, *callers, par.PerSecond, par.P50Micros, par.P99Micros)
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("round %d, %s: %w", r+1, o.res.System, err)
			}
		}
	}
	byName := map[string]*result{}
	for _, res := range rep.Results {
		byName[res.System] = res
	}
	for _, res := range rep.Results {
		f := byName[res.Floor]
		if f == nil || len(f.Seq) != len(res.Seq) {
			continue
		}
		for r := range res.Seq {
			res.SeqRatio = append(res.SeqRatio, res.Seq[r].MeanMicros/f.Seq[r].MeanMicros)
			res.ParRatio = append(res.ParRatio, res.Par[r].PerSecond/f.Par[r].PerSecond)
		}
	}
	rep.TotalSecs = time.Since(began).Seconds()
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(os.Stdout, rep)
	return nil
}

// nextXID returns the next transaction id the server will assign (it
// consumes none itself: a read-only query).
func nextXID(ctx context.Context, conn *pgx.Conn) (int64, error) {
	var x int64
	err := conn.QueryRow(ctx, "SELECT pg_snapshot_xmax(pg_current_snapshot())::TEXT::BIGINT").Scan(&x)
	return x, err
}

func names() []string {
	var n []string
	for _, s := range registry {
		n = append(n, s.name)
	}
	return n
}

// printTable prints, per system, the median over the rounds and the
// spread (lowest–highest round) of each figure.
func printTable(w io.Writer, rep *report) {
	fmt.Fprintf(w, "%d rounds, %d sequential and %d concurrent executions per system and round, %d callers, %d CPUs, %.0f s in all\n\n",
		rep.Rounds, rep.SeqOps, rep.ParOps, rep.Callers, rep.CPUs, rep.TotalSecs)
	fmt.Fprintf(w, "| system | sequential: executions/s | median | p99 | × floor (mean time) | %d callers: executions/s | median | p99 | × floor (throughput) |\n", rep.Callers)
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, res := range rep.Results {
		if res.Error != "" {
			fmt.Fprintf(w, "| %s | not measured: %s |\n", res.System, res.Error)
			continue
		}
		get := func(runs []run, f func(run) float64) []float64 {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, f(r))
			}
			return xs
		}
		ps := func(r run) float64 { return r.PerSecond }
		p50 := func(r run) float64 { return r.P50Micros }
		p99 := func(r run) float64 { return r.P99Micros }
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", res.System,
			spread(get(res.Seq, ps), "%.0f"), spread(get(res.Seq, p50), "%.0f µs"), spread(get(res.Seq, p99), "%.0f µs"), ratio(res.SeqRatio),
			spread(get(res.Par, ps), "%.0f"), spread(get(res.Par, p50), "%.0f µs"), spread(get(res.Par, p99), "%.0f µs"), ratio(res.ParRatio))
	}
	var xacts []string
	for _, res := range rep.Results {
		if len(res.WriteXacts) > 0 {
			xacts = append(xacts, res.System+" "+spread(res.WriteXacts, "%.2f"))
		}
	}
	if len(xacts) > 0 {
		fmt.Fprintf(w, "\nPostgreSQL write transactions per execution (sequential runs): %s\n", strings.Join(xacts, "; "))
	}
}

// spread formats the median of xs and, with more than one, their range.
func spread(xs []float64, format string) string {
	if len(xs) == 0 {
		return ""
	}
	s := slices.Sorted(slices.Values(xs))
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if len(s) == 1 {
		return fmt.Sprintf(format, m)
	}
	return fmt.Sprintf(format+" (%s–%s)", m, strings.TrimSuffix(fmt.Sprintf(format, s[0]), " µs"), fmt.Sprintf(format, s[len(s)-1]))
}

func ratio(xs []float64) string {
	if len(xs) == 0 {
		return "(floor)"
	}
	format := "%.2f×"
	if slices.Max(xs) < 0.1 {
		format = "%.3f×"
	}
	return spread(xs, format)
}
