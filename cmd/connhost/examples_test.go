package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// example is one command line of a command's Examples.
type example struct {
	// command is the path of the command whose help shows it.
	command string
	// line is the example as shown, continuation lines joined.
	line string
	// args are its words after "connhost", without the environment
	// assignments before it and the pipe or redirection after it.
	args []string
}

// helpExamples returns the examples of every command, in help order.
func helpExamples(t *testing.T) []example {
	t.Helper()
	var out []example
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		joined := strings.ReplaceAll(c.Example, "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			line = strings.Join(strings.Fields(line), " ")
			if line == "" {
				continue
			}
			words, err := shellWords(line)
			if err != nil {
				t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
				continue
			}
			for len(words) > 0 && strings.Contains(words[0], "=") {
				words = words[1:] // VAR=value before the command
			}
			if i := slices.IndexFunc(words, func(w string) bool { return w == "|" || w == ">" }); i >= 0 {
				words = words[:i] // what the shell does with the output
			}
			if len(words) == 0 || words[0] != "connhost" {
				t.Errorf("%s: example %q does not run connhost", c.CommandPath(), line)
				continue
			}
			out = append(out, example{command: c.CommandPath(), line: line, args: words[1:]})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newApp(nil, nil, nil).rootCommand())
	return out
}

// shellWords splits a line as a POSIX shell would for the quoting the
// examples use: single and double quotes (no escapes inside them), and
// $(…) kept as one word.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case ch == '$' && strings.HasPrefix(line[i:], "$("):
			end := strings.IndexByte(line[i:], ')')
			if end < 0 {
				return nil, errors.New("unterminated $(")
			}
			cur.WriteString(line[i : i+end+1]) // a command substitution stays one word
			i += end
			inWord = true
		case ch == '\'' || ch == '"':
			end := strings.IndexByte(line[i+1:], ch)
			if end < 0 {
				return nil, errUnterminatedQuote
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

var errUnterminatedQuote = errors.New("unterminated quote")

// flagValue returns the value of --name in args.
func flagValue(args []string, name string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// TestHelpExamplesParse: every example of every command's help is a
// connhost command line that parses — the command exists, its flags and
// arguments are accepted, required flags are there — with no placeholder
// (…) in it, the config file it passes is in the repository, and the
// arguments of exec and crashtest examples match the input schema of the
// shipped operation they name.
func TestHelpExamplesParse(t *testing.T) {
	ms, err := manifests.LoadDir("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range helpExamples(t) {
		if strings.Contains(ex.line, "…") {
			t.Errorf("%s: example %q holds a placeholder", ex.command, ex.line)
		}
		if cfg := flagValue(ex.args, "config"); cfg != "" {
			if _, err := os.Stat(filepath.Join("..", "..", cfg)); err != nil {
				t.Errorf("%s: example %q passes a config the repository does not hold: %v", ex.command, ex.line, err)
			}
		}
		root := newApp(nil, nil, nil).rootCommand()
		cmd, rest, err := root.Find(ex.args)
		if err != nil || cmd == root {
			t.Errorf("%s: example %q names no command: %v", ex.command, ex.line, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("%s: example %q: %v", ex.command, ex.line, err)
			continue
		}
		for _, check := range []func() error{
			func() error { return cmd.ValidateArgs(cmd.Flags().Args()) },
			cmd.ValidateRequiredFlags, cmd.ValidateFlagGroups,
		} {
			if err := check(); err != nil {
				t.Errorf("%s: example %q: %v", ex.command, ex.line, err)
			}
		}
		var tool, args string
		switch cmd.Name() {
		case "exec":
			tool, args = flagValue(ex.args, "tool"), flagValue(ex.args, "args")
		case "crashtest":
			if op := flagValue(ex.args, "operation"); op != "" && flagValue(ex.args, "args") != "" {
				m, err := manifests.Load("../../" + flagValue(ex.args, "manifest"))
				if err != nil {
					t.Errorf("%s: example %q: %v", ex.command, ex.line, err)
					continue
				}
				tool, args = m.Connector.Name+"."+op, flagValue(ex.args, "args")
			}
		}
		if tool == "" || strings.HasPrefix(args, "@") {
			continue // no arguments, or in a file the example does not show
		}
		op := findOperation(ms, tool)
		if op == nil {
			t.Errorf("%s: example %q: no shipped tool %s", ex.command, ex.line, tool)
			continue
		}
		if err := op.ValidateArgs([]byte(args)); err != nil {
			t.Errorf("%s: example %q: %v", ex.command, ex.line, err)
		}
	}
}

func findOperation(ms []*manifests.Manifest, tool string) *manifests.Operation {
	c, o, _ := strings.Cut(tool, ".")
	for _, m := range ms {
		for _, op := range m.Operations {
			if m.Connector.Name == c && op.Name == o {
				return op
			}
		}
	}
	return nil
}

// TestHelpExamplesRun runs the examples that run offline, as written, each
// on a ledger of its own in a working directory laid out like the
// repository's root: the shipped manifests, their modules in build/, the
// shipped docs/connhost.example.toml the examples pass, with the
// environment variables it names set as its comment says, and an earlier
// manifest version in old/ for audit --diff. A command whose examples act
// on an execution first runs exec's first example — the examples tell one
// story, so their ids and digests are those of that call —, on a resumed
// call for resolve, which needs one whose outcome is unknown. An example
// passes when it exits 0, 4 or 5: it ran, and the execution it shows is in
// whatever status the story left it.
//
// Not run (TestHelpExamplesParse checks them): examples that talk to a
// running server (--server), and the commands that serve, build into the
// repository or run for minutes (dev, serve, mcp, sandbox, demo, build,
// crashtest, bench).
func TestHelpExamplesRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the examples on real connectors: skipped with -short")
	}
	ctx := context.Background()
	shipped, err := filepath.Abs("../../manifests")
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string]string{}
	for _, c := range []string{"payments", "email"} {
		wasm, _, err := wasmbuild.Cached(ctx, "plugins/"+c)
		if err != nil {
			t.Fatalf("build %s: %v", c, err)
		}
		modules[c+".wasm"] = wasm
	}
	exampleConfig, err := os.ReadFile("../../docs/connhost.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"STRIPE_SECRET_KEY", "CONNHOST_TOKEN", "CONNHOST_TOKEN_RITA"} {
		t.Setenv(v, "examples-"+strings.ToLower(v))
	}
	workspace := func(t *testing.T) string {
		t.Helper()
		ws := t.TempDir()
		for _, d := range []string{"manifests", "build", "old", ".connhost", "docs"} {
			if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"payments.toml", "email.toml"} {
			b, err := os.ReadFile(filepath.Join(shipped, name))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(ws, "manifests"), name, string(b))
			writeFile(t, filepath.Join(ws, "old"), name, string(b))
		}
		for name, src := range modules {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(ws, "build"), name, string(b))
		}
		writeFile(t, filepath.Join(ws, "docs"), "connhost.example.toml", string(exampleConfig))
		return ws
	}

	all := helpExamples(t)
	var story []string // exec's first example: the call the others act on
	for _, ex := range all {
		if ex.command == "connhost exec" {
			story = ex.args
			break
		}
	}
	if story == nil {
		t.Fatal("exec has no example")
	}
	skip := []string{"dev", "serve", "mcp", "sandbox", "demo", "build", "crashtest", "bench"}
	ran := 0
	for _, ex := range all {
		name := ex.args[0]
		if slices.Contains(skip, name) || flagValue(ex.args, "server") != "" {
			continue
		}
		t.Run(ex.line, func(t *testing.T) {
			t.Chdir(workspace(t))
			var setup []string
			switch name {
			case "exec", "tools", "audit", "prune":
			case "resolve":
				setup = append(slices.Clone(story), "--resumed")
			default:
				setup = story
			}
			if setup != nil {
				if code, _, errOut := runCLI(t, nil, setup...); code != cli.ExitNotSucceeded && code != cli.ExitRecoveryRequired {
					t.Fatalf("setup %q: exit %d: %s", setup, code, errOut)
				}
			}
			if name == "ledger" && ex.args[1] == "restore" {
				// A restore needs the backup it names.
				if code, _, errOut := runCLI(t, nil, "ledger", "backup", ex.args[2]); code != cli.ExitOK {
					t.Fatalf("setup: ledger backup %s: exit %d: %s", ex.args[2], code, errOut)
				}
			}
			code, out, errOut := runCLI(t, nil, ex.args...)
			if code != cli.ExitOK && code != cli.ExitRecoveryRequired && code != cli.ExitNotSucceeded {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
			}
		})
		ran++
	}
	if ran < 15 {
		t.Errorf("only %d examples ran", ran)
	}
}
