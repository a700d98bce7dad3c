//go:build !serveronly

package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/devkit/commands"
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
	return commands.Commands(commandLine{a})
}

// The dev kit's part of commandLine: what commands.CLI asks beyond
// authoring.CLI (commandline.go).

func (c commandLine) RunOnShipped(modules string) {
	c.a.shipped = true
	if modules != "" {
		c.a.g.modules = modules
	}
}

func (c commandLine) LoadConfig() (*server.Config, error) {
	return loadConfig(c.a.g.config, os.LookupEnv)
}

func (c commandLine) ServeDev(ctx context.Context, o commands.DevServe) error {
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
