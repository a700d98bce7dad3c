//go:build unix

package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/internal/proc"
)

// startupBound bounds how long a process may take to print its startup
// line. It is a bound that keeps a hung start from hanging the test, not a
// performance assertion: a first `connhost dev` compiles both modules
// (seconds), later starts load them from the compilation cache.
const startupBound = 90 * time.Second

// child is a connhost process of the soak, in a process group of its own
// (so that a kill reaches everything it started), and its log.
type child struct {
	*proc.Process
	logPath string
}

// startProc starts bin with args (stderr to logPath), waits for its first
// stdout line and decodes it as JSON into out. The process is killed at
// the test's cleanup whatever happens, and by the kernel if the test
// binary dies without running its cleanups (a -timeout panic, a kill).
func startProc(t *testing.T, bin, dir, logPath string, out any, args ...string) (*child, error) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p, err := proc.Start(proc.Cmd{Path: bin, Args: args, Dir: dir, Stderr: logf, DieWithParent: true})
	if err != nil {
		return nil, err
	}
	t.Cleanup(p.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), startupBound)
	defer cancel()
	if err := p.DecodeLine(ctx, out); err != nil {
		p.Kill()
		return nil, fmt.Errorf("%s %v: %w; log tail:\n%s", filepath.Base(bin), args, err, tail(logPath, 2000))
	}
	return &child{Process: p, logPath: logPath}, nil
}

// tail returns the last n bytes of the file at path.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// buildBinary builds ./cmd/connhost into dir once per test.
func buildBinary(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "connhost")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = "go"
	}
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/connhost")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/connhost: %w\n%s", err, out)
	}
	return bin, nil
}

// copyFile copies src to dst.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// devHost is the `connhost dev` process under test and the generations it
// went through. Workers read the current API URL from it and wait on it
// after a transport error; the killer replaces the process.
type devHost struct {
	t        *testing.T
	bin, dir string
	args     []string // everything but --listen
	logDir   string

	mu      sync.Mutex
	p       *child
	api     string
	gen     int
	changed chan struct{} // closed when gen moves on
}

func (h *devHost) current() (api string, gen int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.api, h.gen
}

// waitNewer waits until a generation newer than gen is up, at most d (a
// transport error without a kill is retried against the same process),
// or ctx is done.
func (h *devHost) waitNewer(ctx context.Context, gen int, d time.Duration) {
	h.mu.Lock()
	if h.gen > gen {
		h.mu.Unlock()
		return
	}
	ch := h.changed
	h.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// start starts a new generation of the host on the same data directory.
func (h *devHost) start() error {
	var line struct {
		API      string `json:"api"`
		Payments string `json:"payments"`
		Email    string `json:"email"`
	}
	h.mu.Lock()
	n := h.gen + 1
	h.mu.Unlock()
	args := append(append([]string{}, h.args...), "--listen", "127.0.0.1:0")
	p, err := startProc(h.t, h.bin, h.dir, filepath.Join(h.logDir, fmt.Sprintf("dev-%03d.log", n)), &line, args...)
	if err != nil {
		return err
	}
	if line.API == "" {
		p.Kill()
		return errors.New("dev startup line has no api URL")
	}
	h.mu.Lock()
	h.p, h.api, h.gen = p, line.API, n
	if h.changed != nil {
		close(h.changed)
	}
	h.changed = make(chan struct{})
	h.mu.Unlock()
	return nil
}

// kill SIGKILLs the current generation. Until start, current returns the
// dead generation's URL: requests fail as they would against a crashed
// host.
func (h *devHost) kill() (exitedBefore bool) {
	h.mu.Lock()
	p := h.p
	h.mu.Unlock()
	if p == nil {
		return false
	}
	exitedBefore = p.Exited()
	p.Kill()
	return exitedBefore
}

// logTail is the end of the current generation's log.
func (h *devHost) logTail() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p == nil {
		return ""
	}
	return tail(h.p.logPath, 3000)
}
