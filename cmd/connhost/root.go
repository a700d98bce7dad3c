package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

const exitCodesHelp = `connhost exits with one of these codes:

  0  ok: the command did what it was asked
  1  failure: the command failed (the reason is printed on stderr)
  2  usage error: the command line is wrong, and running it again fails
     the same way: unknown command or flag, missing or malformed argument,
     a path that does not exist, or exec's call itself (unknown tool,
     arguments that do not match the tool's schema, a bad session or
     tool-call id); nothing was recorded
  3  findings: audit or crashtest found problems
  4  recovery required: exec's execution is recovery_required, the session
     is fenced by uncertain calls, or recover left recovery_required
     executions for an operator (see connhost ls --state recovery_required)
  5  not succeeded: exec's execution ended in another status than succeeded
     (failed, awaiting_approval, pending, rejected, expired, abandoned,
     cancelled); the result is printed as usual
  6  ledger damaged or missing: the ledger (in --data, or --ledger's
     database) is missing, behind its mark or its witness (writes were lost,
     or an older copy was restored), another ledger's, or its log or records
     are damaged; nothing was done. Put the newest copy back; or restore a
     backup and run connhost ledger accept-restore, which fences what the
     backup does not know; or pass --init to start a new, empty ledger (the
     old one is set aside, not deleted)

With --json, a failure is printed on stdout as an RFC 9457 problem document
with a stable "code" (the codes of the HTTP API, ledger_damaged for exit
code 6, invalid_config for a config refused before the command started,
which is also printed on stderr); without it, as one "connhost: ..." line
on stderr.`

// globals are the persistent flags.
type globals struct {
	data      string
	manifests string
	modules   string
	config    string
	json      bool
	init      bool
	// ledger is a shared ledger's connection string (--ledger); node
	// this process's node id on it (--node).
	ledger string
	node   string
	// witness is the ledger's witness file (--witness).
	witness string
	// cacheDir is where compiled modules are kept (--cache-dir).
	cacheDir string
	// logLevel is --log-level: the least severe records servers log.
	logLevel string
}

// app is one invocation of the CLI: its streams, flags and the hooks that
// tests replace.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	g              globals

	// open opens the executor the command works on. The default opens
	// host.Open on --data with the manifests of --manifests and the
	// modules of --modules.
	open func(ctx context.Context, o openOptions) (*host.Executor, error)
	// openLedger opens the ledger for the read-only commands (ls,
	// history). The default opens --data/ledger, never creating one.
	openLedger func(ctx context.Context) (ledger.Ledger, error)
	// isTerminal reports whether w is a terminal (progress output).
	isTerminal func(w io.Writer) bool
	// warnedDSN: the warning about a password on the command line was
	// printed.
	warnedDSN bool
	// shipped: the command runs on the connectors built into this binary
	// (see useShipped), not on --manifests.
	shipped bool
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *app {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, isTerminal: isTerminal}
	a.open = a.openExecutor
	a.openLedger = a.openLedgerDirect
	return a
}

// runError marks errors returned by a command's RunE, so that execute can
// tell them from cobra's own (usage) errors.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// execute runs args and returns the exit code, printing an error once.
func (a *app) execute(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	_, err := root.ExecuteContextC(ctx)
	if err == nil {
		return cli.ExitOK
	}
	var (
		re *runError
		ee *cli.ExitError
		ue *cli.UsageError
		ae *argumentError
	)
	code := cli.ExitFailure
	switch {
	case errors.As(err, &ue), errors.As(err, &ae):
		code = cli.ExitUsage
	case !errors.As(err, &re):
		// Cobra's own errors: unknown command or flag, bad arguments,
		// missing required flags.
		code = cli.ExitUsage
	case errors.As(err, &ee):
		code = ee.Code
		if ee.Err == nil {
			return code
		}
		err = ee.Err
	default:
		var fe *host.FencedError
		switch {
		case errors.As(err, &fe):
			code = cli.ExitRecoveryRequired
		case errors.Is(err, ledger.ErrCorrupt), errors.Is(err, ledger.ErrNoLedger):
			code = cli.ExitLedgerDamaged
		}
	}
	if re != nil && errors.As(err, &re) {
		err = re.err
	}
	a.printError(err, code == cli.ExitUsage && !errors.As(err, &ae))
	return code
}

// printError prints err once: a problem document on stdout with --json, a
// "connhost: …" line (plus details) on stderr otherwise.
func (a *app) printError(err error, usage bool) {
	p := problemFor(err, usage)
	if a.g.json {
		cli.WriteJSON(a.stdout, p)
		if p.Code != httpapi.CodeInvalidConfig {
			return
		}
		// A refused config is also said where an operator watching a
		// server (serve --json, its stdout read by a program) looks.
	}
	cli.RenderProblem(a.stderr, p)
}

// argumentError marks the executor's refusal of exec's call itself
// (unknown tool, invalid arguments, bad identity): a command-line mistake
// (exit 2), reported with the executor's problem.
type argumentError struct{ err error }

func (e *argumentError) Error() string { return e.err.Error() }
func (e *argumentError) Unwrap() error { return e.err }

// refusal is an executor refusal that the CLI itself finds (e.g. history
// of an unknown id): the executor's sentinel, so the problem has the
// executor's code, and a sentence for people (see host.Detail).
type refusal struct {
	sentinel error
	detail   string
}

func refusef(sentinel error, format string, args ...any) error {
	return &refusal{sentinel: sentinel, detail: fmt.Sprintf(format, args...)}
}

func (e *refusal) Error() string  { return e.detail }
func (e *refusal) Unwrap() error  { return e.sentinel }
func (e *refusal) Detail() string { return e.detail }

// problemFor maps a CLI error to the problem the HTTP API would answer.
func problemFor(err error, usage bool) *httpapi.Problem {
	var (
		res host.Result
		rp  *remoteProblemError
		de  *ledger.DamageError
	)
	switch {
	case errors.As(err, &rp):
		return rp.Problem
	case usage:
		return httpapi.NewProblem(httpapi.CodeBadRequest, err.Error())
	case errors.As(err, &de):
		return httpapi.NewProblem(httpapi.CodeLedgerDamaged, "ledger: "+de.What+"; "+de.Remedy("pass --init", "run connhost ledger accept-restore"))
	case errors.Is(err, ledger.ErrCorrupt), errors.Is(err, ledger.ErrNoLedger):
		return httpapi.NewProblem(httpapi.CodeLedgerDamaged, err.Error())
	case errors.Is(err, host.ErrBadCall), errors.Is(err, host.ErrUnknownTool), errors.Is(err, host.ErrInvalidArguments),
		errors.Is(err, host.ErrIntentMismatch), errors.Is(err, host.ErrSessionFenced), errors.Is(err, host.ErrNotFound),
		errors.Is(err, host.ErrApprovalDigest), errors.Is(err, host.ErrApprovalExpired), errors.Is(err, host.ErrNotAwaitingApproval),
		errors.Is(err, host.ErrNotRecoveryRequired), errors.Is(err, host.ErrRecoveryRequired), errors.Is(err, host.ErrPruned),
		errors.Is(err, host.ErrApprovalRequired), errors.Is(err, host.ErrClosed):
		var rr *resultError
		if errors.As(err, &rr) {
			res = rr.res
		}
		return httpapi.ProblemOf(err, res)
	case errors.Is(err, server.ErrInvalidConfig), errors.Is(err, host.ErrMissingConfig), errors.Is(err, host.ErrConfigURLDenied):
		// Refused before anything ran: the reason, not "internal".
		return httpapi.NewProblem(httpapi.CodeInvalidConfig, err.Error())
	}
	// Everything else is reported as is: unlike the HTTP API, the CLI's
	// user owns the process and needs the real cause.
	return httpapi.NewProblem(httpapi.CodeInternal, err.Error())
}

// resultError attaches the Result the executor returned with an error.
type resultError struct {
	err error
	res host.Result
}

func (e *resultError) Error() string { return e.err.Error() }
func (e *resultError) Unwrap() error { return e.err }

func withResult(err error, res host.Result) error {
	if err == nil {
		return nil
	}
	return &resultError{err: err, res: res}
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "connhost",
		Short: "Run side-effecting tool connectors durably",
		Long: `connhost runs side-effecting tool connectors (send an email, charge a card)
as WebAssembly modules for AI-agent runtimes. A ledger records the intent
before and the outcome after every connector call, and after a crash each
operation's declared recovery policy (manual, idempotent-retry, reconcile)
decides what happens to calls whose outcome is unknown: an approved action is
never silently repeated.

Exit codes: 0 ok, 1 failure, 2 usage error, 3 audit/crashtest findings,
4 recovery required or session fenced, 5 execution not succeeded,
6 ledger damaged or missing (see "connhost help exit-codes").

Every command reads [server] data, manifests, modules, witness and ledger
from --config (relative paths there are relative to the config file's
directory), and finds a running server through that data directory; flags
given on the command line win.

The examples run from the repository's root. Commands that load the
connectors need their config (payments' api_key): the examples pass
docs/connhost.example.toml with --config, which takes it and the API's
tokens from the environment (export STRIPE_SECRET_KEY, CONNHOST_TOKEN and
CONNHOST_TOKEN_RITA first; the file shows how, and connhost serve --help
describes every key). Ids are not placeholders: the same session and
tool-call id always name the same execution, so the examples of one command
follow from another's.`,
		Example: `  connhost build plugins/payments --pin
  connhost dev
  connhost exec --config docs/connhost.example.toml --session s1 --tool-call call_1 --tool payments.create_payment \
      --args '{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}'
  connhost ls --state recovery_required`,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true,
		},
		Version: buildinfo.Read().Short(),
	}
	root.SetVersionTemplate(buildinfo.Read().Text())
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if _, err := parseLogLevel(a.g.logLevel); err != nil {
			return err
		}
		// One config for every command: [server]'s paths from --config
		// (relative to the config file), unless flags name them. A
		// config that does not load is reported by the command that
		// reads it; its unset variables do not hide the paths.
		if a.g.config != "" {
			if cfg, _ := a.loadConfigLenient(); cfg != nil {
				a.applyServerConfig(cmd, cfg)
			}
		}
		return nil
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.g.data, "data", "./.connhost", "data directory (the ledger)")
	pf.StringVar(&a.g.manifests, "manifests", "./manifests", "directory of connector manifests (*.toml)")
	pf.StringVar(&a.g.modules, "modules", "./build", "directory of built connector modules (where connhost build writes)")
	pf.StringVar(&a.g.config, "config", "", "connhost.toml with connector config and secrets (see connhost serve --help)")
	pf.BoolVar(&a.g.json, "json", false, "print machine-readable JSON")
	pf.StringVar(&a.g.logLevel, "log-level", "info", "the least severe log records written by serve, dev and mcp: debug, info, warn or error")
	pf.BoolVar(&a.g.init, "init", false, "start a new, empty ledger in place of a missing or damaged one, in --data or on --ledger (the remains and the witness are set aside, not deleted; refused where the ledger is healthy)")
	pf.StringVar(&a.g.ledger, "ledger", "", "shared ledger on PostgreSQL, postgres://user@host/db (default $"+EnvLedger+" or [server] ledger; without one, the Pebble ledger in --data; a password goes in PGPASSWORD, not here)")
	pf.StringVar(&a.g.node, "node", "", "this process's node id on a shared ledger (default [server] node, else the host name for serve and dev, <host>-cli-<pid> otherwise)")
	pf.StringVar(&a.g.cacheDir, "cache-dir", "", "where compiled connector modules are kept, shared by every data directory of this machine (default [server] cache_dir, else connhost/wazero in the user's cache directory)")
	pf.StringVar(&a.g.witness, "witness", "", "the ledger's witness: what this deployment acknowledged of its ledger, kept where a restore of --data (or of the database) does not reach (default [server] witness, else <data>.witness beside --data)")

	root.AddCommand(
		a.execCommand(), a.lsCommand(), a.historyCommand(), a.recoverCommand(), a.resolveCommand(),
		a.approveCommand(true), a.approveCommand(false), a.cancelCommand(), a.toolsCommand(), a.pruneCommand(),
		a.serveCommand(), a.mcpCommand(), a.ledgerCommand(),
		&cobra.Command{Use: "exit-codes", Short: "The exit codes of connhost", Long: exitCodesHelp}, a.versionCommand(),
	)
	root.AddCommand(a.packageCommands()...)
	root.SetFlagErrorFunc(suggestFlags)
	wrapRunE(root)
	return root
}

// suggestFlags is the root's flag error function: a mistyped flag gets
// suggestions the way cobra suggests for a mistyped command (a flag of
// the command within its SuggestionsMinimumDistance, or one the typed
// name is a prefix of). Other flag errors are returned as they are.
func suggestFlags(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) || ne.GetSpecifiedShortnames() != "" {
		return err
	}
	typed := strings.ToLower(ne.GetSpecifiedName())
	max := c.SuggestionsMinimumDistance
	if max <= 0 {
		max = 2
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if name := strings.ToLower(f.Name); levenshtein(typed, name) <= max || strings.HasPrefix(name, typed) {
			names = append(names, "--"+f.Name)
		}
	})
	if len(names) == 0 {
		return err
	}
	return fmt.Errorf("%w\n\nDid you mean this?\n\t%s\n", err, strings.Join(names, "\n\t"))
}

// levenshtein is the edit distance between a and b (bytes: flag names
// are ASCII).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// wrapRunE tags every RunE error as a runError (see execute).
func wrapRunE(c *cobra.Command) {
	if f := c.RunE; f != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := f(cmd, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapRunE(sub)
	}
}

// openOptions tune openExecutor for a command.
type openOptions struct {
	// progress receives the number of pending executions recovered so far
	// while Open runs recovery.
	progress func(done int)
	// config hands config values to connectors.
	config func(connector, key string) (string, bool)
	// observer receives metrics.
	observer host.Observer
	// logger receives the executor's logs; the default discards them in
	// one-shot commands.
	logger *slog.Logger
	// allowUnpinned loads unpinned modules (dev only).
	allowUnpinned bool
	// extraOrigins adds origins to a connector's http capability (dev
	// only: the sandbox's loopback ports).
	extraOrigins func(m *manifests.Manifest) []string
	// server: the executor serves the API (serve, dev), which sets the
	// default node id on a shared ledger.
	server bool
	// leaseTTL is the node's lease TTL on a shared ledger; 0 takes the
	// config's, else host.DefaultLeaseTTL.
	leaseTTL time.Duration
	// existing: the command acts on recorded executions (recover, prune,
	// approve, reject, resolve, cancel), so a --data directory that does
	// not exist is a mistyped path (exit 2), not a ledger to create.
	existing bool
}

// openExecutor opens the executor on --data with every manifest in
// --manifests and the modules in --modules. Opening runs recovery, which
// may call connectors, so every command that opens it needs the config
// the manifests require: without it, it refuses to start and says how to
// give it.
func (a *app) openExecutor(ctx context.Context, o openOptions) (*host.Executor, error) {
	ms, err := a.loadManifests()
	if err != nil {
		return nil, err
	}
	explicitLogger := o.logger
	if o.logger == nil {
		o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.extraOrigins != nil {
		for _, m := range ms {
			if add := o.extraOrigins(m); len(add) > 0 {
				o.logger.Warn("dev mode: extending the http capability", "connector", m.Connector.Name, "origins", add)
				m.Capabilities.HTTP = append(m.Capabilities.HTTP, add...)
			}
		}
	}
	cfg, err := a.serverConfig()
	if err != nil {
		return nil, err
	}
	if o.existing && cfg.Server.Ledger == "" && !a.g.init {
		if err := mustExist("--data", a.g.data); err != nil {
			return nil, err
		}
	}
	if o.leaseTTL != 0 {
		cfg.Server.LeaseTTL = o.leaseTTL
	}
	ex, err := server.OpenExecutor(ctx, cfg, server.ExecutorOptions{
		Manifests:        ms,
		Logger:           o.logger,
		Warnings:         a.warnLogger(explicitLogger),
		Observer:         o.observer,
		Values:           o.config,
		AllowUnpinned:    o.allowUnpinned,
		OneShot:          !o.server,
		Init:             a.g.init,
		RecoveryProgress: o.progress,
	})
	return ex, explainMissingModule(explainConfigURL(explainMissingConfig(err, a.g.config), a.g.config), ms)
}

// serverConfig is the config a command runs on: --config's file (an
// empty one without it) with the flags over it: --data, --manifests,
// --modules, --witness, --ledger (or $CONNHOST_LEDGER) and --node.
func (a *app) serverConfig() (*server.Config, error) {
	dsn, file, err := a.sharedLedger()
	if err != nil {
		return nil, err
	}
	var cfg server.Config
	if file != nil {
		cfg = *file
	}
	cfg.Server.Data, cfg.Server.Manifests, cfg.Server.Modules = a.g.data, a.g.manifests, a.g.modules
	cfg.Server.Witness, cfg.Server.Ledger = a.witnessPath(file), dsn
	cfg.Server.CacheDir = a.cacheDir(file)
	if a.g.node != "" {
		cfg.Server.Node = a.g.node
	}
	return &cfg, nil
}

// explainMissingModule rewrites host.Open's error for a connector whose
// module file is not there into what to do about it; other errors are
// returned as they are.
func explainMissingModule(err error, ms []*manifests.Manifest) error {
	var pe *fs.PathError
	if !errors.As(err, &pe) || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, m := range ms {
		if path := m.ModulePath(""); filepath.Base(path) == filepath.Base(pe.Path) {
			return &missingConfigError{err: err, msg: fmt.Sprintf(
				"the module of connector %s is missing: there is no %s; build it (connhost build plugins/%s for a shipped connector writes it to --modules), or point --modules at the directory that holds it",
				m.Connector.Name, pe.Path, m.Connector.Name)}
		}
	}
	return err
}

// withLedger opens the ledger in --data for reading, runs f and closes it.
// It loads no connector and runs no recovery, so a listing needs no
// connector config and shows the ledger as recorded; it never creates a
// ledger (a mistyped --data must not leave an empty one behind), and a
// --data directory that does not exist is a usage error, not an empty
// listing. A missing ledger in an existing directory is an error wrapping
// ledger.ErrNoLedger (exit 6).
func (a *app) withLedger(ctx context.Context, f func(led ledger.Ledger) error) error {
	led, err := a.openLedger(ctx)
	if errors.Is(err, ledger.ErrNoLedger) {
		// Never an empty answer: that would read as "nothing waits".
		if dsn, _, _ := a.sharedLedger(); dsn != "" {
			return refusef(ledger.ErrNoLedger, "there is no ledger in the shared database %s (it holds no connhost tables): nothing was ever recorded there (serve, dev and exec create them; is --ledger the right database?)", server.RedactDSN(dsn))
		}
		return refusef(ledger.ErrNoLedger, "there is no ledger in %s: nothing was ever recorded there (serve, dev and exec create one; is --data the right directory?)", a.g.data)
	}
	if err != nil {
		return lockedError(ctx, a.g.data, err)
	}
	err = f(led)
	if cerr := led.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// openLedgerDirect opens the ledger in --data without creating one
// (unless --init), or the shared ledger (without creating its schema).
func (a *app) openLedgerDirect(ctx context.Context) (ledger.Ledger, error) {
	dsn, cfg, err := a.sharedLedger()
	if err != nil {
		return nil, err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if dsn != "" {
		return server.OpenSharedLedger(ctx, server.SharedLedgerOptions{DSN: dsn, MustExist: !a.g.init, Witness: a.witnessPath(cfg), Init: a.g.init, Logger: quiet})
	}
	create := ledger.CreateNever
	if a.g.init {
		create = ledger.CreateInit
	} else if err := mustExist("--data", a.g.data); err != nil {
		return nil, err
	}
	return ledger.Open(ctx, ledger.Options{
		Dir:         filepath.Join(a.g.data, "ledger"),
		WitnessPath: a.witnessPath(cfg),
		Create:      create,
		Logger:      quiet,
	})
}

// witnessPath is the ledger's witness file: --witness, else the config's
// [server] witness, else the data directory's path plus ".witness" (a
// sibling of --data, so that a restored or deleted data directory is seen).
func (a *app) witnessPath(cfg *server.Config) string {
	switch {
	case a.g.witness != "":
		return a.g.witness
	case cfg != nil && cfg.Server.Witness != "":
		return cfg.Server.Witness
	}
	return filepath.Clean(a.g.data) + ledger.WitnessSuffix
}

// cacheDir is where compiled modules are kept: --cache-dir, else the
// config's [server] cache_dir, else "" (host.DefaultCacheDir).
func (a *app) cacheDir(cfg *server.Config) string {
	if a.g.cacheDir == "" && cfg != nil {
		return cfg.Server.CacheDir
	}
	return a.g.cacheDir
}

// mustExist refuses a path of a global flag (given, or its default) that
// does not exist: the command line is wrong, and running it again fails
// the same way (exit 2, see exitCodesHelp).
func mustExist(flag, path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return cli.Usagef("%s %s: no such file or directory", flag, path)
	}
	return nil
}

// withExecutor opens the executor, runs f and closes it.
func (a *app) withExecutor(ctx context.Context, o openOptions, f func(ex *host.Executor) error) error {
	ex, err := a.open(ctx, o)
	if err != nil {
		return lockedError(ctx, a.g.data, err)
	}
	err = f(ex)
	if cerr := ex.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// readArg returns s, or the contents of a file for "@path" ("@-" reads
// stdin).
func (a *app) readArg(s string) ([]byte, error) {
	path, ok := strings.CutPrefix(s, "@")
	if !ok {
		return []byte(s), nil
	}
	if path == "-" {
		return io.ReadAll(a.stdin)
	}
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// isTerminal reports whether w is a character device.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// warnLogger is logger, or, when a one-shot command discards the
// executor's logs, a logger that prints warnings on stderr: an operator
// override must never be silent.
func (a *app) warnLogger(logger *slog.Logger) *slog.Logger {
	if logger != nil {
		return logger
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// loadConfig reads and validates --config's file (server.LoadConfig); a
// file that does not exist is a usage error (exit 2).
func loadConfig(path string, env func(string) (string, bool)) (*server.Config, error) {
	if err := mustExist("--config", path); err != nil {
		return nil, err
	}
	return server.LoadConfig(path, env)
}
