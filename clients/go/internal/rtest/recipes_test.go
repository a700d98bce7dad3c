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
// Run once more, the program finds the run ended and does nothing.
// A second conversation's payment is rejected (the README's command with
// reject) while the program is stopped: restarted, the model reads the
// refusal, twice asked in all, and nothing is charged.
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

			writeFile(t, filepath.Join(dir, "connhost.toml"), recipes["connhost.toml"])
			approve := strings.ReplaceAll(recipes["approve"], "/path/to/connhost", shared.env.Root)
			reject := strings.Replace(approve, "connhost approve ", "connhost reject ", 1)
			if reject == approve {
				t.Fatal("the README's approve recipe no longer runs connhost approve")
			}
			c := recipeRun{t: t, name: name, dir: dir}

			// The approved payment: killed while it waits, approved,
			// killed at the provider, settled.
			s := c.session("approved")
			before := charges()
			id, digest := s.awaitingThenKilled()
			s.decide(approve, id, digest)
			holdNextCharge(t)
			p := s.start()
			awaitHeldNoApproval(t, p)
			p.kill(t)
			releaseHeld(t)
			answer := s.finish()
			if !strings.Contains(answer, "tool said: Succeeded (execution ex_") || !strings.Contains(answer, ", receipt pi_") {
				t.Fatalf("the program printed %q, want the model's answer with the charge's receipt", answer)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("the provider charged %d times for one approved payment killed mid-charge, want 1", got)
			}
			s.askedTwice()
			if again := s.finish(); strings.TrimSpace(again) != "" { // run again after the run ended
				t.Fatalf("run again after its run ended, the program printed %q, want nothing", again)
			}
			if got := charges() - before; got != 1 {
				t.Fatalf("run again after its run ended, the program charged: %d charges in all, want 1", got)
			}
			s.askedTwice()
			t.Logf("%s as pasted (%s so far): approved while stopped, killed mid-charge, restarted: 1 charge; the model read %s",
				name, time.Since(start).Round(time.Second), strings.TrimSpace(answer))

			// The rejected payment: killed while it waits, rejected, and
			// the restarted run tells the model.
			s = c.session("rejected")
			before = charges()
			id, digest = s.awaitingThenKilled()
			s.decide(reject, id, digest)
			answer = s.finish()
			if !strings.Contains(answer, "tool said: Not done: rejected (execution ex_") || !strings.Contains(answer, "Do not issue it again") {
				t.Fatalf("the program printed %q, want the model's answer with the refusal", answer)
			}
			if got := charges() - before; got != 0 {
				t.Fatalf("the provider charged %d times for a rejected payment, want 0", got)
			}
			s.askedTwice()
			t.Logf("%s as pasted (%s in all): rejected while stopped, restarted: 0 charges, the model read the refusal", name, time.Since(start).Round(time.Second))
		})
	}
}

// recipeRun is one framework's recipe project, built.
type recipeRun struct {
	t    *testing.T
	name string
	dir  string
}

// recipeSession is one conversation of a recipe's program: its ids and
// the file counting its model's requests.
type recipeSession struct {
	recipeRun
	env   []string
	count string
}

// session returns a new conversation (the emulator outlives the tests, so
// its ids are new each run).
func (c recipeRun) session(what string) *recipeSession {
	id := fmt.Sprintf("recipe-%s-%s-%d", c.name, what, time.Now().UnixNano())
	count := filepath.Join(c.dir, id+".requests")
	env := append(os.Environ(), "STRIPE_SECRET_KEY="+sandbox.DefaultAPIKey, "STRIPE_BASE_URL="+shared.env.SB.PaymentsURL(),
		"RECIPE_SESSION="+id, "RECIPE_CALL_ID=call-"+id, "RECIPE_COUNT="+count)
	return &recipeSession{recipeRun: c, env: env, count: count}
}

// start starts the program.
func (s *recipeSession) start() *proc {
	t := s.t
	p := &proc{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(filepath.Join(s.dir, "recipe"))
	p.cmd.Dir, p.cmd.Env = s.dir, s.env
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", s.name, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// awaitingThenKilled starts the program, waits until it logs its payment
// awaiting a reviewer, kills it (SIGKILL) and returns what a reviewer
// decides on.
func (s *recipeSession) awaitingThenKilled() (id, digest string) {
	before := charges()
	p := s.start()
	id, digest = awaitApprovalLog(s.t, p)
	p.kill(s.t)
	if got := charges() - before; got != 0 {
		s.t.Fatalf("the provider charged %d times before anyone decided", got)
	}
	return id, digest
}

// decide runs the README's decision command (approve, or the same with
// reject) on the stopped program's ledger.
func (s *recipeSession) decide(command, id, digest string) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = s.dir
	cmd.Env = append(s.env, "PATH="+filepath.Dir(shared.connhost)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"APPROVAL_ID="+id, "ARGS_DIGEST="+digest)
	if out, err := cmd.CombinedOutput(); err != nil {
		s.t.Fatalf("the README's decision on the stopped program's ledger: %v\n%s\n%s", err, command, out)
	}
}

// finish restarts the program and returns what it printed once it ended.
func (s *recipeSession) finish() string {
	p := s.start()
	select {
	case err := <-p.done:
		if err != nil {
			s.t.Fatalf("the restarted program: %v", err)
		}
	case <-time.After(5 * time.Minute):
		s.t.Fatal("the restarted program did not finish")
	}
	return p.stdout.String()
}

// askedTwice checks that the model was asked twice in all, by every
// process of the conversation: the call, then its result. A third request
// would be the model asked to issue the call again.
func (s *recipeSession) askedTwice() {
	if n := scripted.CountedRequests(s.count); n != 2 {
		s.t.Fatalf("the model was asked %d times in all, want 2 (the call, then its result)", n)
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
