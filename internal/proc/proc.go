// Package proc runs connhost as a child process the way crash tests, the
// demo and the soak need it: in a process group of its own, so one SIGKILL
// reaches everything the child started; with exactly the crash point its
// caller chose armed (CONNHOST_CRASH_AT, see internal/crash), and none
// inherited; with its output captured; and telling apart an exit code from
// a death by signal, since SIGKILL is what an injected crash looks like.
//
// Run runs a command to its end. Start starts a long-running one (connhost
// dev, serve or sandbox): DecodeLine reads the JSON startup line such a
// process prints with --json, Kill ends it and its group.
//
// The package is for unix systems, as internal/crash is.
package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/connhost/connhost/internal/crash"
)

// Cmd describes a child process.
type Cmd struct {
	// Path is the binary. Required.
	Path string
	// Args are the arguments after the binary.
	Args []string
	// Dir is the working directory. The default value is the caller's.
	Dir string
	// Env is the child's environment. The default value (nil) is the
	// caller's environment. Any CONNHOST_CRASH_AT in it is dropped:
	// CrashAt alone decides where the child dies.
	Env []string
	// CrashAt, when set, arms a crash point in the child:
	// CONNHOST_CRASH_AT=CrashAt ("<point>" or "<point>:<n>"). The default
	// value arms none.
	CrashAt string
	// Stdout and Stderr, when set, receive the child's output; an
	// *os.File is handed to the child as it is. The default value
	// captures it (Result.Stdout and Result.Stderr, Process.Stderr). The
	// startup line DecodeLine reads is seen either way.
	Stdout, Stderr io.Writer
	// DieWithParent has the kernel SIGKILL the child when the process
	// that started it dies without doing so itself (Linux only; ignored
	// elsewhere). Tests set it: a test binary killed by its -timeout runs
	// no cleanup. The default value is false, because Linux sends the
	// signal when the thread that started the child ends, and a goroutine
	// that exits locked to its thread ends it (golang/go#27505): a child
	// could die of a kill nobody injected.
	DieWithParent bool
}

// Result is how a child process ended, and what it wrote.
type Result struct {
	// Code is the exit code, or -1 when the process died by a signal.
	Code int
	// Signal is the signal the process died by; 0 when it exited.
	Signal syscall.Signal
	// Stdout and Stderr are the captured output (nil for a stream that
	// Cmd.Stdout or Cmd.Stderr took).
	Stdout, Stderr []byte
}

// Killed reports whether the process died by SIGKILL: an injected crash,
// or a Kill.
func (r Result) Killed() bool { return r.Signal == syscall.SIGKILL }

// String says how the process ended: "exit 3", "killed by SIGKILL" or
// "died by SIGSEGV".
func (r Result) String() string {
	switch {
	case r.Killed():
		return "killed by SIGKILL"
	case r.Signal != 0:
		return "died by " + SignalName(r.Signal)
	}
	return fmt.Sprintf("exit %d", r.Code)
}

// SignalName names a signal as people write it ("SIGKILL"), where
// syscall.Signal.String says "killed".
func SignalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return s.String()
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGHUP: "SIGHUP", syscall.SIGILL: "SIGILL", syscall.SIGINT: "SIGINT",
	syscall.SIGKILL: "SIGKILL", syscall.SIGPIPE: "SIGPIPE", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGSEGV: "SIGSEGV", syscall.SIGTERM: "SIGTERM", syscall.SIGTRAP: "SIGTRAP",
}

// Run starts c and waits for it to end. When ctx ends first, it SIGKILLs
// the child's process group and returns what the child wrote, with an
// error wrapping ctx's error. An error also means the child could not be
// started; a child that exits with a code or dies by a signal is a Result,
// not an error.
func Run(ctx context.Context, c Cmd) (Result, error) {
	p, err := Start(c)
	if err != nil {
		return Result{}, err
	}
	return p.Wait(ctx)
}

// Process is a started child process. Its methods are safe for concurrent
// use. Its owner must end it with Kill or Stop, or wait for it with Wait.
type Process struct {
	cmd    *exec.Cmd
	name   string
	stdout *buffer // nil when Cmd.Stdout took the stream
	stderr *buffer // nil when Cmd.Stderr took the stream
	line   *firstLine
	done   chan struct{} // closed once the process has been reaped
	res    Result
	err    error // from exec's Wait, other than the exit status
}

// Start starts c in a process group of its own.
func Start(c Cmd) (*Process, error) {
	if c.Path == "" {
		return nil, errors.New("proc: Cmd.Path is required")
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	env := c.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = crash.Environ(env, c.CrashAt)
	cmd.SysProcAttr = sysProcAttr(c.DieWithParent)
	p := &Process{cmd: cmd, name: filepath.Base(c.Path), line: &firstLine{got: make(chan struct{})}, done: make(chan struct{})}
	var stdout io.Writer = p.line
	if c.Stdout != nil {
		stdout = io.MultiWriter(p.line, c.Stdout)
	} else {
		p.stdout = &buffer{}
		stdout = io.MultiWriter(p.line, p.stdout)
	}
	cmd.Stdout = stdout
	if c.Stderr != nil {
		cmd.Stderr = c.Stderr
	} else {
		p.stderr = &buffer{}
		cmd.Stderr = p.stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("proc: start %s: %w", p.name, err)
	}
	go p.reap()
	return p, nil
}

func (p *Process) reap() {
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.res.Code, p.res.Signal = -1, ws.Signal()
		} else {
			p.res.Code = ee.ExitCode()
		}
	default:
		p.err = fmt.Errorf("proc: %s: %w", p.name, err)
	}
	p.res.Stdout, p.res.Stderr = p.stdout.bytes(), p.stderr.bytes()
	close(p.done)
}

// Pid is the child's process id, which is also its process group's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits for the process to end and returns how it ended. When ctx
// ends first, it kills the process as Kill does and returns the Result
// with an error wrapping ctx's error.
func (p *Process) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		p.Kill()
		return p.res, fmt.Errorf("proc: %s killed before its end: %w", p.name, context.Cause(ctx))
	}
}

// Kill SIGKILLs the process's group and waits for the process to end. It
// may be called more than once, and after the process ended.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	// The negative pid names the group Setpgid created.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Stop asks the process's group to end with SIGTERM, SIGKILLs it if it
// has not ended after grace, and waits for the process to end.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
}

// Stderr returns what the process has written to its captured stderr so
// far (nil when Cmd.Stderr took the stream).
func (p *Process) Stderr() []byte { return p.stderr.bytes() }

// DecodeLine waits for the first line the process writes to stdout, and
// decodes it as JSON into v: the startup line of `connhost dev --json`,
// `serve --json` and `sandbox --json`. It fails when the process ends
// before writing a whole line, or ctx ends first (the process keeps
// running). Every call decodes the same first line.
func (p *Process) DecodeLine(ctx context.Context, v any) error {
	select {
	case <-p.line.got:
	case <-p.done:
		// The line may have come just before the end.
		select {
		case <-p.line.got:
		default:
			return fmt.Errorf("proc: %s ended (%s) before its first line", p.name, p.res)
		}
	case <-ctx.Done():
		return fmt.Errorf("proc: %s printed no line: %w", p.name, context.Cause(ctx))
	}
	if err := json.Unmarshal(p.line.text, v); err != nil {
		return fmt.Errorf("proc: %s: first line %q: %w", p.name, p.line.text, err)
	}
	return nil
}

// firstLine keeps the first line written to it.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	text []byte        // the line without its newline, once got is closed
	got  chan struct{} // closed once the line is complete
}

func (w *firstLine) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.text != nil {
		return len(b), nil
	}
	w.buf = append(w.buf, b...)
	if i := bytes.IndexByte(w.buf, '\n'); i >= 0 {
		w.text = w.buf[:i:i]
		w.buf = nil
		close(w.got)
	}
	return len(b), nil
}

// buffer is a bytes.Buffer safe for one writer and concurrent readers.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// bytes returns a copy of what was written so far; nil for a nil buffer.
func (b *buffer) bytes() []byte {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.b.Bytes())
}
