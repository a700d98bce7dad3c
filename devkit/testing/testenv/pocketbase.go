package testenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// PocketBaseVersion is the PocketBase release tests run against. It must
// match the module pinned in tools/pocketbase/go.mod.
const PocketBaseVersion = "v0.39.11"

// Environment variables read by PocketBase.
const (
	// EnvPocketBaseBin names a prebuilt PocketBase binary to use instead
	// of building one.
	EnvPocketBaseBin = "CONNHOST_POCKETBASE_BIN"
	// EnvSkipPocketBase=1 lets a local run (CI unset) skip tests that
	// need PocketBase when it cannot be built. In CI the test fails
	// instead.
	EnvSkipPocketBase = "CONNHOST_SKIP_POCKETBASE"
)

// PocketBase is a running PocketBase server with a superuser.
type PocketBase struct {
	// URL is its base URL, http://127.0.0.1:PORT.
	URL string
	// Token is a superuser's auth token, sent as the Authorization
	// header's value.
	Token string
}

var (
	pbMu   sync.Mutex
	pbPath string
	pbErr  error
)

// PocketBaseBin returns the path of the pinned PocketBase binary,
// building it on first use into $(os.UserCacheDir)/connhost/bin (under a
// file lock), or $CONNHOST_POCKETBASE_BIN when set. A test that cannot
// have it fails, and skips only locally with CONNHOST_SKIP_POCKETBASE=1.
func PocketBaseBin(tb testing.TB) string {
	tb.Helper()
	pbMu.Lock()
	defer pbMu.Unlock()
	if pbPath == "" && pbErr == nil {
		pbPath, pbErr = findOrBuildPocketBase()
	}
	if pbErr != nil {
		if os.Getenv(EnvSkipPocketBase) == "1" && os.Getenv("CI") == "" {
			tb.Skipf("testenv: real PocketBase unavailable and %s=1: %v", EnvSkipPocketBase, pbErr)
		}
		tb.Fatalf("testenv: real PocketBase unavailable (set %s to a prebuilt binary; locally %s=1 skips): %v", EnvPocketBaseBin, EnvSkipPocketBase, pbErr)
	}
	return pbPath
}

func findOrBuildPocketBase() (string, error) {
	// A cold build of PocketBase (pure Go: modernc.org/sqlite) takes
	// minutes on a loaded machine.
	return findOrBuildTool(pinnedTool{name: "PocketBase", dir: "pocketbase", version: PocketBaseVersion, envBin: EnvPocketBaseBin,
		pkg: "github.com/pocketbase/pocketbase/examples/base", timeout: 40 * time.Minute})
}

// StartPocketBase starts a real PocketBase on a free loopback port with a
// fresh data directory and a superuser made with its CLI (superuser
// upsert), waits until it serves, signs the superuser in and returns the
// server. It is stopped in tb.Cleanup. Collections are made through its
// API (see CreateCollection).
func StartPocketBase(tb testing.TB) *PocketBase {
	tb.Helper()
	bin := PocketBaseBin(tb)
	dir := filepath.Join(tb.TempDir(), "pb_data")
	const email, password = "crashtest@example.com", "connhost-crashtest-1"
	if out, err := exec.Command(bin, "superuser", "upsert", email, password, "--dir", dir, "--dev=false").CombinedOutput(); err != nil {
		tb.Fatalf("testenv: pocketbase superuser upsert: %v\n%s", err, out)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a freed port can be taken before PocketBase binds it
		pb, err := startPocketBase(tb, bin, dir)
		if err != nil {
			lastErr = err
			continue
		}
		if pb.Token, err = pocketBaseToken(pb.URL, email, password); err != nil {
			tb.Fatalf("testenv: PocketBase superuser sign-in: %v", err)
		}
		return pb
	}
	tb.Fatalf("testenv: starting PocketBase: %v", lastErr)
	return nil
}

func startPocketBase(tb testing.TB, bin, dir string) (*PocketBase, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(filepath.Dir(dir), "pocketbase.log")
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "serve", "--http", listen, "--dir", dir, "--dev=false")
	exited, stop, err := startLogged(cmd, logPath)
	if err != nil {
		return nil, err
	}
	base := "http://" + listen
	if err := waitHealthy(base+"/api/health", exited, 60*time.Second); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w\npocketbase log:\n%s", err, log)
	}
	tb.Cleanup(stop)
	return &PocketBase{URL: base}, nil
}

func waitHealthy(url string, exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return errors.New("the server exited before it was ready")
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready at %s after %s (last error: %v)", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pocketBaseToken(base, email, password string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	if err := pocketBaseDo(base, "", "POST", "/api/collections/_superusers/auth-with-password",
		map[string]string{"identity": email, "password": password}, &out); err != nil {
		return "", err
	}
	if out.Token == "" {
		return "", errors.New("no token in the answer")
	}
	return out.Token, nil
}

// CreateCollection creates a base collection through the API: fields
// (each a PocketBase field object: {"name": …, "type": …}) and indexes
// (CREATE [UNIQUE] INDEX statements).
func (pb *PocketBase) CreateCollection(tb testing.TB, name string, fields []map[string]any, indexes []string) {
	tb.Helper()
	body := map[string]any{"name": name, "type": "base", "fields": fields, "indexes": indexes}
	if indexes == nil {
		body["indexes"] = []string{}
	}
	if err := pocketBaseDo(pb.URL, pb.Token, "POST", "/api/collections", body, nil); err != nil {
		tb.Fatalf("testenv: PocketBase collection %s: %v", name, err)
	}
}

func pocketBaseDo(base, token, method, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(method, base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(raw.String()))
	}
	if out != nil {
		return json.Unmarshal(raw.Bytes(), out)
	}
	return nil
}
