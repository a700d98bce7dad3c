package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/connhost/connhost/cli"
	"github.com/connhost/connhost/internal/crash"
	"github.com/connhost/connhost/internal/proc"
	"github.com/connhost/connhost/server/httpapi"
)

// command runs one child connhost process and returns its step (not yet
// emitted) and result.
func (d *demo) command(ctx context.Context, mfs, crashAt string, args ...string) (*demoStep, childResult) {
	st := d.newStep("command")
	st.CrashAt = crashAt
	shown := "connhost "
	if crashAt != "" {
		shown = crash.EnvVar + "=" + crashAt + " " + shown
	}
	if mfs != d.mfs {
		shown += "--manifests " + d.shorten(mfs) + " "
	}
	quoted := make([]string, len(args))
	for i, s := range args {
		quoted[i] = shellQuote(s)
	}
	st.Command = shown + strings.Join(quoted, " ")
	full := append([]string{"--data", d.data, "--config", d.config, "--manifests", mfs, "--modules", d.mods, "--json"}, args...)
	st.Args = full
	d.printf("\n  $ %s\n", st.Command)

	r := d.spawn(ctx, crashAt, full)
	if r.err == nil {
		code := r.Code
		if r.Killed() {
			d.kills++
			st.Killed, st.Signal = true, "SIGKILL"
		} else if r.Signal != 0 {
			st.Signal = proc.SignalName(r.Signal)
		}
		st.ExitCode = &code
		if len(bytes.TrimSpace(r.Stdout)) > 0 && json.Valid(r.Stdout) {
			st.Output = json.RawMessage(r.Stdout)
		}
	} else {
		d.check(st, "the process ran", false, r.err.Error())
	}
	return st, r
}

// spawn runs this binary with args, in its own process group, killed with
// its group when it outlives demoChildTimeout.
func (d *demo) spawn(ctx context.Context, crashAt string, args []string) childResult {
	ctx, cancel := context.WithTimeout(ctx, demoChildTimeout)
	defer cancel()
	res, err := proc.Run(ctx, proc.Cmd{Path: d.self, Args: args, Dir: d.dir, CrashAt: crashAt})
	r := childResult{Result: res}
	switch {
	case ctx.Err() != nil:
		r.err = fmt.Errorf("no answer within %s (killed): %w", demoChildTimeout, ctx.Err())
	case err != nil:
		r.err = err
	}
	return r
}

// childResult is one finished child process.
type childResult struct {
	proc.Result
	err error // the process could not be run or timed out
}

func (r childResult) describe() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.Signal != 0:
		return r.Result.String()
	}
	s := fmt.Sprintf("exit %d", r.Code)
	// With --json a failure is a problem document on stdout.
	var p httpapi.Problem
	if r.Code != cli.ExitOK && json.Unmarshal(r.Stdout, &p) == nil && p.Code != "" {
		return s + ": " + string(p.Code) + ": " + cli.ClipText(cli.OrDash(p.Detail), 300)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(r.Stderr)), "\n") {
		// The allow_http warning every start prints is not news.
		if l != "" && !strings.Contains(l, "config allow_http") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 0 {
		s += ": " + cli.ClipText(cli.LastLines(strings.Join(lines, "\n")), 300)
	}
	return s
}

// exitIs checks the exit code of a child.
func (d *demo) exitIs(st *demoStep, r childResult, want int) bool {
	if r.err != nil {
		return false
	}
	ok := r.Signal == 0 && r.Code == want
	d.check(st, fmt.Sprintf("exit code %d", want), ok, r.describe())
	return ok
}

// decode decodes a child's JSON output.
func (d *demo) decode(st *demoStep, b []byte, v any) bool {
	if err := json.Unmarshal(b, v); err != nil {
		d.check(st, "the output is JSON", false, err.Error())
		return false
	}
	return true
}

// shorten writes paths under the work directory as $DEMO/….
func (d *demo) shorten(p string) string {
	if rel, err := filepath.Rel(d.dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return "$DEMO/" + filepath.ToSlash(rel)
	}
	return p
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:=@,+-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
