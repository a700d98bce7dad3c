package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/server/mcpserver"
)

type fakeSandbox struct{ closed bool }

func (f *fakeSandbox) PaymentsURL() string { return "http://127.0.0.1:7001" }
func (f *fakeSandbox) EmailURL() string    { return "http://127.0.0.1:7002" }
func (f *fakeSandbox) Close() error        { f.closed = true; return nil }

// TestDevServesAPI runs `connhost dev --json` with a fake sandbox, reads
// the startup line, calls the API over a real listener and stops it with
// the context (as SIGINT would).
func TestDevServesAPI(t *testing.T) {
	dirs := testDirs(t)
	pr, pw := io.Pipe()
	a := newApp(strings.NewReader(""), pw, io.Discard)
	sb := &fakeSandbox{}
	a.startSandbox = func(ctx context.Context, listen, stateDir string, _ *slog.Logger) (providerSandbox, error) {
		// testdata/manifests holds noop and gated: neither uses the
		// payment or e-mail emulator.
		t.Error("dev started the provider emulators for connectors that do not use them")
		return sb, nil
	}
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
		if code != ExitOK {
			t.Fatalf("dev exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
	if _, err := readServerInfo(dirs.data); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("discovery file left behind: %v", err)
	}
}

// TestDevBannerSaysAnyoneCanApprove: the banner people read says plainly
// that dev has no tokens.
func TestDevBannerSaysAnyoneCanApprove(t *testing.T) {
	var buf strings.Builder
	renderDevBanner(&buf, "http://127.0.0.1:8420", "http://127.0.0.1:1", "http://127.0.0.1:2", "gated.echo", `{"msg":"x"}`)
	for _, w := range []string{"anyone on this machine can approve, reject and resolve", `recorded as "dev-loopback"`, "connhost approve <approval.id>"} {
		if !strings.Contains(buf.String(), w) {
			t.Errorf("banner lacks %q:\n%s", w, buf.String())
		}
	}
	if strings.Contains(buf.String(), `"by"`) {
		t.Errorf("banner still suggests a by field:\n%s", buf.String())
	}
}

func TestDevRefusesPublicListen(t *testing.T) {
	code, _, errOut := runCLI(t, nil, "dev", "--listen", "0.0.0.0:8420")
	if code != ExitUsage || !strings.Contains(errOut, "loopback") {
		t.Fatalf("exit %d %q", code, errOut)
	}
}

func TestDevOrigins(t *testing.T) {
	m := &manifests.Manifest{Connector: manifests.Connector{Name: "payments"},
		Capabilities: manifests.Capabilities{HTTP: []string{"https://api.stripe.com:443"}, Config: []string{"api_key", "base_url"}}}
	for url, want := range map[string]string{
		"http://127.0.0.1:7001":      "http://127.0.0.1:7001",
		"http://localhost:7001/v1":   "http://localhost:7001",
		"https://api.stripe.com:443": "", // already allowed
		"https://evil.example:443":   "", // never widened beyond loopback
		"http://127.0.0.1":           "", // no explicit port
	} {
		got := devOrigins(devConfig(url, "", nil))(m)
		if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
			t.Errorf("base_url %s: got %v, want %q", url, got, want)
		}
	}
	noBase := &manifests.Manifest{Connector: manifests.Connector{Name: "payments"}}
	if got := devOrigins(devConfig("http://127.0.0.1:1", "", nil))(noBase); len(got) != 0 {
		t.Errorf("manifest without base_url: %v", got)
	}
}

// TestDevStartsEmulatorsForTheirConnectors: an emulator starts for the
// shipped connector it stands in for, unless its URL is given; another
// connector alone starts none.
func TestDevStartsEmulatorsForTheirConnectors(t *testing.T) {
	conn := func(name string) *manifests.Manifest {
		return &manifests.Manifest{Connector: manifests.Connector{Name: name}}
	}
	for _, tc := range []struct {
		name                  string
		ms                    []*manifests.Manifest
		paymentsURL, emailURL string
		payments, email       bool
	}{
		{"another connector alone", []*manifests.Manifest{conn("hooks")}, "", "", false, false},
		{"payments", []*manifests.Manifest{conn("hooks"), conn("payments")}, "", "", true, false},
		{"both shipped", []*manifests.Manifest{conn("email"), conn("payments")}, "", "", true, true},
		{"email elsewhere", []*manifests.Manifest{conn("email"), conn("payments")}, "", "http://127.0.0.1:8025", true, false},
	} {
		p, e := emulatorsFor(tc.ms, tc.paymentsURL, tc.emailURL)
		if p != tc.payments || e != tc.email {
			t.Errorf("%s: payments %t email %t, want %t %t", tc.name, p, e, tc.payments, tc.email)
		}
	}
}

// TestDevBannerArguments: the banner's call carries arguments the tool's
// schema accepts — the scaffold's create_item included — never an {} it
// refuses.
func TestDevBannerArguments(t *testing.T) {
	m, err := manifests.Parse("hooks.toml", []byte(`
[connector]
name = "hooks"
version = "0.1.0"
abi = 1
module = "hooks.wasm"
sha256 = ""
[capabilities]
http = ["https://api.example.com:443"]
[[operation]]
name = "create_item"
description = "Create an item with a name and a quantity."
effect = "external"
recovery = "idempotent-retry"
input_schema = """
{"type": "object", "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 200},
 "quantity": {"type": "integer", "minimum": 1, "maximum": 1000}, "note": {"type": "string"}},
 "required": ["name", "quantity"], "additionalProperties": false}
"""
[[operation]]
name = "pick"
description = "Pick a colour by its code."
effect = "read"
input_schema = """
{"type": "object", "properties": {"code": {"type": "string", "pattern": "^[A-F]{6}$"}}, "required": ["code"], "additionalProperties": false}
"""
`))
	if err != nil {
		t.Fatal(err)
	}
	ms := []*manifests.Manifest{m}
	if got := exampleArgs(ms, "hooks.create_item"); got != `{"name":"example","quantity":1}` {
		t.Errorf("create_item: %s", got)
	}
	if got := exampleArgs(ms, "hooks.pick"); got != "" {
		t.Errorf("pick: %q, want none (no sample satisfies its pattern)", got)
	}
	var buf strings.Builder
	renderDevBanner(&buf, "http://127.0.0.1:8420", "", "", "hooks.pick", "")
	if !strings.Contains(buf.String(), `"arguments":ARGS}`) || !strings.Contains(buf.String(), "ARGS: an object its input schema accepts") ||
		strings.Contains(buf.String(), "payments") || strings.Contains(buf.String(), `"arguments":{}`) {
		t.Errorf("banner:\n%s", buf.String())
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
		if code != ExitOK {
			t.Fatalf("dev exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("dev did not stop")
	}
}
