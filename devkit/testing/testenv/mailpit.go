// Package testenv starts the real external services tests run against.
//
// Mailpit starts a real Mailpit server (the version pinned in
// tools/mailpit/go.mod), built with the Go toolchain on first use and
// cached across test runs.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// MailpitVersion is the Mailpit release tests run against. It must match
// the tool pinned in tools/mailpit/go.mod.
const MailpitVersion = "v1.33.1"

// Environment variables read by Mailpit.
const (
	// EnvMailpitBin names a prebuilt Mailpit binary to use instead of
	// building one.
	EnvMailpitBin = "CONNHOST_MAILPIT_BIN"
	// EnvSkipMailpit=1 lets a local run (CI unset) skip tests that need
	// Mailpit when it cannot be built. In CI the test fails instead.
	EnvSkipMailpit = "CONNHOST_SKIP_MAILPIT"
)

var (
	binMu   sync.Mutex
	binPath string
	binErr  error
)

// MailpitBin returns the path of the pinned Mailpit binary, building it on
// first use (see Mailpit for the failure policy).
func MailpitBin(tb testing.TB) string {
	tb.Helper()
	p, err := mailpitBin()
	if err != nil {
		unavailable(tb, err)
	}
	return p
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv(EnvSkipMailpit) == "1" && os.Getenv("CI") == "" {
		tb.Skipf("testenv: real Mailpit unavailable and %s=1: %v", EnvSkipMailpit, err)
		return
	}
	tb.Fatalf("testenv: real Mailpit unavailable (set %s to a prebuilt binary; locally %s=1 skips): %v", EnvMailpitBin, EnvSkipMailpit, err)
}

func mailpitBin() (string, error) {
	binMu.Lock()
	defer binMu.Unlock()
	if binPath != "" || binErr != nil {
		return binPath, binErr
	}
	binPath, binErr = findOrBuild()
	return binPath, binErr
}

func findOrBuild() (string, error) {
	return findOrBuildTool(pinnedTool{name: "Mailpit", dir: "mailpit", version: MailpitVersion, envBin: EnvMailpitBin,
		pkg: "github.com/axllent/mailpit", timeout: 15 * time.Minute})
}

// pinnedTool is a server the tests run for real, built from the module
// tools/<dir> pins (its version) when no prebuilt binary is named.
type pinnedTool struct {
	name, dir, version string
	envBin             string // names a prebuilt binary
	pkg                string // the main package to build
	timeout            time.Duration
}

// findOrBuildTool returns $<envBin> when set, else the binary cached in
// the user cache dir (connhost/bin/<dir>-<version>), building it there
// first, under a file lock, so that test processes build it once.
func findOrBuildTool(t pinnedTool) (string, error) {
	if p := os.Getenv(t.envBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", t.envBin, p, err)
		}
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the user cache dir: %w", err)
	}
	dir := filepath.Join(cache, "connhost", "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	name := t.dir + "-" + t.version
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(dir, name)
	if isExecutable(bin) {
		return bin, nil
	}
	unlock, err := lockFile(bin + ".lock")
	if err != nil {
		return "", fmt.Errorf("locking %s: %w", bin+".lock", err)
	}
	defer unlock()
	if isExecutable(bin) { // another test process built it while we waited
		return bin, nil
	}
	if err := buildTool(t, bin); err != nil {
		return "", err
	}
	return bin, nil
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// toolsDir finds tools/mailpit by walking up from the working directory
// (go test runs in the package directory).
func toolsDir() (string, error) { return toolDir("mailpit") }

// toolDir finds tools/<name>, the module pinning a tool's version.
func toolDir(name string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "tools", name)
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("tools/%s/go.mod not found above %s", name, wd)
		}
	}
}

// goTool finds the go command: on PATH, else under $GOROOT/bin.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
}

// build compiles the pinned Mailpit into bin atomically (temp file + rename).
func buildTool(t pinnedTool, bin string) error {
	dir, err := toolDir(t.dir)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", tmp, t.pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("building %s %s in %s: %w\n%s", t.name, t.version, dir, err, out.String())
	}
	if err := os.Rename(tmp, bin); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Mailpit starts a real Mailpit on free loopback ports with a fresh
// database in a temporary directory, waits until it is ready and returns
// its base URL (http://127.0.0.1:PORT, no trailing slash). extraArgs are
// appended to the command line (e.g. "--ignore-duplicate-ids"). The server
// is stopped in tb.Cleanup (SIGTERM, then SIGKILL after 5 s).
//
// If the binary cannot be found or built the test fails with the build
// error; only with CONNHOST_SKIP_MAILPIT=1 and CI unset is it skipped.
func Mailpit(tb testing.TB, extraArgs ...string) string {
	tb.Helper()
	bin := MailpitBin(tb)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a freed port can be taken before Mailpit binds it
		url, err := startMailpit(tb, bin, extraArgs)
		if err == nil {
			return url
		}
		lastErr = err
	}
	tb.Fatalf("testenv: starting Mailpit: %v", lastErr)
	return ""
}

func startMailpit(tb testing.TB, bin string, extraArgs []string) (string, error) {
	httpPort, err := freePort()
	if err != nil {
		return "", err
	}
	smtpPort, err := freePort()
	if err != nil {
		return "", err
	}
	dir := tb.TempDir()
	logPath := filepath.Join(dir, "mailpit.log")
	listen := fmt.Sprintf("127.0.0.1:%d", httpPort)
	args := append([]string{
		"--listen", listen,
		"--smtp", fmt.Sprintf("127.0.0.1:%d", smtpPort),
		"--database", filepath.Join(dir, "mailpit.db"),
		"--disable-version-check",
	}, extraArgs...)
	cmd := exec.Command(bin, args...)
	// Mailpit reads MP_* variables; keep the caller's from changing it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MP_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	exited, stop, err := startLogged(cmd, logPath)
	if err != nil {
		return "", err
	}
	base := "http://" + listen
	if err := waitReady(base, exited, 30*time.Second); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return "", fmt.Errorf("%w\nmailpit log:\n%s", err, log)
	}
	tb.Cleanup(stop)
	return base, nil
}

func waitReady(base string, exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return errors.New("mailpit exited before it was ready")
		default:
		}
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mailpit not ready at %s after %s (last error: %v)", base, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
