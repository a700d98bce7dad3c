package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/httpapi"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/internal/sandbox"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
)

func (a *app) demoCommand() *cobra.Command {
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
			return a.runDemo(cmd.Context(), keep)
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

// demoStep is one object of the --json transcript.
type demoStep struct {
	Step  int    `json:"step"`
	Scene string `json:"scene"`
	// Kind is setup, scene, command, provider, proof, error (a part that
	// could not go on) or summary.
	Kind string `json:"kind"`
	// Say is the narration that leads to the step.
	Say string `json:"say,omitempty"`
	// Command is the command as shown to people; Args is the exact argv
	// after the binary.
	Command     string          `json:"command,omitempty"`
	Args        []string        `json:"args,omitempty"`
	CrashAt     string          `json:"crash_at,omitempty"`
	ExitCode    *int            `json:"exit_code,omitempty"`
	Killed      bool            `json:"killed,omitempty"`
	Signal      string          `json:"signal,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Status      string          `json:"status,omitempty"`
	Source      string          `json:"source,omitempty"`
	Receipt     string          `json:"receipt,omitempty"`
	// Code is the problem code of a refused command (session_fenced).
	Code     string         `json:"code,omitempty"`
	Events   []demoEvent    `json:"events,omitempty"`
	Provider *demoProvider  `json:"provider,omitempty"`
	Proof    []demoProofRow `json:"proof,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
	Checks   []demoCheck    `json:"checks,omitempty"`
	OK       bool           `json:"ok"`
	// Summary fields.
	Failed  []string `json:"failed,omitempty"`
	Kills   int      `json:"kills,omitempty"`
	Elapsed string   `json:"elapsed,omitempty"`
	WorkDir string   `json:"work_dir,omitempty"`
}

// demoEvent is one audit event of a history step.
type demoEvent struct {
	Seq      uint64 `json:"seq"`
	Attempt  int    `json:"attempt"`
	From     string `json:"from,omitempty"`
	To       string `json:"to"`
	Decision string `json:"decision"`
	Actor    string `json:"actor,omitempty"`
	Evidence string `json:"evidence,omitempty"`
}

// demoProvider is what the providers hold, counted through their list APIs.
type demoProvider struct {
	PaymentIntents int `json:"payment_intents"`
	Messages       int `json:"messages"`
	StripeReplays  int `json:"stripe_replays"`
	MessagesSent   int `json:"messages_sent"`
	// ForExecution counts the objects that carry the step's execution's
	// identity (PaymentIntent metadata, or the message's Message-ID).
	ForExecution *int `json:"for_execution,omitempty"`
}

// demoProofRow is one line of the final table.
type demoProofRow struct {
	ExecutionID string `json:"execution_id"`
	Tool        string `json:"tool"`
	Effect      string `json:"effect"`
	Policy      string `json:"policy"`
	State       string `json:"state"`
	Source      string `json:"source,omitempty"`
	Receipt     string `json:"receipt,omitempty"`
	// ProviderObjects counts the provider objects of this execution
	// (external effects only).
	ProviderObjects int `json:"provider_objects"`
}

// demoCheck is one assertion the demo made.
type demoCheck struct {
	What string `json:"what"`
	Got  string `json:"got,omitempty"`
	OK   bool   `json:"ok"`
}

// demo is one run of connhost demo.
type demo struct {
	a      *app
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
	pendingApproval *host.ApprovalInfo
	// pendingHistory is a history step awaiting its decision checks.
	pendingHistory *demoStep
	// cancel stops the demo (its output is gone).
	cancel context.CancelFunc
}

func (a *app) runDemo(ctx context.Context, keep bool) (err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &demo{a: a, w: a.stdout, json: a.g.json, started: time.Now(), cancel: cancel}
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
	ms, err := d.a.loadManifests()
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
			return fmt.Errorf("demo: no manifest of connector %q in %s (set --manifests)", name, d.a.g.manifests)
		}
		m := ms[i]
		from := m.ModulePath(d.a.g.modules)
		how := "from " + from
		if _, err := os.Stat(from); err != nil {
			src := filepath.Join("plugins", name)
			built, _, err := wasmbuild.Cached(ctx, src)
			if err != nil {
				return fmt.Errorf("demo: %s is missing and building %s failed (run demo from the source tree, or build the modules with connhost build): %w", from, src, err)
			}
			from, how = built, "built from "+src+" (build cache)"
		}
		dst := m.ModulePath(d.mods)
		if err := copyFileTo(from, dst); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		digest, err := wasmbuild.FileDigest(dst)
		if err != nil {
			return err
		}
		text, err := os.ReadFile(m.Path)
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

// partPayment: create_payment (idempotent-retry) killed after Stripe charged.
func (d *demo) partPayment(ctx context.Context) error {
	call := demoCall(demoSessionPayment, "call_1", "payments.create_payment",
		`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"order 1001"}`)
	d.sayf("The agent asks connhost to charge 20.00 USD. The manifest says create_payment needs a human's approval, so connhost records the intent and waits: nothing reaches Stripe yet.")
	id, err := d.gated(ctx, d.mfs, call, "payments")
	if err != nil {
		return err
	}
	d.sayf("A reviewer approves exactly these arguments: the approval is bound to the args digest shown, and the first dispatch consumes it.")
	if err := d.approve(ctx, d.mfs, id, "amount matches order 1001"); err != nil {
		return err
	}
	d.sayf("The runtime re-drives the call. connhost writes the dispatch record, the connector sends the request, Stripe charges the card — and the process is killed by SIGKILL the instant the connector returns, before the outcome is recorded (CONNHOST_CRASH_AT=after_plugin_return).")
	d.crashed(ctx, d.mfs, call, id)
	d.sayf("What does Stripe hold now? (Any connhost command would run recovery as it opens the ledger, so the demo asks the provider only.)")
	pis := d.provider(ctx, id, "payments", 1, 1)
	if len(pis) > 0 {
		d.piPayment = pis[0]
	}
	d.sayf("connhost starts again on the same data directory: the agent runtime re-issues the same call. Opening the ledger runs recovery before anything else. " +
		"The call was dispatched and has no outcome, and create_payment's policy is idempotent-retry, so connhost dispatches attempt 2 with the same idempotency key. " +
		"Stripe knows the key and replays its first answer instead of charging again.")
	st, res, _ := d.execResult(ctx, d.mfs, call, "", ExitOK)
	st.ExecutionID = id
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.expect(st, "attempt 2 (the re-dispatch)", fmt.Sprint(res.Attempt), "2")
	d.expect(st, "receipt is the PaymentIntent Stripe created before the kill", res.Receipt, d.piPayment)
	d.emit(st)

	d.sayf("The audit trail shows every transition, who decided it and on what evidence.")
	rec, evs := d.history(ctx, d.mfs, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionRecoverRetry))
	d.sayf("And the provider: still one PaymentIntent, carrying the key of the ledger record.")
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
	if err == nil && len(found) == 1 {
		d.expect(st2, "the PaymentIntent's metadata[connhost_key] is the record's idempotency key", found[0].Metadata["connhost_key"], rec.IdempotencyKey)
	}
	d.fillProvider(ctx, st2, id, "payments", 1, 1)
	if st2.Provider != nil {
		d.expect(st2, "Stripe replayed one answer", fmt.Sprint(st2.Provider.StripeReplays), "1")
	}
	d.emit(st2)
	return nil
}

// partEmail: email.send (reconcile) killed after Mailpit stored it.
func (d *demo) partEmail(ctx context.Context) error {
	call := demoCall(demoSessionEmail, "call_1", "email.send",
		`{"to":["ada@example.com"],"subject":"Your order 1001 has shipped","text":"Hi Ada, your order is on its way."}`)
	d.sayf("Now the agent sends Ada an email. Mailpit has no idempotency: sending twice puts two emails in Ada's inbox. So send's declared policy is reconcile: after a crash, ask Mailpit whether the message exists. It needs approval too.")
	id, err := d.gated(ctx, d.mfs, call, "email")
	if err != nil {
		return err
	}
	if err := d.approve(ctx, d.mfs, id, "text checked"); err != nil {
		return err
	}
	d.sayf("Re-driven, sent, and killed by SIGKILL right after Mailpit stored the message, before the outcome was recorded.")
	d.crashed(ctx, d.mfs, call, id)
	d.sayf("Mailpit holds the message: Ada got her email once.")
	msgs := d.provider(ctx, id, "email", 1, 1)
	d.sayf("Restart. Recovery finds the call dispatched without an outcome; the policy is reconcile, so connhost calls the connector's reconcile with the same key. " +
		"The connector searches Mailpit for the Message-ID it derives from that key, compares it exactly, finds the message and reports it applied. Nothing is sent again.")
	st, res, _ := d.execResult(ctx, d.mfs, call, "", ExitOK)
	st.ExecutionID = id
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.expect(st, "source reconciled (the provider's word, not a new send)", res.Source, "reconciled")
	if len(msgs) == 1 {
		d.expect(st, "receipt is the Mailpit id of the stored message", res.Receipt, msgs[0])
	}
	d.emit(st)
	_, evs := d.history(ctx, d.mfs, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionReconciledApplied))
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	d.fillProvider(ctx, st2, id, "email", 1, 1)
	if st2.Provider != nil {
		d.expect(st2, "Mailpit received one send in all", fmt.Sprint(st2.Provider.MessagesSent), "1")
	}
	d.emit(st2)
	return nil
}

// partManual: a manual policy, recovery_required, fence, operator.
func (d *demo) partManual(ctx context.Context) error {
	call := demoCall(demoSessionManual, "call_1", "payments.create_payment",
		`{"amount":4500,"currency":"eur","payment_method":"pm_card_visa","description":"order 1002"}`)
	d.sayf("Some effects can be neither deduplicated nor checked afterwards; their policy is manual. " +
		"The shipped manual operation is email.release_message (relay a stored message through Mailpit's SMTP relay), but the in-process Mailpit emulator does not implement the release endpoint, so that call could not apply anything here. " +
		"Instead the demo runs the same create_payment under a copy of payments.toml in $DEMO/manifests-manual that declares recovery = \"manual\": the commands of this part run with --manifests $DEMO/manifests-manual.")
	id, err := d.gated(ctx, d.manual, call, "payments")
	if err != nil {
		return err
	}
	if err := d.approve(ctx, d.manual, id, "amount matches order 1002"); err != nil {
		return err
	}
	d.sayf("Killed the same way, after Stripe charged the card.")
	d.crashed(ctx, d.manual, call, id)
	pis := d.provider(ctx, id, "payments", 2, 1)
	d.sayf("Restart. The policy is manual, so recovery does not guess: it neither re-sends nor asks the provider. The execution becomes recovery_required and its session is fenced.")
	st, res, _ := d.execResult(ctx, d.manual, call, "", ExitRecoveryRequired)
	st.ExecutionID = id
	d.expect(st, "status recovery_required", string(res.Status), string(host.StatusRecoveryRequired))
	d.emit(st)

	lookup := d.piPayment
	if lookup == "" && len(pis) > 0 {
		lookup = pis[0]
	}
	look := demoCall(demoSessionManual, "call_2", "payments.get_payment", fmt.Sprintf(`{"payment_intent":%q}`, lookup))
	d.sayf("The agent goes on in the same session with a harmless read (look up order 1001's payment). connhost refuses it: new work in a fenced session waits until the uncertain call is settled.")
	st, r := d.command(ctx, d.manual, "", look...)
	var p httpapi.Problem
	if d.exitIs(st, r, ExitRecoveryRequired) && d.decode(st, r.Stdout, &p) {
		st.Code = string(p.Code)
		d.expect(st, "refused with code session_fenced", string(p.Code), string(httpapi.CodeSessionFenced))
		listed := slices.ContainsFunc(p.UncertainCalls, func(u host.UncertainCall) bool { return u.ExecutionID == id })
		d.check(st, "the refusal lists the uncertain call", listed, fmt.Sprint(p.UncertainCalls))
		var buf bytes.Buffer
		renderProblem(&buf, &p)
		st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
	}
	d.emit(st)

	d.sayf("The operator starts from the list of calls recovery could not decide.")
	st, r = d.command(ctx, d.manual, "", "ls", "--state", "recovery_required")
	var list demoList
	if d.exitIs(st, r, ExitOK) && d.decode(st, r.Stdout, &list) {
		ids := make([]string, 0, len(list.Executions))
		for _, e := range list.Executions {
			ids = append(ids, e.ID)
			st.Notes = append(st.Notes, fmt.Sprintf("%s  %s  %s.%s  session %s  tool call %s  attempt %d/%d",
				e.ID, e.State, e.Connector, e.Operation, e.SessionID, e.ToolCallID, e.Attempt, e.MaxAttempts))
		}
		d.expect(st, "exactly this execution is recovery_required", strings.Join(ids, ","), id)
	}
	d.emit(st)

	receipt := ""
	if len(pis) > 0 {
		receipt = pis[0]
	}
	d.sayf("The operator checks Stripe for a PaymentIntent whose metadata connhost_execution_id is %s, finds %s (succeeded), and records that the call was applied.", id, orDash(receipt))
	args := []string{"resolve", id, "--applied", "--by", demoOperator,
		"--reason", "found " + orDash(receipt) + " in the Stripe dashboard (metadata connhost_execution_id)"}
	if receipt != "" {
		args = append(args, "--receipt", receipt)
	}
	st, r = d.command(ctx, d.manual, "", args...)
	var rr host.Result
	if d.exitIs(st, r, ExitOK) && d.decode(st, r.Stdout, &rr) {
		d.noteResult(st, rr)
		d.expect(st, "status succeeded", string(rr.Status), string(host.StatusSucceeded))
		d.expect(st, "source operator", rr.Source, "operator")
	}
	d.emit(st)

	d.sayf("The session accepts new work again: the runtime re-issues the refused read.")
	st, res, _ = d.execResult(ctx, d.manual, look, "", ExitOK)
	d.expect(st, "status succeeded", string(res.Status), string(host.StatusSucceeded))
	d.emit(st)

	_, evs := d.history(ctx, d.manual, id)
	d.expectDecisions(evs, decisions(host.DecisionIntent, host.DecisionDispatch, host.DecisionManualPolicy, host.DecisionOperatorApplied))
	i := slices.IndexFunc(evs, func(e demoEvent) bool { return e.Decision == string(host.DecisionManualPolicy) })
	j := slices.IndexFunc(evs, func(e demoEvent) bool { return e.Decision == string(host.DecisionOperatorApplied) })
	st2 := d.newStep("provider")
	st2.ExecutionID = id
	d.check(st2, "manual_policy moved the call to recovery_required", i >= 0 && evs[i].To == string(ledger.StateRecoveryRequired), "")
	d.check(st2, "operator_applied by "+demoOperator+" moved it to succeeded", j > i && evs[j].To == string(ledger.StateSucceeded) && evs[j].Actor == demoOperator, "")
	d.fillProvider(ctx, st2, id, "payments", 2, 1)
	d.emit(st2)
	return nil
}

// partProof lists every execution and counts its provider objects.
func (d *demo) partProof(ctx context.Context) error {
	d.sayf("Every execution in the ledger against the objects the providers hold. An external call's objects are found by its identity: the PaymentIntent's metadata connhost_execution_id, the message's Mailpit id (the receipt) and Message-ID.")
	st, r := d.command(ctx, d.mfs, "", "ls", "--limit", "1000")
	var list demoList
	if !d.exitIs(st, r, ExitOK) || !d.decode(st, r.Stdout, &list) {
		d.emit(st)
		return errors.New("ls failed")
	}
	st.Kind = "proof"
	st.Output = nil // the table below says it all
	pis, err := d.client.PaymentIntents(ctx)
	if err != nil {
		return err
	}
	msgs, err := d.client.Messages(ctx)
	if err != nil {
		return err
	}
	succeeded := map[string]int{}
	for _, e := range list.Executions {
		tool := e.Connector + "." + e.Operation
		row := demoProofRow{ExecutionID: e.ID, Tool: tool, Effect: e.Effect, Policy: orDash(e.Policy), State: e.State}
		if e.Outcome != nil {
			row.Source, row.Receipt = e.Outcome.Source, e.Outcome.Receipt
		}
		if e.Effect == string(manifests.EffectExternal) {
			if e.State == string(ledger.StateSucceeded) {
				succeeded[tool]++
			}
			switch tool {
			case "payments.create_payment":
				for _, p := range pis {
					if p.Metadata["connhost_execution_id"] == e.ID {
						row.ProviderObjects++
						if p.ID != row.Receipt {
							d.check(st, "receipt of "+e.ID+" names its PaymentIntent", false, p.ID+" vs "+row.Receipt)
						}
					}
				}
			case "email.send":
				for _, m := range msgs {
					if m.ID == row.Receipt {
						row.ProviderObjects++
						dup, err := d.client.FindMessagesByMessageID(ctx, m.MessageID)
						if err == nil {
							d.expect(st, "one message with Message-ID "+m.MessageID, fmt.Sprint(len(dup)), "1")
						}
					}
				}
			}
			d.expect(st, "one provider object for "+e.ID+" ("+tool+", "+e.State+")", fmt.Sprint(row.ProviderObjects), "1")
		}
		st.Proof = append(st.Proof, row)
	}
	d.expect(st, "PaymentIntents at Stripe = succeeded create_payment executions", fmt.Sprint(len(pis)), fmt.Sprint(succeeded["payments.create_payment"]))
	d.expect(st, "messages in Mailpit = succeeded email.send executions", fmt.Sprint(len(msgs)), fmt.Sprint(succeeded["email.send"]))
	d.expect(st, "2 PaymentIntents at Stripe in all (one per charge the agent asked for)", fmt.Sprint(len(pis)), "2")
	d.expect(st, "1 message in Mailpit in all", fmt.Sprint(len(msgs)), "1")
	st.Provider = &demoProvider{PaymentIntents: len(pis), Messages: len(msgs)}
	if !d.json {
		var buf bytes.Buffer
		tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "EXECUTION\tTOOL\tPOLICY\tLEDGER\tSOURCE\tRECEIPT\tPROVIDER OBJECTS")
		for _, row := range st.Proof {
			objs := "- (read)"
			if row.Effect == string(manifests.EffectExternal) {
				objs = fmt.Sprint(row.ProviderObjects)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.ExecutionID, row.Tool, row.Policy, row.State, orDash(row.Source), orDash(row.Receipt), objs)
		}
		_ = tw.Flush()
		st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
		st.Notes = append(st.Notes, "", fmt.Sprintf("Stripe holds %d PaymentIntent(s), Mailpit %d message(s); the ledger has %d succeeded create_payment and %d succeeded send execution(s).",
			len(pis), len(msgs), succeeded["payments.create_payment"], succeeded["email.send"]))
	}
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
		return &exitError{code: ExitFailure}
	}
	return &exitError{code: ExitFailure, err: fmt.Errorf("demo: %d check(s) failed", len(d.failed))}
}

// gated runs the first call of a part and checks it awaits approval; it
// returns the execution id and leaves the approval in d.say's next step.
func (d *demo) gated(ctx context.Context, mfs string, call []string, provider string) (string, error) {
	st, res, ok := d.execResult(ctx, mfs, call, "", ExitNotSucceeded)
	st.ExecutionID = res.ExecutionID
	d.expect(st, "status awaiting_approval", string(res.Status), string(host.StatusAwaitingApproval))
	if res.Approval != nil {
		d.pendingApproval = res.Approval
	}
	prov := d.counts(ctx)
	if prov != nil {
		st.Provider = prov
		if provider == "payments" {
			d.expect(st, "Stripe has not been called for it", fmt.Sprint(d.countFor(ctx, res.ExecutionID, provider)), "0")
		} else {
			d.expect(st, "Mailpit has not been called for it", fmt.Sprint(prov.Messages), "0")
		}
	}
	d.emit(st)
	if !ok || res.Approval == nil || res.ExecutionID == "" {
		return "", errors.New("the call did not return an approval request")
	}
	return res.ExecutionID, nil
}

// approve approves the pending approval of the part.
func (d *demo) approve(ctx context.Context, mfs, id, reason string) error {
	ap := d.pendingApproval
	d.pendingApproval = nil
	if ap == nil {
		return errors.New("no approval to approve")
	}
	st, r := d.command(ctx, mfs, "", "approve", ap.ID, "--by", demoReviewer, "--digest", ap.ArgsDigest, "--reason", reason)
	st.ExecutionID = id
	var res host.Result
	ok := d.exitIs(st, r, ExitOK) && d.decode(st, r.Stdout, &res)
	if ok {
		d.noteResult(st, res)
		decision := ""
		if res.Approval != nil {
			decision = res.Approval.Decision
		}
		st.Notes[0] = fmt.Sprintf("→ %s by %s, exit %d: the execution is %s until the runtime re-drives the call", decision, demoReviewer, r.Code, res.Status)
		d.expect(st, "approval approved by "+demoReviewer, decision, "approved")
	}
	d.emit(st)
	if !ok {
		return errors.New("approve failed")
	}
	return nil
}

// crashed re-drives call with CONNHOST_CRASH_AT=after_plugin_return and
// checks the process died by SIGKILL.
func (d *demo) crashed(ctx context.Context, mfs string, call []string, id string) {
	st, r := d.command(ctx, mfs, crash.AfterPluginReturn, call...)
	st.ExecutionID = id
	if r.err == nil {
		if r.Killed() {
			st.Notes = append(st.Notes, "→ killed by SIGKILL at after_plugin_return: no outcome recorded, nothing printed")
		}
		d.check(st, "the process died by SIGKILL at after_plugin_return", r.Killed(), r.describe())
	}
	d.emit(st)
}

// provider reports the provider's objects after a kill and returns the
// ids of the execution's objects.
func (d *demo) provider(ctx context.Context, id, provider string, total, forExec int) []string {
	st := d.newStep("provider")
	st.ExecutionID = id
	ids := d.fillProvider(ctx, st, id, provider, total, forExec)
	d.emit(st)
	return ids
}

// fillProvider counts the providers' objects into st, checks them and
// returns the ids of the objects that belong to execution id.
func (d *demo) fillProvider(ctx context.Context, st *demoStep, id, provider string, total, forExec int) []string {
	prov := d.counts(ctx)
	if prov == nil {
		d.check(st, "the providers answer", false, "")
		return nil
	}
	st.Provider = prov
	var ids []string
	switch provider {
	case "payments":
		found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
		if err != nil {
			d.check(st, "Stripe answers", false, err.Error())
			return nil
		}
		for _, p := range found {
			ids = append(ids, p.ID)
			st.Notes = append(st.Notes, fmt.Sprintf("Stripe: PaymentIntent %s, %s, %d.%02d %s, metadata connhost_execution_id %s",
				p.ID, p.Status, p.Amount/100, p.Amount%100, strings.ToUpper(p.Currency), id))
		}
		st.Notes = append(st.Notes, fmt.Sprintf("Stripe holds %d PaymentIntent(s) in all; it replayed %d answer(s) to a repeated key", prov.PaymentIntents, prov.StripeReplays))
		d.expect(st, fmt.Sprintf("%d PaymentIntent(s) at Stripe", total), fmt.Sprint(prov.PaymentIntents), fmt.Sprint(total))
		d.expect(st, fmt.Sprintf("exactly %d PaymentIntent for %s", forExec, id), fmt.Sprint(len(found)), fmt.Sprint(forExec))
	case "email":
		msgs, err := d.client.Messages(ctx)
		if err != nil {
			d.check(st, "Mailpit answers", false, err.Error())
			return nil
		}
		for _, m := range msgs {
			ids = append(ids, m.ID)
			to := ""
			if len(m.To) > 0 {
				to = m.To[0].Address
			}
			st.Notes = append(st.Notes, fmt.Sprintf("Mailpit: message %s to %s, %q, Message-ID <%s>", m.ID, to, m.Subject, m.MessageID))
		}
		st.Notes = append(st.Notes, fmt.Sprintf("Mailpit holds %d message(s); it received %d send(s)", prov.Messages, prov.MessagesSent))
		d.expect(st, fmt.Sprintf("%d message(s) in Mailpit", total), fmt.Sprint(prov.Messages), fmt.Sprint(total))
		if len(msgs) == 1 {
			same, err := d.client.FindMessagesByMessageID(ctx, msgs[0].MessageID)
			if err == nil {
				d.expect(st, fmt.Sprintf("exactly %d message with its Message-ID", forExec), fmt.Sprint(len(same)), fmt.Sprint(forExec))
			}
		}
	}
	n := len(ids)
	prov.ForExecution = &n
	return ids
}

// counts returns the providers' totals, or nil when they do not answer.
func (d *demo) counts(ctx context.Context) *demoProvider {
	pis, err := d.client.CountPaymentIntents(ctx)
	if err != nil {
		return nil
	}
	msgs, err := d.client.CountMessages(ctx)
	if err != nil {
		return nil
	}
	ps, err := d.client.PaymentsStats(ctx)
	if err != nil {
		return nil
	}
	es, err := d.client.EmailStats(ctx)
	if err != nil {
		return nil
	}
	return &demoProvider{PaymentIntents: pis, Messages: msgs, StripeReplays: ps.Replays, MessagesSent: es.MessagesSent}
}

// countFor counts the provider objects of an execution (-1 on error).
func (d *demo) countFor(ctx context.Context, id, provider string) int {
	if provider != "payments" {
		return -1
	}
	found, err := d.client.FindPaymentIntents(ctx, "connhost_execution_id", id)
	if err != nil {
		return -1
	}
	return len(found)
}

// history runs connhost history and records its events in a step.
func (d *demo) history(ctx context.Context, mfs, id string) (demoRecord, []demoEvent) {
	st, r := d.command(ctx, mfs, "", "history", id)
	st.ExecutionID = id
	var v struct {
		Record demoRecord     `json:"record"`
		Events []ledger.Event `json:"events"`
	}
	if !d.exitIs(st, r, ExitOK) || !d.decode(st, r.Stdout, &v) {
		d.emit(st)
		return demoRecord{}, nil
	}
	st.Output = nil // the events below carry what matters
	st.Status = v.Record.State
	if v.Record.Outcome != nil {
		st.Source, st.Receipt = v.Record.Outcome.Source, v.Record.Outcome.Receipt
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s.%s, policy %s, idempotency key %s\n", v.Record.Connector, v.Record.Operation, v.Record.Policy, v.Record.IdempotencyKey)
	fmt.Fprintln(tw, "#\tATTEMPT\tTRANSITION\tDECISION\tACTOR\tEVIDENCE / REASON")
	for _, e := range v.Events {
		ev := demoEvent{Seq: e.Seq, Attempt: e.Attempt, From: string(e.From), To: string(e.To), Decision: e.Decision, Actor: e.Actor, Evidence: e.Evidence}
		st.Events = append(st.Events, ev)
		tr := "→ " + ev.To
		if ev.From != "" {
			tr = ev.From + " → " + ev.To
		}
		note := e.Evidence
		if e.Reason != "" {
			note = strings.TrimPrefix(note+"; reason: "+e.Reason, "; ")
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Attempt, tr, e.Decision, orDash(e.Actor), clipText(note, 70))
	}
	_ = tw.Flush()
	st.Notes = append(st.Notes, strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")...)
	d.expect(st, "final state succeeded", v.Record.State, string(ledger.StateSucceeded))
	d.pendingHistory = st
	return v.Record, st.Events
}

// expectDecisions checks that the audit trail of the last history step
// holds decisions in this order, then emits the step.
func (d *demo) expectDecisions(evs []demoEvent, want []string) {
	st := d.pendingHistory
	d.pendingHistory = nil
	if st == nil {
		return
	}
	i := 0
	for _, e := range evs {
		if i < len(want) && e.Decision == want[i] {
			i++
		}
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Decision)
	}
	d.check(st, "audit trail "+strings.Join(want, " → ")+" → succeeded", i == len(want), strings.Join(got, ", "))
	d.emit(st)
}

// demoRecord is the part of a ledger record the demo reads.
type demoRecord struct {
	ID             string `json:"id"`
	SessionID      string `json:"session_id"`
	ToolCallID     string `json:"tool_call_id"`
	Connector      string `json:"connector"`
	Operation      string `json:"operation"`
	Effect         string `json:"effect"`
	Policy         string `json:"policy"`
	State          string `json:"state"`
	Attempt        int    `json:"attempt"`
	MaxAttempts    int    `json:"max_attempts"`
	IdempotencyKey string `json:"idempotency_key"`
	Outcome        *struct {
		Kind    string `json:"kind"`
		Source  string `json:"source"`
		Receipt string `json:"receipt"`
	} `json:"outcome"`
}

// demoList is connhost ls --json.
type demoList struct {
	Executions []demoRecord `json:"executions"`
}

func demoCall(session, toolCall, tool, args string) []string {
	return []string{"exec", "--session", session, "--tool-call", toolCall, "--tool", tool, "--args", args}
}

// execResult runs an exec and decodes its Result.
func (d *demo) execResult(ctx context.Context, mfs string, call []string, crashAt string, wantExit int) (*demoStep, host.Result, bool) {
	st, r := d.command(ctx, mfs, crashAt, call...)
	var res host.Result
	ok := d.exitIs(st, r, wantExit) && d.decode(st, r.Stdout, &res)
	if ok {
		d.noteResult(st, res)
	}
	return st, res, ok
}

// noteResult records a Result in the step.
func (d *demo) noteResult(st *demoStep, res host.Result) {
	if st.ExecutionID == "" {
		st.ExecutionID = res.ExecutionID
	}
	st.Status, st.Source, st.Receipt = string(res.Status), res.Source, res.Receipt
	line := "→ " + string(res.Status)
	if res.Attempt > 0 {
		line += fmt.Sprintf(" (attempt %d)", res.Attempt)
	}
	if st.ExitCode != nil {
		line += fmt.Sprintf(", exit %d", *st.ExitCode)
	}
	st.Notes = append(st.Notes, line)
	st.Notes = append(st.Notes, "  execution "+res.ExecutionID)
	if res.Source != "" {
		st.Notes = append(st.Notes, "  source    "+res.Source)
	}
	if res.Receipt != "" {
		st.Notes = append(st.Notes, "  receipt   "+res.Receipt)
	}
	if len(res.Result) > 0 {
		st.Notes = append(st.Notes, "  result    "+clipText(compactJSON(res.Result), 100))
	}
	if res.Error != "" {
		st.Notes = append(st.Notes, "  error     "+clipText(res.Error, 100))
	}
	if ap := res.Approval; ap != nil {
		st.Notes = append(st.Notes, fmt.Sprintf("  approval  %s %s, args digest %s", ap.ID, ap.Decision, ap.ArgsDigest))
	}
}

// childResult is one finished child process.
type childResult struct {
	proc.Result
	err error // the process could not be run or timed out
}

func (r childResult) describe() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.Signal != 0:
		return r.Result.String()
	}
	s := fmt.Sprintf("exit %d", r.Code)
	// With --json a failure is a problem document on stdout.
	var p httpapi.Problem
	if r.Code != ExitOK && json.Unmarshal(r.Stdout, &p) == nil && p.Code != "" {
		return s + ": " + string(p.Code) + ": " + clipText(orDash(p.Detail), 300)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(r.Stderr)), "\n") {
		// The allow_http warning every start prints is not news.
		if l != "" && !strings.Contains(l, "config allow_http") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		s += ": " + clipText(lastLines(strings.Join(lines, "\n")), 300)
	}
	return s
}

// command runs one child connhost process and returns its step (not yet
// emitted) and result.
func (d *demo) command(ctx context.Context, mfs, crashAt string, args ...string) (*demoStep, childResult) {
	st := d.newStep("command")
	st.CrashAt = crashAt
	shown := "connhost "
	if crashAt != "" {
		shown = crash.EnvVar + "=" + crashAt + " " + shown
	}
	if mfs != d.mfs {
		shown += "--manifests " + d.shorten(mfs) + " "
	}
	quoted := make([]string, len(args))
	for i, s := range args {
		quoted[i] = shellQuote(s)
	}
	st.Command = shown + strings.Join(quoted, " ")
	full := append([]string{"--data", d.data, "--config", d.config, "--manifests", mfs, "--modules", d.mods, "--json"}, args...)
	st.Args = full
	d.printf("\n  $ %s\n", st.Command)

	r := d.spawn(ctx, crashAt, full)
	if r.err == nil {
		code := r.Code
		if r.Killed() {
			d.kills++
			st.Killed, st.Signal = true, "SIGKILL"
		} else if r.Signal != 0 {
			st.Signal = proc.SignalName(r.Signal)
		}
		st.ExitCode = &code
		if len(bytes.TrimSpace(r.Stdout)) > 0 && json.Valid(r.Stdout) {
			st.Output = json.RawMessage(r.Stdout)
		}
	} else {
		d.check(st, "the process ran", false, r.err.Error())
	}
	return st, r
}

// spawn runs this binary with args, in its own process group, killed with
// its group when it outlives demoChildTimeout.
func (d *demo) spawn(ctx context.Context, crashAt string, args []string) childResult {
	ctx, cancel := context.WithTimeout(ctx, demoChildTimeout)
	defer cancel()
	res, err := proc.Run(ctx, proc.Cmd{Path: d.self, Args: args, Dir: d.dir, CrashAt: crashAt})
	r := childResult{Result: res}
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("no answer within %s (killed): %w", demoChildTimeout, ctx.Err())
	case err != nil:
		r.err = err
	}
	return r
}

// exitIs checks the exit code of a child.
func (d *demo) exitIs(st *demoStep, r childResult, want int) bool {
	if r.err != nil {
		return false
	}
	ok := r.Signal == 0 && r.Code == want
	d.check(st, fmt.Sprintf("exit code %d", want), ok, r.describe())
	return ok
}

// decode decodes a child's JSON output.
func (d *demo) decode(st *demoStep, b []byte, v any) bool {
	if err := json.Unmarshal(b, v); err != nil {
		d.check(st, "the output is JSON", false, err.Error())
		return false
	}
	return true
}

// newStep starts a step with the pending narration.
func (d *demo) newStep(kind string) *demoStep {
	d.step++
	st := &demoStep{Step: d.step, Scene: d.scene, Kind: kind, Say: strings.Join(d.say, " "), OK: true}
	d.say = nil
	return st
}

// emit prints a step: its notes and checks on a terminal, one JSON line
// with --json.
func (d *demo) emit(st *demoStep) {
	if d.json {
		d.writeLine(st)
		return
	}
	if st.Command == "" && len(st.Notes) > 0 {
		d.printf("\n")
	}
	for _, n := range st.Notes {
		if n == "" {
			d.printf("\n")
			continue
		}
		d.printf("    %s\n", n)
	}
	for _, c := range st.Checks {
		if c.OK {
			d.printf("    ✓ %s\n", c.What)
		} else {
			d.printf("    ✗ CHECK FAILED: %s (got %s)\n", c.What, orDash(c.Got))
		}
	}
}

// check records an assertion in st.
func (d *demo) check(st *demoStep, what string, ok bool, got string) bool {
	d.checks++
	st.Checks = append(st.Checks, demoCheck{What: what, Got: got, OK: ok})
	if !ok {
		st.OK = false
		d.failed = append(d.failed, fmt.Sprintf("step %d (%s): %s: got %s", st.Step, st.Scene, what, orDash(got)))
	}
	return ok
}

// expect checks got == want.
func (d *demo) expect(st *demoStep, what, got, want string) bool {
	return d.check(st, what, got == want, got)
}

// heading starts a part.
func (d *demo) heading(scene, title string) {
	d.scene = scene
	n := map[string]int{"payment": 1, "email": 2, "manual": 3, "proof": 4}[scene]
	t := fmt.Sprintf("%d. %s", n, title)
	d.printf("\n\n%s\n%s\n", t, strings.Repeat("-", len([]rune(t))))
	if d.json {
		st := d.newStep("scene")
		st.Notes = []string{t}
		d.writeLine(st)
	}
}

// sayf narrates: printed at once on a terminal, attached to the next step
// with --json.
func (d *demo) sayf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	s = strings.ReplaceAll(s, d.dir, "$DEMO")
	d.say = append(d.say, s)
	d.printf("\n%s", wrapText(s, 78, ""))
}

// writeLine writes one step as one line of JSON.
func (d *demo) writeLine(st *demoStep) {
	enc := json.NewEncoder(d.w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		d.cancel()
	}
}

func (d *demo) printf(format string, args ...any) {
	if !d.json {
		if _, err := fmt.Fprintf(d.w, format, args...); err != nil {
			d.cancel()
		}
	}
}

// shorten writes paths under the work directory as $DEMO/….
func (d *demo) shorten(p string) string {
	if rel, err := filepath.Rel(d.dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return "$DEMO/" + filepath.ToSlash(rel)
	}
	return p
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@,+-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// wrapText wraps s at width columns, each line prefixed by indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	line := 0
	for _, w := range strings.Fields(s) {
		n := len([]rune(w))
		if line > 0 && line+1+n > width {
			b.WriteString("\n")
			line = 0
		}
		if line == 0 {
			b.WriteString(indent)
			line = len(indent)
		} else {
			b.WriteString(" ")
			line++
		}
		b.WriteString(w)
		line += n
	}
	b.WriteString("\n")
	return b.String()
}

func clipText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func lastLines(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// copyFileTo copies src to dst.
func copyFileTo(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// decisions names audit-trail decisions as the events spell them.
func decisions(ds ...host.DecisionCode) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d)
	}
	return out
}
