//go:build serveronly

package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/spf13/cobra"
)

// devkitCommands: a serveronly build has no dev, demo, sandbox, crashtest
// or bench command (see devkit_commands.go).
func (a *app) devkitCommands() []*cobra.Command { return nil }

// startSandbox: a serveronly build has no provider emulators.
func startSandbox(context.Context, string, string, *slog.Logger) (providerSandbox, error) {
	return nil, errors.New("this connhost was built with -tags serveronly, without the provider emulators")
}
