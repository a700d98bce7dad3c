//go:build !serveronly

package main

import "github.com/spf13/cobra"

// devkitCommands are the commands for connector authors and for trying
// connhost out: dev and demo (with the provider emulators), sandbox,
// crashtest and bench. They are the only code of the binary that imports
// devkit; a build with -tags serveronly leaves them, and with
// them the emulators, the crash-test engine and the benchmarks, out of the
// binary (devkit_serveronly.go).
func (a *app) devkitCommands() []*cobra.Command {
	return []*cobra.Command{a.devCommand(), a.sandboxCommand(), a.crashtestCommand(), a.benchCommand(), a.demoCommand()}
}
