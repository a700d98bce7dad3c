package server

import (
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/server/mcpserver"
)

// TestConfigMCPApprover: [mcp] approver names the user of connhost mcp;
// a malformed or reserved name and an unknown key are errors with their
// line.
func TestConfigMCPApprover(t *testing.T) {
	c, err := ParseConfig("connhost.toml", []byte("[mcp]\napprover = \"rita\"\n"), principalEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.Approver != "rita" {
		t.Fatalf("approver %q", c.MCP.Approver)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"malformed", "[mcp]\napprover = \"rita smith\"\n", `connhost.toml:2: mcp approver "rita smith": use letters`},
		{"reserved", "[mcp]\n\napprover = \"dev-loopback\"\n", `connhost.toml:3: mcp approver "dev-loopback" is reserved`},
		{"unknown key", "[mcp]\nreviewer = \"rita\"\n", "connhost.toml:2: unknown key reviewer in [mcp] (known: approver, allow_per_request_identity, approval_wait, allow_origins)"},
		{"not a table", "mcp = \"rita\"\n", "connhost.toml:1: mcp must be a table"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("connhost.toml", []byte(tt.text), principalEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestConfigMCPIdentity: [mcp] decides what a side-effecting call without
// ids gets: serve and a configured connhost mcp refuse it unless
// allow_per_request_identity is true; dev and connhost mcp without a
// config run it with a warning. approval_wait and allow_origins reach the
// MCP server; bad values are errors with their line.
func TestConfigMCPIdentity(t *testing.T) {
	if o := (*Config)(nil).MCPOptions(true); o.PerRequest != mcpserver.PerRequestWarn {
		t.Errorf("no config, lenient: %q", o.PerRequest)
	}
	empty, err := ParseConfig("connhost.toml", []byte(""), principalEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o := empty.MCPOptions(false); o.PerRequest != mcpserver.PerRequestRefuse {
		t.Errorf("a config without the opt-in: %q, want refuse", o.PerRequest)
	}
	c, err := ParseConfig("connhost.toml", []byte("[mcp]\nallow_per_request_identity = true\napproval_wait = \"90s\"\nallow_origins = [\"https://console.example.com\", \"http://localhost:6274\"]\n"), principalEnv)
	if err != nil {
		t.Fatal(err)
	}
	o := c.MCPOptions(false)
	if o.PerRequest != mcpserver.PerRequestAllow || o.ApprovalWait != 90*time.Second || len(o.TrustedOrigins) != 2 {
		t.Fatalf("options %+v", o)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"not a bool", "[mcp]\nallow_per_request_identity = \"yes\"\n", "connhost.toml:2: mcp.allow_per_request_identity must be true or false"},
		{"bad wait", "[mcp]\napproval_wait = \"soon\"\n", "connhost.toml:2: approval_wait must be a positive duration"},
		{"bad origin", "[mcp]\nallow_origins = [\"console.example.com\"]\n", "connhost.toml:2: mcp.allow_origins[0] console.example.com: want a browser origin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("connhost.toml", []byte(tt.text), principalEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
