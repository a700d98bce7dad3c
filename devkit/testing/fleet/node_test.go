//go:build linux

package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/internal/proc"
)

// startupBound keeps a hung start from hanging the test; it is no
// performance assertion.
const startupBound = 90 * time.Second

// node is one `connhost serve` process of the fleet and the generations
// it went through (a node restarted after a kill is the same node id
// under a new lease epoch).
type node struct {
	t    *testing.T
	name string
	bin  string
	args []string // everything but --listen
	env  []string
	dir  string // logs

	mu     sync.Mutex
	p      *proc.Process
	url    string
	gen    int
	done   chan struct{} // closed once the current generation has exited and been counted
	paused bool
	// killed counts the generations that died by SIGKILL (the test's or
	// a crash point's).
	killed int
}

// start starts a new generation, with crashAt armed when not empty, and
// waits until it serves.
func (n *node) start(crashAt string) error {
	n.mu.Lock()
	gen := n.gen + 1
	n.mu.Unlock()
	logPath := filepath.Join(n.dir, fmt.Sprintf("%s-%02d.log", n.name, gen))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	// serve logs its address on stderr ("serving the HTTP API").
	pr, pw := io.Pipe()
	args := append(append([]string{}, n.args...), "--listen", "127.0.0.1:0")
	if crashAt != "" {
		args = append(args, "--allow-test-hooks") // serve refuses a crash point otherwise
	}
	p, err := proc.Start(proc.Cmd{Path: n.bin, Args: args,
		Env: n.env, CrashAt: crashAt, Stdout: io.Discard, Stderr: io.MultiWriter(logf, pw), DieWithParent: true})
	if err != nil {
		logf.Close()
		return err
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec struct {
				Msg string `json:"msg"`
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "serving the HTTP API" && rec.URL != "" {
				select {
				case urlc <- rec.URL:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	done := make(chan struct{})
	go func() {
		res, _ := p.Wait(context.Background())
		pw.Close()
		logf.Close()
		n.mu.Lock()
		if res.Killed() {
			n.killed++
		}
		n.mu.Unlock()
		close(done)
	}()
	n.t.Cleanup(func() {
		p.Kill()
		<-done
	})
	select {
	case u := <-urlc:
		n.mu.Lock()
		n.p, n.url, n.gen, n.done, n.paused = p, u, gen, done, false
		n.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("node %s generation %d exited before serving; log tail:\n%s", n.name, gen, tail(logPath, 3000))
	case <-time.After(startupBound):
		p.Kill()
		<-done
		return fmt.Errorf("node %s generation %d did not serve within %s; log tail:\n%s", n.name, gen, startupBound, tail(logPath, 3000))
	}
}

// current returns the API URL of the current generation and whether it
// is running (not exited; it may be paused).
func (n *node) current() (url string, up bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return "", false
	}
	select {
	case <-n.done:
		return n.url, false
	default:
		return n.url, true
	}
}

// exited returns the channel closed when the current generation exits.
func (n *node) exited() chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.done
}

// kill SIGKILLs the current generation and waits for it.
func (n *node) kill() {
	n.mu.Lock()
	p, done := n.p, n.done
	n.mu.Unlock()
	if p == nil {
		return
	}
	p.Kill()
	<-done
}

// pause stops the current generation (SIGSTOP) and resume continues it.
func (n *node) pause() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused = true
	return syscall.Kill(-n.p.Pid(), syscall.SIGSTOP)
}

func (n *node) resume() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.paused = false
	return syscall.Kill(-n.p.Pid(), syscall.SIGCONT)
}

func (n *node) kills() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.killed
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

// errorLines returns the ERROR lines of every generation's log, for a
// failure message that needs what the server saw.
func (n *node) errorLines() string {
	paths, _ := filepath.Glob(filepath.Join(n.dir, n.name+"-*.log"))
	var b strings.Builder
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "level=ERROR") {
				b.WriteString(filepath.Base(p) + ": " + line)
			}
		}
	}
	return b.String()
}

// startSandbox runs `connhost sandbox --json` in a process group of its
// own (no kill aimed at a node reaches the providers) and returns its
// URLs.
func startSandbox(t *testing.T, bin, dir string) (payments, email string) {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, "sandbox.log"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := proc.Start(proc.Cmd{Path: bin, Args: []string{"sandbox", "--json"}, Stderr: logf, DieWithParent: true})
	if err != nil {
		logf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		logf.Close()
	})
	var urls struct{ Payments, Email string }
	if err := p.DecodeLine(t.Context(), &urls); err != nil || urls.Payments == "" || urls.Email == "" {
		t.Fatalf("connhost sandbox: startup line %+v: %v", urls, err)
	}
	return urls.Payments, urls.Email
}

// buildBinary builds ./cmd/connhost into dir.
func buildBinary(t *testing.T, root, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "connhost")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/connhost")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/connhost: %v\n%s", err, out)
	}
	return bin
}

// errTransport is a request that got no HTTP answer (the node is dead or
// was killed while answering): the caller cannot know whether it took
// effect and sends it again, as a runtime would.
var errTransport = errors.New("no answer")

// problem is the part of a problem document the test reads.
type problem struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// api sends one request to a node: a 200 is decoded into out, a problem
// document returned, no answer at all is errTransport.
func api(ctx context.Context, hc *http.Client, method, url, token string, body, out any) (*problem, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s %s: %v", errTransport, method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: reading the answer: %v", errTransport, method, url, err)
	}
	if resp.StatusCode == http.StatusOK {
		if out == nil {
			return nil, nil
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			return nil, json.Unmarshal(b, out)
		}
		if s, ok := out.(*string); ok {
			*s = string(b)
			return nil, nil
		}
	}
	var p problem
	if err := json.Unmarshal(b, &p); err != nil || p.Code == "" {
		return nil, fmt.Errorf("%s %s: unexpected answer %d: %q", method, url, resp.StatusCode, b)
	}
	return &p, nil
}
