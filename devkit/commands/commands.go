// Package commands holds the dev kit's commands of connhost: dev (the
// API, the ledger and the provider emulators on one machine), sandbox
// (the emulators alone), demo, crashtest and bench. Commands returns them
// for cmd/connhost to register, as Pebble's tool package hands
// cmd/pebble its commands.
//
// They are a package of their own, under devkit, because they are what
// brings the dev kit (the emulators, the crash-test engine, the
// benchmarks) into the binary: cmd/connhost imports this package from one
// file only, which a -tags serveronly build leaves out, so a server-only
// connhost holds none of the dev kit. What they need of the command line
// (its flags, its output, loading the connectors and the config, serving
// the API) they take through CLI; how they print and exit is package
// cli's, shared with every other command.
package commands

import (
	"context"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/notify"
)

// CLI is what the dev kit's commands take from the connhost command line.
// Its methods are called while a command runs, after the flags and
// --config's [server] table are applied.
type CLI interface {
	// Stdout and Stderr are the command's output streams: results on
	// Stdout, logs and progress on Stderr.
	Stdout() io.Writer
	Stderr() io.Writer
	// JSON reports --json: results are printed as JSON (package cli's
	// WriteJSON), logs as JSON lines.
	JSON() bool
	// Data, Manifests, Modules and Config are the paths of --data,
	// --manifests, --modules and --config.
	Data() string
	Manifests() string
	Modules() string
	Config() string
	// Logger logs to Stderr from --log-level up.
	Logger() *slog.Logger
	// LoadManifests loads the connectors' manifests the command runs on:
	// those in --manifests, or the shipped ones after RunOnShipped.
	LoadManifests() ([]*manifests.Manifest, error)
	// RunOnShipped makes the command run on the connectors built into
	// this binary (package connhost) instead of --manifests; a modules
	// directory other than "" replaces --modules.
	RunOnShipped(modules string)
	// LoadConfig reads and validates --config's file.
	LoadConfig() (*server.Config, error)
	// ServeDev opens the executor on the connectors of LoadManifests and
	// serves the API as connhost serve does (the discovery file, SIGHUP,
	// a graceful stop when ctx is done), with dev's terms: no
	// credentials (every request acts as the dev-loopback principal) and
	// unpinned modules allowed.
	ServeDev(ctx context.Context, o DevServe) error
	// ReadArg returns s, or the contents of a file for "@path" ("@-"
	// reads stdin).
	ReadArg(s string) ([]byte, error)
	// IsTerminal reports whether w is a terminal (progress output).
	IsTerminal(w io.Writer) bool
}

// DevServe is what dev serves.
type DevServe struct {
	// Config is the config served: [server] listen, and of --config's
	// file its path, [mcp] and [notify].
	Config *server.Config
	// Values hands config values to connectors.
	Values func(connector, key string) (string, bool)
	// ExtraOrigins adds origins to a connector's http capability (the
	// emulators' loopback ports).
	ExtraOrigins func(m *manifests.Manifest) []string
	// Channels are told what starts to wait, besides [notify]'s webhook.
	Channels []notify.Channel
	// Ready is called with the API's URL once it serves.
	Ready func(api string)
}

// Commands returns the dev kit's commands, each taking what it needs of
// the command line from c.
func Commands(c CLI) []*cobra.Command {
	k := &kit{CLI: c}
	return []*cobra.Command{k.devCommand(), k.sandboxCommand(), k.crashtestCommand(), k.benchCommand(), k.demoCommand()}
}

// kit is one command line's dev-kit commands.
type kit struct {
	CLI
	// shipped: the command runs on the connectors built into this binary
	// (see useShipped).
	shipped bool
}
