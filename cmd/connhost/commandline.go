package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli/authoring"
	"github.com/connhost/connhost/manifests"
)

// commandLine hands the commands kept in packages of their own
// (cli/authoring, devkit/commands) what they need of this command line:
// its streams, its flags, the connectors (see authoring.CLI and
// devkit_commands.go).
type commandLine struct{ a *app }

// packageCommands are the commands registered from packages: the
// authoring commands, and the dev kit's unless -tags serveronly.
func (a *app) packageCommands() []*cobra.Command {
	return append(authoring.Commands(commandLine{a}), a.devkitCommands()...)
}

func (c commandLine) Stdout() io.Writer    { return c.a.stdout }
func (c commandLine) Stderr() io.Writer    { return c.a.stderr }
func (c commandLine) JSON() bool           { return c.a.g.json }
func (c commandLine) Data() string         { return c.a.g.data }
func (c commandLine) Manifests() string    { return c.a.g.manifests }
func (c commandLine) Modules() string      { return c.a.g.modules }
func (c commandLine) Config() string       { return c.a.g.config }
func (c commandLine) CacheDir() string     { return c.a.g.cacheDir }
func (c commandLine) Logger() *slog.Logger { return c.a.logger() }
func (c commandLine) Now() time.Time       { return reviewClock() }

func (c commandLine) LoadManifests() ([]*manifests.Manifest, error) { return c.a.loadManifests() }
func (c commandLine) ReadArg(s string) ([]byte, error)              { return c.a.readArg(s) }
func (c commandLine) IsTerminal(w io.Writer) bool                   { return c.a.isTerminal(w) }

// reviewClock is the clock of waivers and sign-offs; tests replace it.
var reviewClock = time.Now
