package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/server/tooldefs"
)

func (a *app) execCommand() *cobra.Command {
	var (
		call host.ToolCall
		args string
	)
	c := &cobra.Command{
		Use:   "exec --session S --tool-call T --tool connector.operation --args JSON|@file",
		Short: "Execute one tool call durably, in-process",
		Long: `exec opens the ledger in --data, loads the connectors, runs recovery, and
executes one tool call exactly as an agent runtime would: the same session
and tool-call id name the same execution, so running exec again returns the
recorded outcome instead of calling the connector a second time.

It exits 0 when the execution succeeded, 4 when it is recovery_required or
the session is fenced, and 5 for any other status (the result is printed).
A call the executor refuses before recording anything (unknown tool,
arguments that do not match the tool's input schema) exits 2; the message
says what is wrong, and for an unknown tool lists the tools there are.`,
		Example: `  connhost exec --config docs/connhost.example.toml --session s1 --tool-call call_1 --tool payments.create_payment \
      --args '{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}'
  connhost exec --config docs/connhost.example.toml --session s1 --tool-call call_2 --tool email.send --json \
      --args '{"to":"ada@example.com","subject":"Your receipt","text":"Thank you for your payment."}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := a.readArg(args)
			if err != nil {
				return cli.Usagef("--args: %v", err)
			}
			if !json.Valid(raw) {
				return cli.Usagef("--args is not valid JSON")
			}
			call.Arguments = raw
			var res host.Result
			err = a.withExecutor(cmd.Context(), openOptions{}, func(ex *host.Executor) error {
				// The name the tool definitions list works as well.
				if names, err := tooldefs.NamesOf(ex.Manifests()); err == nil {
					if tool, ok := names.Canonical(call.Tool); ok {
						call.Tool = tool
					}
				}
				var err error
				if res, err = ex.Execute(cmd.Context(), call); err != nil {
					if errors.Is(err, host.ErrUnknownTool) || errors.Is(err, host.ErrInvalidArguments) || errors.Is(err, host.ErrBadCall) {
						return &argumentError{err}
					}
					return err
				}
				// The answer leaves before the ledger closes (Close syncs):
				// a lazily written outcome may still be unsynced here,
				// which the crash point after_answer is for.
				a.printResult(res)
				crash.At(crash.AfterAnswer)
				return nil
			})
			if err != nil {
				return err
			}
			return resultExit(res)
		},
	}
	f := c.Flags()
	f.StringVar(&call.SessionID, "session", "", "session id (required)")
	f.StringVar(&call.ToolCallID, "tool-call", "", "tool-call id, unique within the session (required)")
	f.StringVar(&call.Tool, "tool", "", `tool as "connector.operation", or as listed ("connector_operation") (required)`)
	f.StringVar(&args, "args", "", "arguments: a JSON object, or @file (@- reads stdin) (required)")
	f.BoolVar(&call.Resumed, "resumed", false, "the call is replayed from history that may predate this ledger")
	f.StringVar(&call.Namespace, "namespace", "", `namespace (default "default")`)
	for _, n := range []string{"session", "tool-call", "tool", "args"} {
		_ = c.MarkFlagRequired(n)
	}
	return c
}

// resultExit maps a Result's status to the exit code.
func resultExit(res host.Result) error {
	switch res.Status {
	case host.StatusSucceeded:
		return nil
	case host.StatusRecoveryRequired:
		return &cli.ExitError{Code: cli.ExitRecoveryRequired}
	}
	return &cli.ExitError{Code: cli.ExitNotSucceeded}
}

// printResult prints a Result as JSON or as a short readable block.
func (a *app) printResult(res host.Result) {
	if a.g.json {
		cli.WriteJSON(a.stdout, res)
		return
	}
	renderResult(a.stdout, res)
}

// renderResult writes a Result for people.
func renderResult(w io.Writer, res host.Result) {
	cli.Fprintf(w, "execution  %s\n", res.ExecutionID)
	cli.Fprintf(w, "tool call  %s\n", res.ToolCallID)
	cli.Fprintf(w, "status     %s", res.Status)
	var notes []string
	if res.State != "" && string(res.State) != string(res.Status) {
		notes = append(notes, string(res.State)) // what pending stands for
	}
	if res.Attempt > 0 {
		notes = append(notes, fmt.Sprintf("attempt %d", res.Attempt))
	}
	if len(notes) > 0 {
		cli.Fprintf(w, " (%s)", strings.Join(notes, ", "))
	}
	if res.Recorded {
		fmt.Fprint(w, " — recorded outcome, connector not called")
	}
	fmt.Fprintln(w)
	if res.DuplicateOf != "" {
		how := "held for a reviewer, not dispatched"
		if res.Status == host.StatusSucceeded {
			how = "answered with its outcome, not dispatched"
		}
		cli.Fprintf(w, "repeats    %s (same arguments in the same session): %s\n", res.DuplicateOf, how)
	}
	if res.Source != "" {
		cli.Fprintf(w, "source     %s\n", res.Source)
	}
	if res.Receipt != "" {
		cli.Fprintf(w, "receipt    %s\n", res.Receipt)
	}
	if len(res.Result) > 0 {
		cli.Fprintf(w, "result     %s\n", cli.CompactJSON(res.Result))
	}
	if res.Error != "" {
		cli.Fprintf(w, "error      %s\n", res.Error)
	}
	if ap := res.Approval; ap != nil {
		by := ""
		if ap.By != "" {
			by = " by " + ap.By
		}
		cli.Fprintf(w, "approval   %s %s%s, digest %s, expires %s\n", ap.ID, ap.Decision, by, ap.ArgsDigest, ap.ExpiresAt.UTC().Format(timeFormat))
		if ap.Decision == "pending" {
			cli.Fprintf(w, "           connhost approve %s shows the call; --by NAME --digest %s approves it\n", ap.ID, ap.ArgsDigest)
		}
	}
	if !res.NextAttemptAt.IsZero() {
		cli.Fprintf(w, "next       %s\n", res.NextAttemptAt.UTC().Format(timeFormat))
	}
}
