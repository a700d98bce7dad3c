package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/buildinfo"
)

// wazeroRequired is the wazero version go.mod requires.
func wazeroRequired(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/tetratelabs/wazero (v\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod requires no wazero")
	}
	return string(m[1])
}

// TestVersion: connhost version and --version say the Go, wazero and ABI
// versions the binary was built with; --json prints them as fields.
func TestVersion(t *testing.T) {
	wz := wazeroRequired(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(t, nil, args...)
		if code != cli.ExitOK || errOut != "" || !strings.HasPrefix(out, "connhost ") {
			t.Fatalf("%v: exit %d %q %q", args, code, out, errOut)
		}
		for _, want := range []string{"\n  go      " + runtime.Version() + "\n", "\n  wazero  " + wz + "\n", "\n  abi     1\n", "\n  commit  "} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: %q lacks %q", args, out, want)
			}
		}
	}
	code, out, _ := runCLI(t, nil, "--json", "version")
	var bi buildinfo.Info
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &bi) != nil || bi.WazeroVersion != wz || bi.ABIVersion != abi.Version || bi.GoVersion != runtime.Version() || bi.Version == "" {
		t.Fatalf("--json version: exit %d %q", code, out)
	}
}

// TestLogLevelFlag: --log-level takes debug, info, warn or error, and a
// server logs from it up; anything else is a usage error.
func TestLogLevelFlag(t *testing.T) {
	if code, _, errOut := runCLI(t, nil, "--log-level", "loud", "version"); code != cli.ExitUsage || !strings.Contains(errOut, "want debug, info, warn or error") {
		t.Fatalf("--log-level loud: exit %d %q", code, errOut)
	}
	var errb strings.Builder
	a := newApp(strings.NewReader(""), &strings.Builder{}, &errb)
	a.g.logLevel = "warn"
	l := a.logger()
	l.Info("not this")
	l.Warn("this")
	if got := errb.String(); strings.Contains(got, "not this") || !strings.Contains(got, "this") {
		t.Fatalf("--log-level warn logged %q", got)
	}
}

// TestMCPServerVersion: connhost mcp reports the build's version as
// serverInfo.version in its answer to initialize.
func TestMCPServerVersion(t *testing.T) {
	a := testApp(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	a.stdin, a.stdout, a.stderr = inR, outW, &errb
	done := make(chan int, 1)
	go func() {
		done <- a.execute(context.Background(), []string{"--manifests", "testdata/manifests", "mcp"})
		outW.Close()
	}()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	}()
	out := bufio.NewReader(outR)
	line, err := out.ReadString('\n')
	// initialize is answered before connhost has started; a call waits
	// for the start, so the client stays until it has one answer.
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noop.echo","arguments":{"msg":"hi"},"_meta":{"io.connhost/session_id":"s1","io.connhost/tool_call_id":"c1"}}}`+"\n")
	}()
	if called, cerr := out.ReadString('\n'); cerr != nil || !strings.Contains(called, `"succeeded"`) {
		t.Fatalf("tools/call after initialize: %q %v\n%s", called, cerr, errb.String())
	}
	inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if code := <-done; code != cli.ExitOK || err != nil {
		t.Fatalf("mcp: exit %d %v %q", code, err, errb.String())
	}
	// Like serve and dev, mcp says at startup what waits.
	if !strings.Contains(errb.String(), "nothing waits for a reviewer or an operator") {
		t.Errorf("mcp's startup log does not say what waits:\n%s", errb.String())
	}
	var resp struct {
		Result struct {
			ServerInfo struct {
				Name, Version string
			} `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &resp); err != nil {
		t.Fatalf("initialize answer %q: %v", line, err)
	}
	if want := buildinfo.Read().Short(); resp.Result.ServerInfo.Version != want || want == "dev" {
		t.Errorf("serverInfo.version %q, want %q", resp.Result.ServerInfo.Version, want)
	}
}

// TestServeRefusesTestHooks: production serve does not start with a
// crash-test hook in its environment unless --allow-test-hooks says it is
// a crash test.
func TestServeRefusesTestHooks(t *testing.T) {
	for _, kv := range [][2]string{{"CONNHOST_CRASH_AT", "after_plugin_return"}, {"CONNHOST_LOSE_UNSYNCED", "1"}} {
		t.Run(kv[0], func(t *testing.T) {
			t.Setenv(kv[0], kv[1])
			code, _, errOut := runCLI(t, nil, "serve")
			if code != cli.ExitUsage || !strings.Contains(errOut, "refusing to start: "+kv[0]+" set") {
				t.Fatalf("exit %d %q", code, errOut)
			}
			// Past the check, serve asks for what it still lacks.
			code, _, errOut = runCLI(t, nil, "serve", "--allow-test-hooks")
			if code != cli.ExitUsage || !strings.Contains(errOut, "serve needs --config FILE") || !strings.Contains(errOut, "test hooks armed") {
				t.Fatalf("--allow-test-hooks: exit %d %q", code, errOut)
			}
		})
	}
}

// TestMCPClientLeavesDuringStart: a client that leaves while connhost mcp
// is still starting (it answered initialize before its ledger and
// connectors were ready) is no failure: the start is abandoned, and the
// exit status is 0.
func TestMCPClientLeavesDuringStart(t *testing.T) {
	a := testApp(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	a.stdin, a.stdout, a.stderr = inR, outW, &errb
	done := make(chan int, 1)
	go func() {
		done <- a.execute(context.Background(), []string{"--manifests", "testdata/manifests", "mcp"})
		outW.Close()
	}()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	}()
	if _, err := bufio.NewReader(outR).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("mcp: exit %d after its client left during the start:\n%s", code, errb.String())
	}
}
