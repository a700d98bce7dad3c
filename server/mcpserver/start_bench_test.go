package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkStdioStart measures how long a client waits for a `connhost
// mcp` process it has just launched: from the process's start to the
// answer to initialize (sent at once, as clients do), and to the answer
// to a first tools/call (noop.echo, a read). It reports the means of
// each, in milliseconds:
//
//   - cold: a new --data and an empty user cache directory: nothing was
//     ever compiled on this machine;
//   - newdata: a new --data on a machine whose user cache holds the
//     compiled modules (a new container volume, a CI job, another
//     project);
//   - warm: the --data of the previous run (a client restarting it).
func BenchmarkStdioStart(b *testing.B) {
	bin := binary(b)
	machineCache := b.TempDir()
	warmData := b.TempDir()
	for _, kind := range []string{"cold", "newdata", "warm"} {
		b.Run(kind, func(b *testing.B) {
			switch kind {
			case "newdata":
				startOnce(b, bin, b.TempDir(), machineCache) // the machine has compiled the modules
			case "warm":
				startOnce(b, bin, warmData, machineCache) // the data directory has been used
			}
			var tInit, tCall time.Duration
			n := 0
			for b.Loop() {
				data, cache := warmData, machineCache
				switch kind {
				case "cold":
					data, cache = b.TempDir(), b.TempDir()
				case "newdata":
					data = b.TempDir()
				}
				i, c := startOnce(b, bin, data, cache)
				tInit += i
				tCall += c
				n++
			}
			b.ReportMetric(float64(tInit.Microseconds())/1000/float64(n), "initialize-ms")
			b.ReportMetric(float64(tCall.Microseconds())/1000/float64(n), "first-call-ms")
		})
	}
}

// startOnce starts connhost mcp on data with cache as the user's cache
// directory, sends initialize and a tools/call at once, and returns how
// long after the start each was answered.
func startOnce(b *testing.B, bin, data, cache string) (initialize, call time.Duration) {
	b.Helper()
	cfg := filepath.Join(data, "connhost.toml")
	if err := os.WriteFile(cfg, []byte(stdioConfig(b)), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "mcp", "--data", data, "--manifests", shared.manifests, "--modules", shared.modules, "--config", cfg)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("connhost mcp: %v\n%s", err, stderr.String())
		}
	}()
	msgs := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"noop_echo","arguments":{"msg":"hi"},"_meta":{"io.connhost/session_id":"bench","io.connhost/tool_call_id":"first"}}}`,
	}
	if _, err := io.WriteString(stdin, strings.Join(msgs, "\n")+"\n"); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Error  json.RawMessage `json:"error"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		if m.Error != nil || m.Result.IsError {
			b.Fatalf("answer %s", sc.Bytes())
		}
		switch string(m.ID) {
		case "1":
			initialize = time.Since(start)
		case "2":
			return initialize, time.Since(start)
		}
	}
	b.Fatalf("connhost mcp closed its output: %v\n%s", sc.Err(), stderr.String())
	return 0, 0
}
