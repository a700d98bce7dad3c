package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost"
	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/devkit/sandbox"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

// connhost demo, one idea per file:
//
//   - demo.go: the command, its work directory and its verdict;
//   - demo_script.go: the four parts of the story, step by step;
//   - demo_commands.go: the connhost commands a part runs, and what it
//     checks in their answers;
//   - demo_providers.go: what the providers hold, and its checks;
//   - demo_runner.go: how a command runs (a child process of this binary,
//     through internal/proc) and is shown;
//   - demo_steps.go: the steps of the transcript, printed as text or as
//     one JSON line each (--json); the text is wrapped and clipped by
//     package cli, as the rest of the CLI's.

func (k *kit) demoCommand() *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo [--keep]",
		Short: "Show a crash between a payment and its record, and what recovery does",
		Long: `demo walks through the story connhost exists for: a call whose process is
killed after the provider applied it but before the outcome was recorded,
and how each recovery policy answers on restart:

  1. a payment (idempotent-retry): re-dispatched with the same key, Stripe
     replays its first answer, one charge;
  2. an email (reconcile): connhost asks Mailpit whether the message exists
     and records it, no second send;
  3. a manual call: recovery_required, the session is fenced until an
     operator resolves it;
  4. proof: the providers' objects against the ledger's executions.

It starts the provider sandbox (the Stripe and Mailpit emulators) in-process,
works in a throwaway directory (removed at the end unless --keep) and runs
every step as a real child process of this binary (exec, approve, history,
ls, resolve), killed with SIGKILL through CONNHOST_CRASH_AT. The modules come
from --modules, or are built from plugins/ when missing there (run demo from
the source tree then); the manifests come from --manifests. --data and
--config are not used.

With --json it prints one JSON object per step (a machine-readable
transcript), the last one {"kind": "summary", "ok": ...}. It exits 0 when
every check holds and 1 otherwise.`,
		Example: `  connhost demo
  connhost demo --keep
  connhost demo --json | jq -c 'select(.kind == "summary")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if k.useShipped(cmd) {
				k.runOnShipped("")
			}
			return k.runDemo(cmd.Context(), keep)
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the demo's work directory (data, config, manifests, modules) and print where it is")
	return c
}

// The demo's sessions, one per part, and the reviewer and operator names.
const (
	demoSessionPayment = "demo-payment"
	demoSessionEmail   = "demo-email"
	demoSessionManual  = "demo-manual"
	demoReviewer       = "rita"
	demoOperator       = "oscar"
	demoAPIKey         = "sk_test_demo"
	// demoChildTimeout bounds every child connhost process.
	demoChildTimeout = 2 * time.Minute
)

// demo is one run of connhost demo.
type demo struct {
	k      *kit
	w      io.Writer
	json   bool
	self   string
	dir    string // the work directory ($DEMO)
	data   string
	config string
	mfs    string // manifests (the shipped ones, pinned to the modules used)
	manual string // manifests with create_payment declared manual
	mods   string
	sb     *sandbox.Sandbox
	client *sandbox.Client

	step    int
	scene   string
	say     []string
	checks  int
	failed  []string
	kills   int
	started time.Time
	// piPayment is the PaymentIntent of part 1 (looked up in part 3).
	piPayment string
	// pendingApproval is the approval request of the current part.
	pendingApproval *ledger.Approval
	// pendingHistory is a history step awaiting its decision checks.
	pendingHistory *demoStep
	// cancel stops the demo (its output is gone).
	cancel context.CancelFunc
}

func (k *kit) runDemo(ctx context.Context, keep bool) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &demo{k: k, w: k.Stdout(), json: k.JSON(), started: time.Now(), cancel: cancel}
	// A reader that goes away (connhost demo | head) must not kill the
	// demo before it removes its work directory: writes fail instead and
	// stop the demo.
	signal.Ignore(syscall.SIGPIPE)
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find own binary: %w", err)
	}
	d.self = self
	if d.dir, err = os.MkdirTemp("", "connhost-demo-"); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer func() {
		if keep {
			if !d.json {
				fmt.Fprintf(d.w, "\nThe work directory is kept: %s\n", d.dir)
			}
			return
		}
		if rerr := os.RemoveAll(d.dir); rerr != nil && err == nil {
			err = fmt.Errorf("demo: remove %s: %w", d.dir, rerr)
		}
	}()
	d.data = filepath.Join(d.dir, "data")
	d.config = filepath.Join(d.dir, "connhost.toml")
	d.mfs = filepath.Join(d.dir, "manifests")
	d.manual = filepath.Join(d.dir, "manifests-manual")
	d.mods = filepath.Join(d.dir, "modules")

	d.sb, err = sandbox.Start(ctx, sandbox.Options{})
	if err != nil {
		return fmt.Errorf("demo: start provider sandbox: %w", err)
	}
	defer d.sb.Close()
	d.client = d.sb.Client()
	d.client.APIKey = demoAPIKey

	if err := d.setup(ctx); err != nil {
		return err
	}
	for _, part := range []struct {
		scene, title string
		run          func(context.Context) error
	}{
		{"payment", "A payment, killed at the worst moment", d.partPayment},
		{"email", "An email, killed the same way", d.partEmail},
		{"manual", "A call only an operator can settle", d.partManual},
		{"proof", "Proof: what the providers hold against what the ledger says", d.partProof},
	} {
		if err := ctx.Err(); err != nil {
			return err
		}
		d.heading(part.scene, part.title)
		if err := part.run(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st := d.newStep("error")
			d.check(st, "part "+part.scene+" ran to its end", false, err.Error())
			d.emit(st)
		}
	}
	return d.summary(keep)
}

// setup copies the modules and manifests into the work directory, writes
// connhost.toml and reports what the demo runs on.
func (d *demo) setup(ctx context.Context) error {
	d.scene = "setup"
	ms, err := d.k.LoadManifests()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	for _, dir := range []string{d.data, d.mfs, d.manual, d.mods} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	d.printf("connhost demo: a crash between a side effect and its record\n")
	d.printf("%s\n", strings.Repeat("=", 61))
	d.sayf("connhost runs tool connectors for AI agents and promises that a crash never silently performs an approved action twice. " +
		"This demo kills connhost at the worst possible moment — after the provider applied a call, before connhost wrote down the outcome — and shows what each recovery policy does when connhost starts again.")
	st := d.newStep("setup")
	for _, name := range []string{"payments", "email"} {
		i := slices.IndexFunc(ms, func(m *manifests.Manifest) bool { return m.Connector.Name == name })
		if i < 0 {
			return fmt.Errorf("demo: no manifest of connector %q in %s (set --manifests)", name, d.k.Manifests())
		}
		m := ms[i]
		from := m.ModulePath(d.k.Modules())
		how := "from " + from
		if d.k.shipped {
			if err := connhost.WriteModules(d.mods); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			from, how = m.ModulePath(d.mods), "built into this binary"
		} else if _, err := os.Stat(from); err != nil {
			src := filepath.Join("plugins", name)
			built, _, err := wasmbuild.Cached(ctx, src)
			if err != nil {
				return fmt.Errorf("demo: %s is missing and building %s failed (run demo from the source tree, or build the modules with connhost build): %w", from, src, err)
			}
			from, how = built, "built from "+src+" (build cache)"
		}
		dst := m.ModulePath(d.mods)
		if from != dst {
			if err := copyFileTo(from, dst); err != nil {
				return fmt.Errorf("demo: %w", err)
			}
		}
		digest, err := wasmbuild.FileDigest(dst)
		if err != nil {
			return err
		}
		text, err := d.k.manifestText(m)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		pin := "matches the manifest's pin"
		if m.Connector.SHA256 != digest {
			if text, err = manifests.SetSHA256(text, digest); err != nil {
				return fmt.Errorf("demo: pin the copy of %s: %w", m.Path, err)
			}
			pin = "differs from the manifest's pin: the demo's copy of the manifest is pinned to it"
		}
		base := filepath.Base(m.Path)
		if err := os.WriteFile(filepath.Join(d.mfs, base), text, 0o644); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		manualText := text
		if name == "payments" {
			manualText, err = manifests.SetOperationField(text, "create_payment", "recovery", string(manifests.PolicyManual))
			if err == nil {
				_, err = manifests.Parse(filepath.Join(d.manual, base), manualText)
			}
			if err != nil {
				return fmt.Errorf("demo: declare create_payment manual in a copy of %s: %w", m.Path, err)
			}
		}
		if err := os.WriteFile(filepath.Join(d.manual, base), manualText, 0o644); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		st.Notes = append(st.Notes, fmt.Sprintf("%s module %s, sha256 %s… (%s)", name, how, digest[:12], pin))
	}
	cfg := fmt.Sprintf(`# Written by connhost demo: the connectors talk to the in-process sandbox.
[connectors.payments]
api_key = %q
base_url = %q
allow_http = [%q]

[connectors.email]
base_url = %q
default_from = "shop@demo.invalid"
allow_http = [%q]
`, demoAPIKey, d.sb.PaymentsURL(), d.sb.PaymentsURL(), d.sb.EmailURL(), d.sb.EmailURL())
	if err := os.WriteFile(d.config, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	st.Notes = append([]string{
		"Stripe emulator   " + d.sb.PaymentsURL(),
		"Mailpit emulator  " + d.sb.EmailURL(),
		"work directory    $DEMO = " + d.dir,
	}, st.Notes...)
	st.Notes = append(st.Notes,
		"$DEMO/connhost.toml points the connectors at the emulators; its allow_http lists their loopback origins,",
		"an operator override of the manifests' http allowlist (connhost warns about it on stderr at every start).",
		"Every command below is a separate process of this binary, run as",
		"  connhost --data $DEMO/data --config $DEMO/connhost.toml --manifests $DEMO/manifests --modules $DEMO/modules --json <command>",
		"and killing one is a real SIGKILL: no deferred code, no flush, no graceful close.")
	d.emit(st)
	return nil
}

// summary prints the verdict and returns the exit error, if any.
func (d *demo) summary(keep bool) error {
	d.scene = "summary"
	st := d.newStep("summary")
	st.OK = len(d.failed) == 0
	st.Failed = d.failed
	st.Kills = d.kills
	st.Elapsed = time.Since(d.started).Round(100 * time.Millisecond).String()
	if keep {
		st.WorkDir = d.dir
	}
	if d.json {
		d.writeLine(st)
	} else {
		d.printf("\n%s\n", strings.Repeat("=", 61))
		if st.OK {
			d.printf("All %d checks hold: %d processes killed by SIGKILL, no duplicate effect at any provider (%s).\n", d.checks, d.kills, st.Elapsed)
		} else {
			d.printf("DEMO FAILED: %d of %d checks did not hold:\n", len(d.failed), d.checks)
			for _, f := range d.failed {
				d.printf("  ✗ %s\n", f)
			}
		}
	}
	if st.OK {
		return nil
	}
	if d.json {
		return &cli.ExitError{Code: cli.ExitFailure}
	}
	return &cli.ExitError{Code: cli.ExitFailure, Err: fmt.Errorf("demo: %d check(s) failed", len(d.failed))}
}

// copyFileTo copies src to dst.
func copyFileTo(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
