//go:build !serveronly

package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/devkit/commands"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server"
	"github.com/connhost/connhost/server/httpapi"
)

// devkitCommands are the commands for connector authors and for trying
// connhost out: dev and demo (with the provider emulators), sandbox,
// crashtest and bench, kept in devkit/commands. This file is the only
// code of the binary that imports the dev kit; a build with -tags
// serveronly leaves it, and with it the emulators, the crash-test engine
// and the benchmarks, out of the binary (devkit_serveronly.go; see
// RATIONALE.md, "Why are commands registered from packages?").
func (a *app) devkitCommands() []*cobra.Command {
	return commands.Commands(devkitCLI{a})
}

// devkitCLI hands the dev kit's commands what they need of this command
// line (commands.CLI).
type devkitCLI struct{ a *app }

func (c devkitCLI) Stdout() io.Writer    { return c.a.stdout }
func (c devkitCLI) Stderr() io.Writer    { return c.a.stderr }
func (c devkitCLI) JSON() bool           { return c.a.g.json }
func (c devkitCLI) Data() string         { return c.a.g.data }
func (c devkitCLI) Manifests() string    { return c.a.g.manifests }
func (c devkitCLI) Modules() string      { return c.a.g.modules }
func (c devkitCLI) Config() string       { return c.a.g.config }
func (c devkitCLI) Logger() *slog.Logger { return c.a.logger() }

func (c devkitCLI) LoadManifests() ([]*manifests.Manifest, error) { return c.a.loadManifests() }
func (c devkitCLI) ReadArg(s string) ([]byte, error)              { return c.a.readArg(s) }
func (c devkitCLI) IsTerminal(w io.Writer) bool                   { return c.a.isTerminal(w) }

func (c devkitCLI) RunOnShipped(modules string) {
	c.a.shipped = true
	if modules != "" {
		c.a.g.modules = modules
	}
}

func (c devkitCLI) LoadConfig() (*server.Config, error) {
	return loadConfig(c.a.g.config, os.LookupEnv)
}

func (c devkitCLI) ServeDev(ctx context.Context, o commands.DevServe) error {
	anon := httpapi.DevLoopback
	return c.a.serveAPI(ctx, serveOptions{
		command:       "dev",
		config:        o.Config,
		anonymous:     &anon,
		configFunc:    o.Values,
		allowUnpinned: true,
		extraOrigins:  o.ExtraOrigins,
		channels:      o.Channels,
		ready:         o.Ready,
	})
}
