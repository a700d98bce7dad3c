package mcpserver_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/internal/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/tooldefs"
	"github.com/connhost/connhost/manifests"
)

// tsDir holds the TypeScript client and its locked dependencies
// (node_modules is installed by .ci/run with npm ci, never committed).
const tsDir = "testdata/tsclient"

// TestTypeScriptClient: a client connhost did not write, the official
// TypeScript SDK, drives connhost mcp over stdio and /mcp over streamable
// HTTP: initialize, list, a read, a gated call, an intent mismatch; the
// script checks the shapes and prints what it saw. Without Node or the
// SDK installed it skips, saying so; under CI it fails instead.
func TestTypeScriptClient(t *testing.T) {
	node := testenv.Node(t, tsDir, "@modelcontextprotocol/sdk")
	ms, err := manifests.LoadDir(shared.manifests)
	require.NoError(t, err)
	tools, err := tooldefs.MCPTools(ms)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	eachTransport(t, func(t *testing.T, kind transport) {
		f := newFixture(t, kind)
		args := []string{"client.mjs", string(kind)}
		switch kind {
		case overStdio:
			args = append(append(args, binary(t)), f.stdioArgs(false)...)
		case overHTTP:
			args = append(args, f.srv.URL+"/mcp", tokenRuntime)
		}
		cmd := exec.Command(node, args...)
		cmd.Dir = tsDir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var rep struct {
			Server struct {
				Name string `json:"name"`
			} `json:"server"`
			Tools []string `json:"tools"`
			Read  struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"read"`
			Gated struct {
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"gated"`
			Mismatch struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			} `json:"mismatch"`
			Problems []string `json:"problems"`
		}
		if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil {
			t.Fatalf("node client.mjs %s: %v (report: %v)\nstdout: %s\nstderr: %s", kind, err, jerr, out, stderr.String())
		}
		require.Empty(t, rep.Problems)
		require.Equal(t, "connhost", rep.Server.Name)
		require.Equal(t, names, rep.Tools)
		require.Equal(t, "succeeded", rep.Read.StructuredContent["status"])
		require.Equal(t, "awaiting_approval", rep.Gated.StructuredContent["status"])
		require.True(t, rep.Mismatch.IsError)
		require.Equal(t, "intent_mismatch", rep.Mismatch.StructuredContent["code"])
	})
}
