package main

import (
	"strings"
	"testing"
)

// TestConfigMCPApprover: [mcp] approver names the user of connhost mcp;
// a malformed or reserved name and an unknown key are errors with their
// line.
func TestConfigMCPApprover(t *testing.T) {
	c, err := parseConfig("connhost.toml", []byte("[mcp]\napprover = \"rita\"\n"), principalEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.MCP.Approver != "rita" {
		t.Fatalf("approver %q", c.MCP.Approver)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"malformed", "[mcp]\napprover = \"rita smith\"\n", `connhost.toml:2: mcp approver "rita smith": use letters`},
		{"reserved", "[mcp]\n\napprover = \"dev-loopback\"\n", `connhost.toml:3: mcp approver "dev-loopback" is reserved`},
		{"unknown key", "[mcp]\nreviewer = \"rita\"\n", "connhost.toml:2: unknown key reviewer in [mcp] (known: approver)"},
		{"not a table", "mcp = \"rita\"\n", "connhost.toml:1: mcp must be a table"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("connhost.toml", []byte(tt.text), principalEnv)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
