package mcpserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/tooldefs"
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

// aisdkDir holds the Vercel AI SDK's MCP client and its locked
// dependencies (node_modules is installed by .ci/run with npm ci).
const aisdkDir = "testdata/aisdk"

// TestAISDKColdStdio: the Vercel AI SDK's stdio MCP client
// (createMCPClient with Experimental_StdioMCPTransport) connects to a
// freshly launched connhost mcp, on a new data directory and an empty
// cache, 20 times in 20, and lists the tools; the first run also calls a
// tool through the AI SDK tool's execute. The client probes with
// server/discover and gives up after 1 s, then sends initialize: a
// connhost that opened its ledger and compiled its connectors before
// reading stdin missed the probe and refused the initialize as a
// duplicate 7 times in 8. Without Node or the SDK installed it skips,
// saying so; under CI it fails instead.
func TestAISDKColdStdio(t *testing.T) {
	node := testenv.Node(t, aisdkDir, "@ai-sdk/mcp")
	ms, err := manifests.LoadDir(shared.manifests)
	require.NoError(t, err)
	tools, err := tooldefs.MCPTools(ms)
	require.NoError(t, err)
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	base := t.TempDir()
	cfg := filepath.Join(base, "connhost.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(stdioConfig(t)), 0o600))
	const runs = 20
	cmd := exec.Command(node, "coldstart.mjs", strconv.Itoa(runs), base, binary(t),
		"mcp", "--data", "{data}", "--manifests", shared.manifests, "--modules", shared.modules, "--config", cfg)
	cmd.Dir = aisdkDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep struct {
		Runs []struct {
			OK       bool     `json:"ok"`
			Tools    []string `json:"tools"`
			Protocol string   `json:"protocol"`
			MS       int      `json:"ms"`
			Error    string   `json:"error"`
			Uncaught []string `json:"uncaught"`
		} `json:"runs"`
		Call struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"call"`
	}
	if jerr := json.Unmarshal(out, &rep); jerr != nil || err != nil {
		t.Fatalf("node coldstart.mjs: %v (report: %v)\nstdout: %s\nstderr: %s", err, jerr, out, stderr.String())
	}
	require.Len(t, rep.Runs, runs)
	ok := 0
	for i, r := range rep.Runs {
		if !r.OK {
			t.Errorf("run %d: %s", i, r.Error)
			continue
		}
		require.Equal(t, names, r.Tools, "run %d", i)
		t.Logf("run %d: connected (protocol %s) and listed %d tools %d ms after the launch", i, r.Protocol, len(r.Tools), r.MS)
		ok++
	}
	require.Equal(t, runs, ok, "connected %d times in %d\nstderr: %s", ok, runs, stderr.String())
	require.False(t, rep.Call.IsError, "%+v", rep.Call)
	require.Equal(t, "succeeded", rep.Call.StructuredContent["status"])
}
