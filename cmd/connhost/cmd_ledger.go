package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/argview"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/httpapi"
)

// timeFormat is how times are shown to people: UTC, second precision.
const timeFormat = "2006-01-02T15:04:05Z"

func (a *app) lsCommand() *cobra.Command {
	var state, session, namespace, after, order string
	var limit int
	var df decisionFlags
	c := &cobra.Command{
		Use:   "ls [--state S] [--session S]",
		Short: "List executions",
		Long: `ls lists executions from the ledger in --data, the most recently created
first, as recorded: it loads no connector and runs no recovery, so it needs
no connector config. Operators start here: connhost ls --state
recovery_required shows the calls recovery could not decide.

A full page ends with the --after to pass for the next one; paging never
skips or repeats an execution. --order expiry lists the calls awaiting
approval (or approved) whose approval expires soonest first, across all of
them, under the count of all the calls awaiting approval. With --json it
prints what GET /v1/executions answers.
` + readHelp,
		Example: `  connhost ls --state recovery_required
  connhost ls --state awaiting_approval --order expiry
  connhost ls --session s1 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lim := ""
			if limit != 0 {
				lim = fmt.Sprint(limit)
			}
			f, err := httpapi.ParseFilter(state, session, namespace, after, lim)
			if err == nil {
				err = httpapi.SetOrder(&f, order)
			}
			if err != nil {
				return cli.Usagef("%v", err)
			}
			var lr httpapi.ListResponse
			remote, err := a.throughServer(cmd.Context(), df, request{method: "GET", path: "/v1/executions" + listQuery(state, session, namespace, after, order, limit), out: &lr})
			if err != nil {
				return err
			}
			if !remote {
				var recs []ledger.Record
				var total int
				var counted bool
				err = a.withLedger(cmd.Context(), func(led ledger.Ledger) error {
					var err error
					if recs, err = led.List(cmd.Context(), f); err != nil {
						return err
					}
					total, counted, err = httpapi.CountAwaiting(cmd.Context(), led, f)
					return err
				})
				switch {
				case errors.Is(err, ledger.ErrNotFound):
					return cli.Usagef("--after %s names no execution in %s", after, a.g.data)
				case errors.Is(err, ledger.ErrPruned):
					return fmt.Errorf("--after %s names an execution pruned by retention meanwhile; list again without --after", after)
				case err != nil:
					return err
				}
				lr = httpapi.NewListResponse(recs, f)
				if counted {
					lr.Total = &total
				}
			}
			if a.g.json {
				cli.WriteJSON(a.stdout, lr)
				return nil
			}
			renderList(a.stdout, lr.Executions)
			if lr.Next != "" {
				cli.Fprintf(a.stdout, "(more: --after %s)\n", lr.Next)
			}
			if lr.Total != nil && *lr.Total > 0 {
				fmt.Fprintf(a.stdout, "(%d awaiting approval in all: connhost approve <approval-id> without --digest shows each call whole)\n", *lr.Total)
			} else if n := awaiting(lr.Executions); n > 0 {
				fmt.Fprintf(a.stdout, "(%d awaiting approval: connhost approve <approval-id> without --digest shows each call whole)\n", n)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&state, "state", "", "only this state (awaiting_approval, approved, dispatched, retry_wait, recovery_required, succeeded, failed, rejected, expired, abandoned, cancelled)")
	f.StringVar(&session, "session", "", "only this session")
	f.StringVar(&namespace, "namespace", "", "only this namespace")
	f.StringVar(&after, "after", "", "continue after this execution id (the last one of the previous page), or the position --order expiry printed")
	f.StringVar(&order, "order", "", "newest (the default): the most recently created first; expiry: the approvals that expire soonest first (with --state awaiting_approval or approved)")
	f.IntVar(&limit, "limit", 0, "at most this many executions (default 100, at most 1000)")
	df.registerRead(c)
	return c
}

// renderList writes executions as an aligned table.
func renderList(w io.Writer, es []httpapi.Execution) {
	if len(es) == 0 {
		fmt.Fprintln(w, "no executions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "EXECUTION\tSTATE\tTOOL\tSESSION\tTOOL CALL\tATTEMPT\tCREATED\tUPDATED")
	for _, r := range es {
		cli.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", r.ExecutionID, r.State, r.Tool,
			sessionName(r.Namespace, r.SessionID), r.ToolCallID, r.Attempt, r.MaxAttempts,
			r.CreatedAt.UTC().Format(timeFormat), r.UpdatedAt.UTC().Format(timeFormat))
	}
	_ = tw.Flush()
}

// awaiting counts the executions awaiting approval.
func awaiting(es []httpapi.Execution) int {
	n := 0
	for _, r := range es {
		if r.State == ledger.StateAwaitingApproval {
			n++
		}
	}
	return n
}

func sessionName(ns, session string) string {
	if ns == "" || ns == ledger.DefaultNamespace {
		return session
	}
	return ns + "/" + session
}

func (a *app) historyCommand() *cobra.Command {
	var df decisionFlags
	c := &cobra.Command{
		Use:   "history <execution-id>",
		Short: "Show an execution's record and audit trail",
		Long: `history prints what was asked (tool, arguments, policy), where the
execution stands, and every transition of its audit trail with the decision,
the actor and the evidence it was based on, and the identifiers a human
checks at the provider (the idempotency key, the receipt).
` + readHelp,
		Example: `  connhost history ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz
  connhost history ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz --json`,
		Args: cli.ExactArgs(1, "an execution id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var (
				rec     ledger.Record
				evs     []ledger.Event
				earlier *host.Result
			)
			e, earlier, remote, err := a.historyThroughServer(cmd.Context(), df, args[0])
			if err != nil {
				return err
			}
			if remote {
				if a.g.json {
					cli.WriteJSON(a.stdout, e)
					return nil
				}
				renderHistory(a.stdout, e, a.operationOf(e.Tool), earlier)
				return nil
			}
			err = a.withLedger(cmd.Context(), func(led ledger.Ledger) error {
				var err error
				if rec, err = led.Get(cmd.Context(), args[0]); err != nil {
					return err
				}
				if evs, err = led.Events(cmd.Context(), args[0]); err != nil {
					return err
				}
				if rec.DuplicateOf != "" {
					if r, err := led.Get(cmd.Context(), rec.DuplicateOf); err == nil || errors.Is(err, ledger.ErrPruned) {
						res := host.ResultOf(r)
						earlier = &res
					}
				}
				return nil
			})
			if errors.Is(err, ledger.ErrNotFound) {
				return refusef(host.ErrNotFound, "no execution %q in %s", args[0], a.g.data)
			}
			if err != nil {
				return err
			}
			e = httpapi.NewExecution(rec, evs)
			if a.g.json {
				cli.WriteJSON(a.stdout, e)
				return nil
			}
			renderHistory(a.stdout, e, a.operationOf(e.Tool), earlier)
			return nil
		},
	}
	df.registerRead(c)
	return c
}

// operationOf returns the manifest entry of tool ("connector.operation") from
// --manifests, for the review order and money of its arguments; nil when
// the manifests cannot be read or do not declare it (the arguments are
// then shown in path order).
func (a *app) operationOf(tool string) *manifests.Operation {
	connector, operation, _ := strings.Cut(tool, ".")
	ms, err := manifests.LoadDir(a.g.manifests)
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.Connector.Name == connector {
			if op, ok := m.Operation(operation); ok {
				return op
			}
		}
	}
	return nil
}

// renderHistory writes an execution and its events as a readable timeline,
// its arguments as a reviewer is shown them (host.RenderArgs: decoded,
// escaped, in op's review order; op may be nil), and, for a call the
// duplicate-intent guard held or answered, the execution it repeats
// (earlier, nil when unknown).
func renderHistory(w io.Writer, r httpapi.Execution, op *manifests.Operation, earlier *host.Result) {
	evs := r.Events
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, args ...any) { cli.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("execution", "%s", r.ExecutionID)
	row("tool", "%s (effect %s, recovery %s, policy %s)", r.Tool, r.Effect, cli.OrDash(r.Policy), r.PolicyVersion)
	row("session", "%s, tool call %s", sessionName(r.Namespace, r.SessionID), r.ToolCallID)
	state := string(r.State)
	if r.CancelRequested {
		state += " (cancel requested)"
	}
	row("state", "%s, attempt %d of %d", state, r.Attempt, r.MaxAttempts)
	row("args digest", "%s", r.ArgsDigest)
	// What the provider saw: a human checks it there before resolving.
	row("idempotency key", "%s", cli.OrDash(r.IdempotencyKey))
	if r.DuplicateOf != "" {
		s := r.DuplicateOf
		if earlier != nil {
			s += fmt.Sprintf(" (%s, tool call %s, created %s)", earlier.State, shownID(earlier.ToolCallID), earlier.CreatedAt.UTC().Format(timeFormat))
		}
		how := "held for a reviewer"
		if r.State == ledger.StateSucceeded && r.Source == ledger.OutcomeSourceDuplicate {
			how = "answered with its outcome"
		}
		row("duplicate of", "%s: same arguments in the same session within %s; %s", s, manifests.FormatDuration(time.Duration(r.DuplicateWindow)), how)
	}
	if r.Resumed {
		row("resumed", "yes (replayed from older history)")
	}
	if ap := r.Approval; ap != nil {
		s := fmt.Sprintf("%s %s", ap.ID, ap.Decision)
		if ap.By != "" {
			s += " by " + ap.By
		}
		if !ap.DecidedAt.IsZero() {
			s += " at " + ap.DecidedAt.UTC().Format(timeFormat)
		}
		if ap.Reason != "" {
			s += ": " + ap.Reason
		}
		row("approval", "%s", s)
		row("", "requested %s, expires %s", ap.RequestedAt.UTC().Format(timeFormat), ap.ExpiresAt.UTC().Format(timeFormat))
	}
	if r.OutcomeKind != "" {
		row("outcome", "%s from %s", r.OutcomeKind, r.Source)
	}
	if r.Receipt != "" {
		row("receipt", "%s", r.Receipt)
	}
	if len(r.Result.Result) > 0 {
		row("result", "%s", cli.CompactJSON(r.Result.Result))
	}
	if r.Error != "" {
		row("error", "%s", r.Error)
	}
	if res := r.Resolution; res != nil {
		verdict := "not applied, abandoned"
		switch {
		case res.Applied:
			verdict = "applied"
		case res.Retry:
			verdict = "not applied, retried"
		}
		row("resolution", "%s by %s at %s: %s", verdict, res.By, res.At.UTC().Format(timeFormat), res.Reason)
	}
	if !r.NextAttemptAt.IsZero() && r.State == ledger.StateRetryWait {
		row("next attempt", "%s", r.NextAttemptAt.UTC().Format(timeFormat))
	}
	row("created", "%s", r.CreatedAt.UTC().Format(timeFormat))
	row("updated", "%s", r.UpdatedAt.UTC().Format(timeFormat))
	_ = tw.Flush()

	if fields, _, err := host.RenderArgs(r.Args, op); err != nil {
		q, _ := argview.Quote(string(r.Args))
		fmt.Fprintf(w, "\narguments (not a JSON object the host accepts, shown as recorded): %s\n", q)
	} else {
		given := 0
		for _, f := range fields {
			if f.Type != "absent" {
				given++
			}
		}
		cli.Fprintf(w, "\narguments (%d, every one as a reviewer is shown it):\n", given)
		_ = argview.Write(w, fields, "  ")
	}

	cli.Fprintf(w, "\n%d event(s):\n", len(evs))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tTIME\tATTEMPT\tTRANSITION\tDECISION\tACTOR\tEVIDENCE / REASON")
	for _, e := range evs {
		tr := "→ " + string(e.To)
		if e.From != "" {
			tr = string(e.From) + " → " + string(e.To)
		}
		var notes []string
		if e.Evidence != "" {
			notes = append(notes, e.Evidence)
		}
		if e.Reason != "" {
			notes = append(notes, "reason: "+e.Reason)
		}
		cli.Fprintf(tw, "  %d\t%s\t%d\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.UTC().Format(timeFormat), e.Attempt, tr, e.Decision, cli.OrDash(e.Actor), strings.Join(notes, "; "))
	}
	_ = tw.Flush()
}

func (a *app) recoverCommand() *cobra.Command {
	var df decisionFlags
	c := &cobra.Command{
		Use:   "recover",
		Short: "Decide every execution whose outcome is unknown",
		Long: `recover opens the ledger in --data (which runs recovery before anything
else), then runs one more pass and reports what it decided. Dispatched calls
without an outcome are re-dispatched with the same key (idempotent-retry),
reconciled with the provider (reconcile) or parked as recovery_required for
an operator (manual). Expired approval requests expire.

On a terminal it shows progress on stderr; with --json it prints only the
report. It exits 4 when recovery_required executions remain.
` + readHelp,
		Example: `  connhost recover --config docs/connhost.example.toml
  connhost recover --config docs/connhost.example.toml --json | jq .uncertain`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var progress func(int)
			tty := !a.g.json && a.isTerminal(a.stderr)
			if tty {
				spin := `|/-\`
				progress = func(done int) {
					fmt.Fprintf(a.stderr, "\r%c recovering: %d execution(s) decided", spin[done%len(spin)], done)
				}
			}
			rep, remote, err := a.recoverThroughServer(cmd.Context(), df)
			if !remote && err == nil {
				err = a.withExecutor(cmd.Context(), openOptions{progress: progress, existing: true}, func(ex *host.Executor) error {
					var err error
					rep, err = ex.Recover(cmd.Context())
					return err
				})
			}
			if tty {
				fmt.Fprint(a.stderr, "\r\033[K")
			}
			if err != nil {
				return err
			}
			if rep.Uncertain == nil {
				rep.Uncertain = []host.UncertainCall{}
			}
			if a.g.json {
				cli.WriteJSON(a.stdout, rep)
			} else {
				renderReport(a.stdout, rep)
			}
			if len(rep.Uncertain) > 0 {
				return &cli.ExitError{Code: cli.ExitRecoveryRequired}
			}
			return nil
		},
	}
	df.registerRead(c)
	return c
}

// renderReport writes a RecoveryReport for people.
func renderReport(w io.Writer, rep host.RecoveryReport) {
	cli.Fprintf(w, "%d pending execution(s) examined", rep.Pending)
	if rep.Skipped > 0 {
		cli.Fprintf(w, ", %d skipped (a live call was driving them)", rep.Skipped)
	}
	if rep.Claimed > 0 {
		cli.Fprintf(w, ", %d taken over from nodes whose lease had expired", rep.Claimed)
	}
	fmt.Fprintln(w)
	for _, s := range []host.Status{host.StatusSucceeded, host.StatusFailed, host.StatusPending, host.StatusAwaitingApproval,
		host.StatusExpired, host.StatusRecoveryRequired, host.StatusRejected, host.StatusAbandoned, host.StatusCancelled} {
		if n := rep.Decisions[s]; n > 0 {
			cli.Fprintf(w, "  %-18s %d\n", s, n)
		}
	}
	if len(rep.Uncertain) == 0 {
		return
	}
	cli.Fprintf(w, "\n%d call(s) need an operator (connhost history <id>, then connhost resolve <id>):\n", len(rep.Uncertain))
	for _, u := range rep.Uncertain {
		cli.Fprintf(w, "  %s  tool call %s  %s  attempt %d\n", u.ExecutionID, u.ToolCallID, u.Tool, u.Attempt)
	}
}

func (a *app) resolveCommand() *cobra.Command {
	var (
		applied, notApplied, retry, abandon bool
		reason, result, receipt             string
		df                                  decisionFlags
	)
	c := &cobra.Command{
		Use:   "resolve <execution-id> --applied|--not-applied [--retry|--abandon] --reason TEXT",
		Short: "Resolve a recovery_required execution",
		Long: `resolve records an operator's decision on an execution whose outcome
recovery could not decide. Check the provider first (connhost history shows
the idempotency key and any receipt), then:

  --applied                 the effect happened: the execution succeeds with
                            --result and --receipt as its recorded outcome;
  --not-applied --retry     it did not happen: dispatch again with the same key;
  --not-applied --abandon   it did not happen and must not: abandon it.

Every resolution is audited with who made it and --reason. Once a session
holds no recovery_required execution it is no longer fenced. Through a
server, resolving needs an approver's or an operator's token.
` + decisionHelp,
		Example: `  connhost resolve ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz --config docs/connhost.example.toml --applied \
      --receipt pi_3N2xQw2eZvKYlo2C0123abcd --reason "found in the Stripe dashboard"
  CONNHOST_APPROVER_TOKEN=$CONNHOST_TOKEN_RITA connhost resolve ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz \
      --not-applied --retry --reason "no PaymentIntent with this key" --server http://127.0.0.1:8420`,
		Args: cli.ExactArgs(1, "an execution id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if retry && applied {
				return cli.Usagef("--retry goes with --not-applied")
			}
			if notApplied && !retry && !abandon {
				return cli.Usagef("--not-applied needs --retry or --abandon")
			}
			if applied && abandon {
				return cli.Usagef("--abandon goes with --not-applied")
			}
			if (result != "" || receipt != "") && !applied {
				return cli.Usagef("--result and --receipt go with --applied")
			}
			r := host.Resolution{Applied: applied, Retry: retry, Receipt: receipt, Reason: reason}
			if result != "" {
				raw, err := a.readArg(result)
				if err != nil {
					return cli.Usagef("--result: %v", err)
				}
				if !json.Valid(raw) {
					return cli.Usagef("--result is not valid JSON")
				}
				r.Result = raw
			}
			body := httpapi.ResolveRequest{Applied: &applied, Result: r.Result, Receipt: receipt, Retry: retry, By: df.by, Reason: reason}
			res, err := a.decide(cmd.Context(), df, "resolve", request{path: "/v1/executions/" + url.PathEscape(args[0]) + "/resolve", body: body},
				func(ex *host.Executor, by string) (host.Result, error) {
					r.By = by
					return ex.Resolve(cmd.Context(), args[0], r)
				})
			if err != nil {
				return err
			}
			a.printResult(res)
			return nil
		},
	}
	f := c.Flags()
	f.BoolVar(&applied, "applied", false, "the effect happened")
	f.BoolVar(&notApplied, "not-applied", false, "the effect did not happen")
	f.BoolVar(&retry, "retry", false, "with --not-applied: dispatch again with the same idempotency key")
	f.BoolVar(&abandon, "abandon", false, "with --not-applied: abandon the execution")
	f.StringVar(&reason, "reason", "", "why (required; audited)")
	f.StringVar(&result, "result", "", "with --applied: the JSON result to record, or @file")
	f.StringVar(&receipt, "receipt", "", "with --applied: the provider's id of the effect")
	df.register(c, `operator name recorded when the ledger is opened directly (default "local:<OS user>"); through a server, your principal's name`)
	c.MarkFlagsOneRequired("applied", "not-applied")
	c.MarkFlagsMutuallyExclusive("applied", "not-applied")
	c.MarkFlagsMutuallyExclusive("retry", "abandon")
	_ = c.MarkFlagRequired("reason")
	return c
}

func (a *app) approveCommand(approve bool) *cobra.Command {
	var (
		digest, reason string
		df             decisionFlags
	)
	verb, Verb, exampleReason := "approve", "Approve", "checked the amount"
	if !approve {
		verb, Verb, exampleReason = "reject", "Reject", "the amount is wrong"
	}
	use := verb + " <approval-id> --digest D [--reason TEXT]"
	if approve {
		use = verb + " <approval-id> [--digest D] [--reason TEXT]"
	}
	c := &cobra.Command{
		Use:   use,
		Short: Verb + " a call that awaits approval",
		Example: fmt.Sprintf("  connhost %[1]s ap_njtcv4fzn2kmhrfcdjtcxw6umukudvcz --config docs/connhost.example.toml \\\n"+
			"      --digest aac26fb6d9462554018b1c41f639c64b28d04f602ab7b2f54b9f2b7f334bd1ba --reason \"%[2]s\"\n"+
			"  CONNHOST_APPROVER_TOKEN=$CONNHOST_TOKEN_RITA connhost %[1]s ap_njtcv4fzn2kmhrfcdjtcxw6umukudvcz \\\n"+
			"      --digest aac26fb6d9462554018b1c41f639c64b28d04f602ab7b2f54b9f2b7f334bd1ba --server http://127.0.0.1:8420", verb, exampleReason),
		Args: cli.ExactArgs(1, "an approval id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if approve && digest == "" {
				return a.showApproval(cmd.Context(), df, args[0])
			}
			if digest != "" {
				full, err := a.expandDigest(cmd.Context(), df, args[0], digest)
				if err != nil {
					return err
				}
				digest = full
			}
			body := httpapi.DecisionRequest{By: df.by, Digest: digest, Reason: reason}
			res, err := a.decide(cmd.Context(), df, verb, request{path: "/v1/approvals/" + url.PathEscape(args[0]) + "/" + verb, body: body},
				func(ex *host.Executor, by string) (host.Result, error) {
					d := host.Decision{By: by, ArgsDigest: digest, Reason: reason}
					if approve {
						return ex.Approve(cmd.Context(), args[0], d)
					}
					return ex.Reject(cmd.Context(), args[0], d)
				})
			if err != nil {
				return err
			}
			a.printResult(res)
			return nil
		},
	}
	if approve {
		c.Long = `approve approves the exact arguments a reviewer was shown: --digest must be
the args digest of the approval request. Without --digest, approve shows
the call and decides nothing (exit 2): every argument, decoded and whole,
the fields the operation's manifest names for review first, money in its
currency, and a warning when the call may repeat an earlier one; then the
command that approves exactly that call. The approval is bound to the
digest and the operation's policy version, and is consumed by the first
dispatch; the runtime re-drives the call (same session, tool-call id and
arguments) to dispatch it. Through a server, approving needs an approver's
token.
` + decisionHelp
	} else {
		c.Long = `reject rejects an approval request; the execution becomes rejected and is
never dispatched. --digest is optional for a rejection. Through a server,
rejecting needs an approver's token.
` + decisionHelp
	}
	f := c.Flags()
	f.StringVar(&digest, "digest", "", "the args digest the reviewer was shown (the whole digest, or at least its first 12 hex characters)")
	f.StringVar(&reason, "reason", "", "why (audited)")
	df.register(c, `reviewer name recorded when the ledger is opened directly (default "local:<OS user>"); through a server, your principal's name`)
	return c
}

// showApproval prints the approval view of approvalID (host.ApprovalView,
// what GET /v1/approvals/{id} answers) through the server that holds the
// ledger, or from the ledger directly, and exits 2: approve decided
// nothing without --digest.
func (a *app) showApproval(ctx context.Context, df decisionFlags, approvalID string) error {
	var view host.ApprovalView
	_, err := a.decide(ctx, df, "approve", request{method: "GET", path: "/v1/approvals/" + url.PathEscape(approvalID), out: &view},
		func(ex *host.Executor, _ string) (host.Result, error) {
			var err error
			view, err = ex.ApprovalView(ctx, approvalID)
			return host.Result{}, err
		})
	if err != nil {
		return err
	}
	if a.g.json {
		cli.WriteJSON(a.stdout, view)
		return &cli.ExitError{Code: cli.ExitUsage}
	}
	fmt.Fprint(a.stdout, view.Text)
	if view.Status != host.StatusAwaitingApproval {
		return &cli.ExitError{Code: cli.ExitUsage, Err: cli.Usagef("approval %s is %s (execution %s is %s): there is nothing to approve", approvalID, view.Decision, view.ExecutionID, view.Status)}
	}
	return &cli.ExitError{Code: cli.ExitUsage, Err: cli.Usagef("nothing was decided: to approve exactly the call shown above, run connhost approve %s --digest %s", approvalID, view.ArgsDigest)}
}

// minDigestPrefix is the shortest --digest accepted in place of the
// whole args digest: 12 hex characters, 48 bits.
const minDigestPrefix = 12

// expandDigest returns the whole args digest of approvalID's recorded
// arguments for digest, which is it or its first minDigestPrefix hex
// characters or more (as the README and logs show it shortened). A
// prefix is read against the approval's own recorded digest, so it names
// one set of arguments or none; one that is not its start is refused
// with the whole recorded digest.
func (a *app) expandDigest(ctx context.Context, df decisionFlags, approvalID, digest string) (string, error) {
	d := strings.ToLower(strings.TrimSuffix(digest, "…"))
	if len(d) == sha256HexLen {
		return d, nil
	}
	if len(d) < minDigestPrefix || len(d) > sha256HexLen || strings.Trim(d, "0123456789abcdef") != "" {
		return "", cli.Usagef("--digest %q: give the args digest whole (64 hex characters) or at least its first %d", digest, minDigestPrefix)
	}
	var view host.ApprovalView
	_, err := a.decide(ctx, df, "approve", request{method: "GET", path: "/v1/approvals/" + url.PathEscape(approvalID), out: &view},
		func(ex *host.Executor, _ string) (host.Result, error) {
			var err error
			view, err = ex.ApprovalView(ctx, approvalID)
			return host.Result{}, err
		})
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(view.ArgsDigest, d) {
		return "", refusef(host.ErrApprovalDigest, "approval %s: the digest %s you gave is not the start of the recorded arguments' digest %s; approve what was recorded (connhost approve %s shows it), or nothing",
			approvalID, d, view.ArgsDigest, approvalID)
	}
	return view.ArgsDigest, nil
}

// sha256HexLen is the length of a hex sha256 digest.
const sha256HexLen = 64

// shownID is an identifier as the CLI prints it: as it is, or quoted with
// escapes when it holds characters that must not reach a terminal raw.
func shownID(s string) string {
	q, escaped := argview.Quote(s)
	if escaped {
		return q
	}
	return s
}

func (a *app) cancelCommand() *cobra.Command {
	var df decisionFlags
	c := &cobra.Command{
		Use:   "cancel <execution-id>",
		Short: "Cancel an execution",
		Long: `cancel cancels an execution. Before dispatch (awaiting approval, approved,
waiting for a retry) it is cancelled at once; once dispatched, cancellation
is cooperative: it is recorded, and if the outcome turns out unknown,
recovery never dispatches the call again. A recovery_required execution is
refused: its effect may have happened, so only connhost resolve settles it.
A terminal execution is shown unchanged. Through a server, cancelling needs
an operator's (or the runtime's) token.
` + decisionHelp,
		Example: `  connhost cancel ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz --config docs/connhost.example.toml
  CONNHOST_APPROVER_TOKEN=$CONNHOST_TOKEN connhost cancel ex_njtcv4fzn2kmhrfcdjtcxw6umukudvcz --server http://127.0.0.1:8420 --json`,
		Args: cli.ExactArgs(1, "an execution id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := a.decide(cmd.Context(), df, "cancel",
				request{path: "/v1/executions/" + url.PathEscape(args[0]) + "/cancel", body: httpapi.CancelRequest{By: df.by}},
				func(ex *host.Executor, by string) (host.Result, error) {
					return ex.Cancel(cmd.Context(), args[0], by)
				})
			if err != nil {
				return err
			}
			a.printResult(res)
			return nil
		},
	}
	df.register(c, `requester name recorded when the ledger is opened directly (default "local:<OS user>"); through a server, your principal's name`)
	return c
}
