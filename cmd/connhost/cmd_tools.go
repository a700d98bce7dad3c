package main

import (
	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/server/tooldefs"
)

func (a *app) toolsCommand() *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "tools [--format openai|anthropic|mcp]",
		Short: "Print tool definitions for models",
		Long: `tools prints the tool definitions of the connectors in --manifests, in the
format of the model API (always JSON; it needs no ledger):

  openai     [{"type":"function","function":{"name","description","parameters"}}]
  anthropic  [{"name","description","input_schema"}]
  mcp        {"tools":[{"name","title","description","inputSchema","annotations","_meta"}]}
             (what connhost mcp and /mcp list)

OpenAI and Anthropic accept tool names that match ^[a-zA-Z0-9_-]{1,64}$
only, and runtimes hand MCP tools to them unchanged, so every format
names a tool "connector_operation" (payments_create_payment). Two tools
that would get one name, or a name over 64 characters, are an error. The
ledger, the audit trail and every execution keep "connector.operation";
POST /v1/executions, exec and tools/call accept either name (and the
older "connector__operation").`,
		Example: `  connhost tools --format openai > tools.json
  connhost tools --format mcp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := tooldefs.ParseFormat(format)
			if err != nil {
				return cli.Usagef("--format: %v", err)
			}
			ms, err := a.loadManifests()
			if err != nil {
				return err
			}
			b, err := tooldefs.JSON(ms, f)
			if err != nil {
				return err
			}
			_, err = a.stdout.Write(b)
			return err
		},
	}
	c.Flags().StringVar(&format, "format", "openai", "openai, anthropic or mcp")
	return c
}
