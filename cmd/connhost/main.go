// Command connhost runs side-effecting tool connectors (WebAssembly modules)
// durably: a ledger records the intent before and the outcome after every
// connector call, so a crash never silently repeats an approved action.
//
// See `connhost --help` for the commands and `connhost help exit-codes` for
// the exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/crash"
)

func main() {
	// Crash points are armed by the binary only (CONNHOST_CRASH_AT, for
	// the crash tests and anyone trying them by hand), never by importing
	// the executor.
	if err := crash.ArmFromEnv(); err != nil {
		fmt.Fprintf(os.Stderr, "connhost: %v\n", err)
		os.Exit(cli.ExitUsage)
	}
	raiseGOMAXPROCS()
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the command line args with the given standard streams and
// returns the process exit code. SIGINT and SIGTERM cancel the command's
// context (long-running commands such as serve shut down gracefully).
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return newApp(stdin, stdout, stderr).execute(ctx, args)
}
