package rtest_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/clients/go/internal/scripted"
	"github.com/connhost/connhost/devkit/sandbox"
)

// TestRecipesAsPasted: each framework's recipe of clients/go/README.md
// works as a user pastes it. In a new project outside the repository the
// README's module block runs verbatim (its /path/to/connhost is this
// checkout; the frameworks come from the module proxy or its cache); the
// project is the README's executor.go and the framework's main.go, as
// written, beside what the recipe leaves to its user
// (testdata/recipes/<name>: a scripted model that pays 500 cents once
// and counts its requests, the conversation's ids, Eino's checkpoint
// store). go build makes the program, which charges the Stripe emulator
// (STRIPE_BASE_URL) with the shipped connectors, whose payment needs a
// reviewer's approval. Run as a real process:
//
//  1. it logs the call awaiting approval, with the approval id and
//     digest, and waits; it is killed (SIGKILL) and a reviewer approves
//     with `connhost approve` on its ledger;
//  2. restarted, it continues from the framework's saved state: the
//     approved call runs under its original ids, and is killed (SIGKILL)
//     while the provider holds the charge, which the provider then
//     applies;
//  3. restarted again, it settles the killed call by its ids and prints
//     the model's answer with the charge's receipt.
//
// The provider charged once, and the model was asked twice in all (the
// call, then its result): no process asked it to issue the call again.
func TestRecipesAsPasted(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("go is not on PATH: the recipes are built with it") // this package's tests run under go test
	}
	recipes := readGoRecipes(t, filepath.Join(shared.env.Root, "clients", "go", "README.md"))
	for _, name := range []string{"module", "executor", "connhost.toml", "approve"} {
		if recipes[name] == "" {
			t.Fatalf("clients/go/README.md has no %q recipe", name)
		}
	}
	module := strings.ReplaceAll(recipes["module"], "/path/to/connhost", shared.env.Root)
	if module == recipes["module"] {
		t.Fatal("the README's module recipe no longer points at /path/to/connhost, where the test puts this checkout")
	}
	for _, name := range runtimes {
		t.Run(name, func(t *testing.T) {
			program := recipes[name]
			if program == "" {
				t.Fatalf("clients/go/README.md has no %q recipe", name)
			}
			dir := t.TempDir()
			if strings.HasPrefix(dir, shared.env.Root+string(filepath.Separator)) {
				t.Fatalf("the project %s is inside the repository", dir)
			}
			writeFile(t, filepath.Join(dir, "executor.go"), recipes["executor"])
			writeFile(t, filepath.Join(dir, "main.go"), program)
			yours, err := filepath.Glob(filepath.Join("testdata", "recipes", name, "*.go"))
			if err != nil || len(yours) == 0 {
				t.Fatalf("no testdata/recipes/%s: what the recipe leaves to its user", name)
			}
			for _, f := range yours {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, filepath.Base(f)), string(b))
			}
			goEnv := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
			start := time.Now()
			gorun(t, dir, goEnv, "sh", "-c", module)
			gorun(t, dir, goEnv, goBin, "build", "-o", "recipe", ".")
			t.Logf("%s: go mod tidy and go build in %s", name, time.Since(start).Round(time.Second))

			session := fmt.Sprintf("recipe-%s-%d", name, time.Now().UnixNano()) // the emulator outlives the tests
			count := filepath.Join(dir, "model-requests")
			env := append(os.Environ(), "STRIPE_SECRET_KEY="+sandbox.DefaultAPIKey, "STRIPE_BASE_URL="+shared.env.SB.PaymentsURL(),
				"RECIPE_SESSION="+session, "RECIPE_CALL_ID=call-"+session, "RECIPE_COUNT="+count)
			recipe := func() *proc {
				p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
				p.cmd = exec.Command(filepath.Join(dir, "recipe"))
				p.cmd.Dir, p.cmd.Env = dir, env
				p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
				if err := p.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { p.done <- p.cmd.Wait() }()
				t.Cleanup(func() {
					_ = p.cmd.Process.Kill()
					if t.Failed() {
						t.Logf("%s stdout:\n%s\nstderr:\n%s", name, p.stdout.String(), p.stderr.String())
					}
				})
				return p
			}
			before := charges()

			// 1. The gated payment waits for a reviewer; the program is killed.
			p := recipe()
			id, digest := awaitApprovalLog(t, p)
			p.kill(t)
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times before anyone approved", got)
			}
			writeFile(t, filepath.Join(dir, "connhost.toml"), recipes["connhost.toml"])
			approve := strings.NewReplacer("/path/to/connhost", shared.env.Root).Replace(recipes["approve"])
			cmd := exec.Command("sh", "-c", approve)
			cmd.Dir = dir
			cmd.Env = append(env, "PATH="+filepath.Dir(shared.connhost)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"APPROVAL_ID="+id, "ARGS_DIGEST="+digest)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("the README's approve recipe on the stopped program's ledger: %v\n%s\n%s", err, approve, out)
			}

			// 2. Restarted: the approved call runs, and is killed at the provider.
			holdNextCharge(t)
			p = recipe()
			awaitHeldNoApproval(t, p)
			p.kill(t)
			releaseHeld(t)

			// 3. Restarted: the killed call is settled by its ids.
			p = recipe()
			select {
			case err := <-p.done:
				if err != nil {
					t.Fatalf("the restarted program: %v", err)
				}
			case <-time.After(5 * time.Minute):
				t.Fatal("the restarted program did not finish")
			}
			answer := p.stdout.String()
			if !strings.Contains(answer, "tool said: Succeeded (execution ex_") || !strings.Contains(answer, ", receipt pi_") {
				t.Fatalf("the program printed %q, want the model's answer with the charge's receipt", answer)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times for one approved payment killed mid-charge, want 1", got)
			}
			if n := scripted.CountedRequests(count); n != 2 {
				t.Fatalf("the model was asked %d times in all, want 2 (the call, then its result)", n)
			}
			t.Logf("%s as pasted (%s in all): approved while stopped, killed mid-charge, restarted: 1 charge; the model read %s",
				name, time.Since(start).Round(time.Second), strings.TrimSpace(answer))
		})
	}
}

// approvalLogRE is the adapters' log line of a call awaiting approval
// (slog's default text handler).
var approvalLogRE = regexp.MustCompile(`a call awaits a reviewer's approval approval_id=(\S+) args_digest=(\S+)`)

// awaitApprovalLog waits until the program p logs a call awaiting a
// reviewer's approval and returns its approval id and digest.
func awaitApprovalLog(t *testing.T, p *proc) (id, digest string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if m := approvalLogRE.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1], m[2]
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("the program ended before its payment awaited a reviewer: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the program never logged a call awaiting approval")
	return "", ""
}

// awaitHeldNoApproval waits until the emulator holds the restarted
// program p's charge, failing at once if p logs a call awaiting a
// reviewer (the approved call was not the one that ran: a new one was
// issued) or ends.
func awaitHeldNoApproval(t *testing.T, p *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		n, err := shared.env.SB.Client().Held(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if approvalLogRE.MatchString(p.stderr.String()) {
			t.Fatal("restarted after the approval, the program has a call awaiting a reviewer again: the approved call did not run")
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("restarted after the approval, the program ended before its charge reached the provider: %v", err)
		case <-ctx.Done():
			t.Fatal("restarted after the approval, the program's charge never reached the provider")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// readGoRecipes reads the "<!-- recipe: name -->" markers of a README:
// each names the fenced block that follows it.
func readGoRecipes(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var name string
	var cur *strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			out[name], cur, name = cur.String(), nil, ""
		case cur != nil:
			cur.WriteString(line + "\n")
		case strings.HasPrefix(line, "<!-- recipe: "):
			name = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- recipe: "), " -->")
		case strings.HasPrefix(line, "```") && name != "":
			cur = &strings.Builder{}
		}
	}
	return out
}

// gorun runs a build step in the project dir, failing the test with its
// output.
func gorun(t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
