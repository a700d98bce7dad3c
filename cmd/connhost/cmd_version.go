package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/buildinfo"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go, wazero and ABI versions",
		Long: `version prints which connhost this is, from the build information the Go
toolchain embeds in the binary: its module version (a tag for a released
build, "(devel)" or a pseudo-version for a build from a checkout), the
commit it was built from (and whether the tree was modified), the Go and
wazero versions it was built with, and the connector ABI version it loads.
connhost --version prints the same. A running server carries it too: the
connhost_build_info metric, MCP's serverInfo.version and the OpenAPI
document's info.x-connhost-version.`,
		Example: `  connhost version
  connhost version --json`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			bi := buildinfo.Read()
			if a.g.json {
				cli.WriteJSON(a.stdout, bi)
				return nil
			}
			fmt.Fprint(a.stdout, bi.Text())
			return nil
		},
	}
}

// logLevels are the values of --log-level.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// parseLogLevel reads --log-level.
func parseLogLevel(s string) (slog.Level, error) {
	l, ok := logLevels[strings.ToLower(s)]
	if !ok {
		return 0, cli.Usagef("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}
