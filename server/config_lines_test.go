package server

import "testing"

// TestConfigLineIndex: the line of a key, a table and an array entry of a
// connhost.toml, where a multi-line string holds lines that look like keys
// and headers (a regular expression took them for the real ones, so an
// error about the key below named the string's line).
func TestConfigLineIndex(t *testing.T) {
	data := []byte(`[server]
note = """
token_env = "NOT_A_KEY"
[principals]
"""
token_env = "CONNHOST_TOKEN"

[[principals]]
name = "rita"

[[principals]]
name = "olga"

[namespaces.a.connectors.payments]
base_url = "http://localhost"
`)
	idx := lineIndex(data)
	for path, want := range map[string]int{
		"server": 1, "server.note": 2, "server.token_env": 6,
		"principals": 8, "principals.0": 8, "principals.0.name": 9, "principals.1.name": 12,
		"namespaces": 14, "namespaces.a": 14, "namespaces.a.connectors.payments.base_url": 15,
	} {
		if got := idx[path]; got != want {
			t.Errorf("%s: line %d, want %d", path, got, want)
		}
	}
}
