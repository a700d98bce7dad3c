//go:build serveronly

package main

import "github.com/spf13/cobra"

// devkitCommands: a serveronly build has no dev, demo, sandbox, crashtest
// or bench command (see devkit_commands.go).
func (a *app) devkitCommands() []*cobra.Command { return nil }
