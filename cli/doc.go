// Package cli holds the conventions of connhost's command line that the
// packages registering commands on it share with cmd/connhost: the exit
// codes and the errors that carry them (ExitError, Usagef), and the text
// and JSON printing every command uses (Fprintf and TermSafe for values
// that reach a terminal, RenderProblem for a refusal, WriteJSON for
// --json).
//
// It is separate from cmd/connhost so that command sets kept in their own
// packages (cli/authoring, devkit/commands) print and exit the way the
// rest of the CLI does, without a copy of these rules and without
// importing package main.
package cli
