package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
	"github.com/connhost/connhost/server/mcpserver"
)

// rawStdio is a `connhost mcp` process driven line by line, as a client
// that is not an SDK (or one whose order of messages is its own) drives
// it.
type rawStdio struct {
	t       *testing.T
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan map[string]any
	log     *logWriter
}

// startRaw starts connhost mcp on a new --data (nothing compiled there
// yet) with config as its config file.
func startRaw(t *testing.T, config string, env ...string) *rawStdio {
	t.Helper()
	data := t.TempDir()
	cfg := filepath.Join(data, "connhost.toml")
	require.NoError(t, os.WriteFile(cfg, []byte(config), 0o600))
	cmd := exec.Command(binary(t), "mcp", "--data", data, "--manifests", shared.manifests, "--modules", shared.modules, "--config", cfg)
	cmd.Env = append(os.Environ(), env...)
	r := &rawStdio{t: t, cmd: cmd, replies: make(chan map[string]any, 64), log: newLogWriter(t)}
	cmd.Stderr = r.log
	var err error
	r.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = r.stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Error("connhost mcp did not exit within a minute of its stdin closing")
		}
	})
	go func() {
		defer close(r.replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
				r.replies <- m
			}
		}
	}()
	return r
}

func (r *rawStdio) send(msg string) {
	r.t.Helper()
	var v any
	require.NoError(r.t, json.Unmarshal([]byte(msg), &v), msg)
	_, err := io.WriteString(r.stdin, msg+"\n")
	require.NoError(r.t, err)
}

// reply returns the next answer (a message with an id).
func (r *rawStdio) reply() map[string]any {
	r.t.Helper()
	select {
	case m, ok := <-r.replies:
		if !ok {
			r.t.Fatalf("connhost mcp closed its output")
		}
		return m
	case <-time.After(2 * time.Minute):
		r.t.Fatalf("no answer from connhost mcp")
	}
	return nil
}

const (
	discoverMsg = `{"jsonrpc":"2.0","id":%d,"method":"server/discover","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"}}}}`
	initializeMsg = `{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`
	initializedMsg = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	echoMsg        = `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"noop_echo","arguments":{"msg":"hi"},` +
		`"_meta":{"io.connhost/session_id":"s-raw","io.connhost/tool_call_id":"c%d"}}}`
)

// TestStdioDiscoverAndInitialize: a client that has just launched
// connhost mcp (a new --data: the ledger is created and the connectors
// compile meanwhile) may probe with server/discover, give up waiting, and
// send initialize; or send initialize and then probe. Every order is
// answered, none is refused as a duplicate initialization, and the
// connection keeps the protocol initialize negotiated: the tool call
// that follows runs once the start is done.
func TestStdioDiscoverAndInitialize(t *testing.T) {
	for _, order := range [][]string{{"discover", "initialize"}, {"initialize", "discover"}} {
		t.Run(strings.Join(order, "+"), func(t *testing.T) {
			r := startRaw(t, stdioConfig(t))
			for i, m := range order {
				if m == "discover" {
					r.send(fmt.Sprintf(discoverMsg, i+1))
				} else {
					r.send(fmt.Sprintf(initializeMsg, i+1))
				}
			}
			for i, m := range order {
				got := r.reply()
				require.EqualValues(t, i+1, got["id"], "%v", got)
				require.Nil(t, got["error"], "%s answered %v", m, got)
				res := got["result"].(map[string]any)
				if m == "discover" {
					require.Contains(t, res["supportedVersions"], "2026-07-28")
					require.Contains(t, res["supportedVersions"], "2025-11-25")
					require.NotNil(t, res["capabilities"].(map[string]any)["tools"])
				} else {
					require.Equal(t, "2025-11-25", res["protocolVersion"])
					require.Equal(t, "connhost", res["serverInfo"].(map[string]any)["name"])
				}
			}
			r.send(initializedMsg)
			r.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
			got := r.reply()
			require.Nil(t, got["error"], "tools/list: %v", got)
			require.NotEmpty(t, got["result"].(map[string]any)["tools"])
			r.send(fmt.Sprintf(echoMsg, 4, 4))
			got = r.reply()
			require.Nil(t, got["error"], "tools/call: %v", got)
			res := got["result"].(map[string]any)
			require.Equal(t, "succeeded", res["structuredContent"].(map[string]any)["status"], "%v", res)
		})
	}
}

// TestStdioStartFailed: connhost mcp launched without the environment
// variable its config takes a secret from (the stdio transports of the
// AI SDK, the TypeScript SDK and others pass a bare environment) still
// answers initialize and lists its tools, and every tools/call answers
// why nothing can run, naming the variable: a client shows that instead
// of "Connection closed". Nothing is recorded; the exit status says the
// start failed.
func TestStdioStartFailed(t *testing.T) {
	f := newFixture(t, overStdio)
	cfg := strings.Replace(stdioConfig(t), "api_key = ", "api_key_env = \"CONNHOST_TEST_UNSET_KEY\"\n# api_key = ", 1)
	path := filepath.Join(f.data, "connhost.toml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	cmd := exec.Command(binary(t), "mcp", "--data", f.data, "--manifests", shared.manifests, "--modules", shared.modules, "--config", path)
	cmd.Env = append(os.Environ(), "CONNHOST_TEST_UNSET_KEY=")
	f.log = newLogWriter(t)
	cmd.Stderr = f.log
	c := mcp.NewClient(&mcp.Implementation{Name: "connhost-test", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, tools.Tools)

	res, out := callTool(t, cs, "payments_create_payment", payment, ids("s-nostart", "c1"))
	require.True(t, res.IsError)
	require.Equal(t, "refused", out.Status)
	require.Equal(t, mcpserver.CodeStartFailed, out.Code)
	require.Contains(t, text(res), "CONNHOST_TEST_UNSET_KEY")
	require.Contains(t, text(res), "is empty")
	require.Contains(t, text(res), "Do not issue this call again")
	require.Empty(t, out.ExecutionID)

	// Closing the client waits for the process, whose exit status says
	// the start failed.
	var exit *exec.ExitError
	require.ErrorAs(t, cs.Close(), &exit)
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, f.log.String(), "CONNHOST_TEST_UNSET_KEY")
	_, err = os.Stat(filepath.Join(f.data, "ledger"))
	require.True(t, os.IsNotExist(err), "a ledger was created: %v", err)
}

// TestCallWaitsForStart: a server made with NewStarting lists its tools
// before its executor is there; a tools/call waits for Started, up to
// StartWait (then "starting", retry_same_ids: nothing was recorded), and
// a failed start answers every call with its reason (start_failed,
// do_not_retry).
func TestCallWaitsForStart(t *testing.T) {
	f := newFixture(t, overHTTP)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	connect := func(srv *mcpserver.Server) *mcp.ClientSession {
		t.Helper()
		st, ct := mcp.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		go func() { _ = srv.Run(ctx, st) }()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "connhost-test", Version: "0"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	srv, err := mcpserver.NewStarting(f.ex.Manifests(), mcpserver.Options{StartWait: 200 * time.Millisecond, Logger: quiet})
	require.NoError(t, err)
	cs := connect(srv)
	tools, err := cs.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.NotEmpty(t, tools.Tools)

	res, out := callTool(t, cs, "noop_echo", map[string]any{"msg": "early"}, ids("s-start", "c1"))
	require.True(t, res.IsError)
	require.Equal(t, mcpserver.CodeStarting, out.Code, text(res))
	require.Equal(t, mcpserver.NextRetrySameIDs, out.Next)
	_, _, err = f.ex.Get(context.Background(), ledger.ExecutionID(ledger.DefaultNamespace, "s-start", "c1"))
	require.ErrorIs(t, err, host.ErrNotFound, "nothing recorded for a call refused while starting")

	srv2, err := mcpserver.NewStarting(f.ex.Manifests(), mcpserver.Options{Logger: quiet})
	require.NoError(t, err)
	cs2 := connect(srv2)
	done := make(chan mcpserver.Result, 1)
	go func() {
		_, out := callTool(t, cs2, "noop_echo", map[string]any{"msg": "waits"}, ids("s-start", "c2"))
		done <- out
	}()
	time.Sleep(100 * time.Millisecond)
	srv2.Started(f.ex, nil)
	select {
	case out := <-done:
		require.Equal(t, "succeeded", out.Status)
	case <-time.After(time.Minute):
		t.Fatal("the waiting call never ran")
	}

	srv3, err := mcpserver.NewStarting(f.ex.Manifests(), mcpserver.Options{Logger: quiet})
	require.NoError(t, err)
	srv3.Started(nil, errors.New("connhost.toml:3: environment variable STRIPE_KEY (api_key_env) is not set"))
	res, out = callTool(t, connect(srv3), "noop_echo", map[string]any{"msg": "never"}, ids("s-start", "c3"))
	require.True(t, res.IsError)
	require.Equal(t, mcpserver.CodeStartFailed, out.Code)
	require.Equal(t, mcpserver.NextDoNotRetry, out.Next)
	require.Contains(t, text(res), "STRIPE_KEY (api_key_env) is not set")
}
