// Package authoring holds connhost's commands for connector authors and
// reviewers: new (scaffold a connector), build (compile and pin its
// module), abi check and audit (review a manifest and its module, waive
// and sign off findings). Commands returns them for cmd/connhost to
// register, as Pebble's tool package hands cmd/pebble its commands.
//
// They are a package of their own because they work on connectors, not
// on a ledger or a server: what they need of the command line is small
// (CLI), and they print and exit the way every command does (package
// cli). Unlike the dev kit's commands (devkit/commands), a server-only
// build keeps them: reviewing what a server will run is an operator's
// work too.
package authoring

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/manifests"
)

// CLI is what the authoring commands take from the connhost command line.
// Its methods are called while a command runs, after the flags and
// --config's [server] table are applied.
type CLI interface {
	// Stdout and Stderr are the command's output streams.
	Stdout() io.Writer
	Stderr() io.Writer
	// JSON reports --json.
	JSON() bool
	// Manifests, Modules and CacheDir are --manifests, --modules and
	// --cache-dir ("": the user's cache directory).
	Manifests() string
	Modules() string
	CacheDir() string
	// LoadManifests loads every manifest in --manifests.
	LoadManifests() ([]*manifests.Manifest, error)
	// Now is the clock of waivers and sign-offs.
	Now() time.Time
}

// Commands returns the authoring commands, each taking what it needs of
// the command line from c.
func Commands(c CLI) []*cobra.Command {
	k := &kit{CLI: c}
	return []*cobra.Command{k.buildCommand(), k.auditCommand(), k.newCommand(), k.abiCommand()}
}

// kit is one command line's authoring commands.
type kit struct{ CLI }
