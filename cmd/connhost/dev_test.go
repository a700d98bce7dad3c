package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/server/mcpserver"
)

// TestDevServesAPI runs `connhost dev --json` on testdata/manifests (noop
// and gated: neither uses the payment or e-mail emulator, so the startup
// line names the API alone), calls the API over a real listener and stops
// it with the context (as SIGINT would).
func TestDevServesAPI(t *testing.T) {
	dirs := testDirs(t)
	pr, pw := io.Pipe()
	a := newApp(strings.NewReader(""), pw, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- a.execute(ctx, []string{"--json", "--data", dirs.data, "--manifests", "testdata/manifests", "--modules", dirs.modules, "dev", "--listen", "127.0.0.1:0"})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("startup line: %v (exit %d?)", err, <-done)
	}
	var urls map[string]string
	if err := json.Unmarshal([]byte(line), &urls); err != nil || urls["api"] == "" || len(urls) != 1 {
		t.Fatalf("startup line %q: %v (want the API alone: no emulator was started)", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	si, err := readServerInfo(dirs.data)
	if err != nil || si.URL != urls["api"] || si.PID != os.Getpid() || si.Command != "dev" || si.Auth {
		t.Fatalf("discovery file %+v (api %s): %v", si, urls["api"], err)
	}
	body := `{"session_id":"s1","tool_call_id":"c1","tool":"noop.echo","arguments":{"msg":"dev"}}`
	resp, err := http.Post(urls["api"]+"/v1/executions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"succeeded"`) {
		t.Fatalf("execute via dev: %d %s", resp.StatusCode, b)
	}
	// The same tools over MCP at /mcp.
	mc := mcp.NewClient(&mcp.Implementation{Name: "dev-test", Version: "0"}, nil)
	cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: urls["api"] + "/mcp"}, nil)
	if err != nil {
		t.Fatalf("mcp connect to dev: %v", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop.echo", Arguments: map[string]any{"msg": "dev"},
		Meta: mcp.Meta{mcpserver.MetaSessionID: "s1", mcpserver.MetaToolCallID: "c1"}})
	if err != nil || res.IsError {
		t.Fatalf("mcp tools/call via dev: %v %+v", err, res)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["status"] != "succeeded" || sc["recorded"] != true {
		t.Fatalf("the MCP call with the HTTP call's ids is its recorded outcome: %+v", res.StructuredContent)
	}
	_ = cs.Close()
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("dev exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	if _, err := readServerInfo(dirs.data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("discovery file left behind: %v", err)
	}
}

func TestDevRefusesPublicListen(t *testing.T) {
	code, _, errOut := runCLI(t, nil, "dev", "--listen", "0.0.0.0:8420")
	if code != cli.ExitUsage || !strings.Contains(errOut, "loopback") {
		t.Fatalf("exit %d %q", code, errOut)
	}
}

// TestDevBinaryAlone: `connhost dev` with no flags in an empty directory,
// as after go install, runs the connectors built into the binary against
// the provider emulators, and answers the README's first call.
func TestDevBinaryAlone(t *testing.T) {
	t.Chdir(t.TempDir())
	pr, pw := io.Pipe()
	a := newApp(strings.NewReader(""), pw, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- a.execute(ctx, []string{"--json", "dev", "--listen", "127.0.0.1:0"})
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("startup line: %v (exit %d?)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	var urls map[string]string
	if err := json.Unmarshal([]byte(line), &urls); err != nil || urls["api"] == "" || urls["payments"] == "" || urls["email"] == "" {
		t.Fatalf("startup line %q: %v (want the API and both emulators)", line, err)
	}
	body := `{"session_id":"s1","tool_call_id":"call_1","tool":"payments.create_payment","arguments":{"amount":500,"currency":"usd","payment_method":"pm_card_visa"}}`
	resp, err := http.Post(urls["api"]+"/v1/executions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"awaiting_approval"`) {
		t.Fatalf("the README's first call via dev: %d %s", resp.StatusCode, b)
	}
	for _, m := range []string{"payments.wasm", "email.wasm"} {
		if _, err := os.Stat(filepath.Join(".connhost", "modules", m)); err != nil {
			t.Errorf("the shipped module %s is not in .connhost/modules: %v", m, err)
		}
	}
	if _, err := os.Stat("manifests"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("dev wrote a manifests directory into the working directory: %v", err)
	}
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("dev exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
}
