package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Exit codes of connhost. They are part of the CLI's contract: scripts and
// CI branch on them.
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitFailure: the command failed (see the message on stderr).
	ExitFailure = 1
	// ExitUsage: the command line is wrong (unknown command or flag,
	// missing or malformed argument, a path that does not exist), or exec's
	// call is (unknown tool, arguments that fail the tool's schema, a bad
	// session or tool-call id): the same command fails the same way again.
	ExitUsage = 2
	// ExitFindings: audit or crashtest found problems.
	ExitFindings = 3
	// ExitRecoveryRequired: recovery_required executions exist (recover),
	// the execution needs an operator (exec), or the session is fenced.
	ExitRecoveryRequired = 4
	// ExitNotSucceeded: exec's execution ended in another status than
	// succeeded (failed, awaiting_approval, rejected, pending, …).
	ExitNotSucceeded = 5
	// ExitLedgerDamaged: the ledger is missing, damaged, behind its mark
	// or its witness, or another ledger's; the command did nothing.
	ExitLedgerDamaged = 6
)

// ExitError is a command's error that carries its exit code. A nil Err
// prints nothing (the command already printed its output, e.g. a result
// that is not succeeded).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is a command-line mistake found by a command (ExitUsage).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Usagef returns a UsageError: the command line is wrong, and running it
// again fails the same way.
func Usagef(format string, args ...any) error {
	return &UsageError{msg: fmt.Sprintf(format, args...)}
}

// ExactArgs is cobra.ExactArgs with a message naming the argument.
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return Usagef("%s needs %s (got %d argument(s)); see %s --help", cmd.CommandPath(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}
