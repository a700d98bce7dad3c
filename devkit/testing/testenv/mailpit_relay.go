package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// MailpitRelayingToSelf starts a real Mailpit (as Mailpit does) whose SMTP
// relay is its own SMTP server: a released message comes back as a new
// stored message, so a release is an effect counted like a send. --max is
// raised above anything a test stores (Mailpit prunes beyond 500 messages
// by default, and a pruned message would hide an effect). extraArgs are
// appended to the command line.
func MailpitRelayingToSelf(tb testing.TB, extraArgs ...string) string {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	relay := filepath.Join(tb.TempDir(), "relay.yml")
	if err := os.WriteFile(relay, fmt.Appendf(nil, "host: 127.0.0.1\nport: %d\n", port), 0o644); err != nil {
		tb.Fatal(err)
	}
	args := append([]string{"--smtp", fmt.Sprintf("127.0.0.1:%d", port), "--smtp-relay-config", relay, "--max", "1000000"}, extraArgs...)
	return Mailpit(tb, args...)
}
