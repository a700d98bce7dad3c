package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/internal/wasmbuild"
)

// notRunRecipes are the sh blocks of README.md and docs/*.md that
// TestREADMERecipes does not run, each known by its page, the innermost
// heading it sits under and its first line (without a trailing comment),
// with why it is not run and what runs its steps instead.
var notRunRecipes = []struct{ page, section, first, why string }{
	{"README.md", "Two commands", "go run ./cmd/connhost dev",
		".ci/first-command runs it as written in the clone CI tests (checked below)"},
	{"README.md", "Two commands", "make test",
		".ci/run runs it as written (checked below); it is the suite this test is part of"},
	{"docs/connectors.md", "Building connectors", "go run ./cmd/connhost new hooks",
		"a summary of the commands the next section runs step by step"},
	{"docs/connectors.md", "Adding a connector, end to end", "REPO=$PWD; go build -o /tmp/bin/connhost ./cmd/connhost; export PATH=/tmp/bin:$PATH",
		"writes a module into /tmp and resolves its dependencies; TestNewScaffold scaffolds a connector into a module of its own, runs its tests, builds, pins and audits it"},
	{"docs/connectors.md", "Adding a connector, end to end", "cp -r host/crashtest/testdata/webhook /tmp/webhook && cd /tmp/webhook",
		"needs the PATH and /tmp of the block before; TestWebhookFixtureOwnModule (host/crashtest) runs the fixture's own tests as a module of its own"},
	{"docs/connectors.md", "Adding a connector, end to end", "connhost audit --waive external-no-approval-auto-recovery:deliver --by rita \\",
		"continues in /tmp/webhook; TestAuditWaiveSignServe waives, signs and audits --strict a connector"},
	{"docs/connectors.md", "Adding a connector, end to end", "go run ./cmd/webhookd -listen 127.0.0.1:9090 &",
		"kills at every crash point for minutes; TestCrashtestOwnProvider and TestCrashtestRecordProof run these crashtest commands against the fixture's receiver and its broken variants"},
	{"docs/connectors.md", "Adding a connector, end to end", "PB_TOKEN=… PB_COLLECTION=items connhost crashtest --manifest devkit/crashtest/testdata/pocketbase.toml \\",
		"needs a PocketBase and its superuser token; TestCrashtestPocketBase runs it against one"},
	{"docs/connectors.md", "Adding a connector, end to end", "connhost audit --sign --by rita manifests/webhook.toml",
		"continues in /tmp/webhook with the receiver running; TestAuditWaiveSignServe signs and runs serve with require_signoff as a real process"},
	{"docs/connectors.md", "Adding a connector, end to end", "connhost build broken/keyignored --out build && cp build/keyignored.wasm build/webhook.wasm",
		"continues the block before; TestAuditWaiveSignServe has serve refuse a changed module, naming what changed"},
	{"docs/fleet.md", "Fleet mode: a shared ledger on PostgreSQL", "export CONNHOST_LEDGER='postgres://connhost@db.internal:5432/connhost?sslmode=verify-full'",
		"a sketch of a deployment (a database and machines of one's own); devkit/testing/fleet runs serve nodes on one PostgreSQL"},
	{"docs/restore.md", "Losing or restoring the ledger", "rm -rf .connhost && cp -r backup .connhost",
		"starts from a state the prose describes (a backup taken between two runs of dev); TestRestoredDataDirProcess runs the same drill with real processes"},
}

// TestDocRecipesAccountedFor: every sh block of README.md and docs/*.md is
// run by TestREADMERecipes or listed in notRunRecipes with its reason, so
// a recipe moved to another page or added cannot silently stop being
// tested; every MCP session (a text block of ">>" lines) is in the section
// TestREADMERecipes sends to connhost mcp; nothing listed is stale; and
// the README's two commands are what CI runs, as written.
func TestDocRecipesAccountedFor(t *testing.T) {
	repo, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	pages := readDocPages(t, repo)
	listed := make([]bool, len(notRunRecipes))
	for _, p := range pages {
		for _, b := range blocksOf(p) {
			if len(b.lines) == 0 {
				continue
			}
			first := b.lines[0]
			if b.lang == "text" && strings.HasPrefix(first.text, ">> ") && !slices.Contains(b.headings, "MCP") {
				t.Errorf("%s: an MCP session outside the section \"MCP\": TestREADMERecipes would not send it", first.at)
			}
			if b.lang != "sh" && b.lang != "bash" {
				continue
			}
			if slices.ContainsFunc(b.headings, func(h string) bool { return slices.Contains(shRecipeSections, h) }) {
				continue
			}
			section := ""
			if len(b.headings) > 0 {
				section = b.headings[len(b.headings)-1]
			}
			command, _, _ := strings.Cut(first.text, " #")
			command = strings.TrimRight(command, " ")
			i := slices.IndexFunc(notRunRecipes, func(r struct{ page, section, first, why string }) bool {
				return r.page == b.page && r.section == section && r.first == command
			})
			if i < 0 {
				t.Errorf("%s: an sh block (section %q, first line %q) that no test runs: put it in a section TestREADMERecipes runs, or list it in notRunRecipes with the reason", first.at, section, first.text)
				continue
			}
			listed[i] = true
		}
	}
	for i, r := range notRunRecipes {
		if !listed[i] {
			t.Errorf("notRunRecipes lists an sh block no page has any more (%s, section %q, first line %q)", r.page, r.section, r.first)
		}
	}

	// The README's two commands, as written, are what CI runs.
	blocks := sectionBlocks(t, pages, "Two commands", "sh")
	if len(blocks) != 2 || len(blocks[0]) != 1 || len(blocks[1]) != 1 {
		t.Fatalf("README.md's \"Two commands\" has %d sh blocks; want two of one line each", len(blocks))
	}
	for i, script := range []string{".ci/first-command", ".ci/run"} {
		b, err := os.ReadFile(filepath.Join(repo, script))
		if err != nil {
			t.Fatal(err)
		}
		cmd := blocks[i][0].text
		if !slices.ContainsFunc(commandLines(string(b)), func(l string) bool { return l == cmd || strings.HasPrefix(l, cmd+" ") }) {
			t.Errorf("%s: %s does not run %q as written", blocks[i][0].at, script, cmd)
		}
	}
}

// commandLines is a shell script's commands, one a line, without
// comments, leading blanks and environment assignments (VAR="…").
func commandLines(script string) []string {
	var lines []string
	for _, l := range strings.Split(script, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for {
			name, rest, ok := strings.Cut(l, "=")
			if !ok || name == "" || strings.ContainsAny(name, " \t\"'$") {
				break
			}
			_, after, ok := strings.Cut(rest, " ")
			if !ok {
				break
			}
			l = strings.TrimSpace(after)
		}
		lines = append(lines, l)
	}
	return lines
}
