//go:build linux

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost"
)

// image is what deploy/Dockerfile's final stage says about how the
// binary runs.
type image struct {
	entrypoint []string
	volumes    []string
	workdir    string
	uid, gid   uint32
}

func readImage(t *testing.T) image {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var im image
	final := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		word, rest, _ := strings.Cut(line, " ")
		switch word {
		case "FROM":
			final = !strings.Contains(rest, " AS ")
		case "ENTRYPOINT", "VOLUME":
			if !final {
				continue
			}
			var v []string
			if err := json.Unmarshal([]byte(rest), &v); err != nil {
				t.Fatalf("Dockerfile %s is not the exec form: %v", word, err)
			}
			if word == "ENTRYPOINT" {
				im.entrypoint = v
			} else {
				im.volumes = append(im.volumes, v...)
			}
		case "WORKDIR":
			if final {
				im.workdir = rest
			}
		case "USER":
			if final {
				u, g, _ := strings.Cut(rest, ":")
				uid, err1 := strconv.ParseUint(u, 10, 32)
				gid, err2 := strconv.ParseUint(g, 10, 32)
				if err1 != nil || err2 != nil {
					t.Fatalf("Dockerfile USER %q: want numeric uid:gid (distroless's nonroot is 65532)", rest)
				}
				im.uid, im.gid = uint32(uid), uint32(gid)
			}
		}
	}
	if len(im.entrypoint) == 0 || len(im.volumes) == 0 || im.uid == 0 {
		t.Fatalf("the Dockerfile's final stage lacks an ENTRYPOINT, a VOLUME or a non-root USER: %+v", im)
	}
	return im
}

// TestImageRunsAsNonroot runs the binary the way deploy/Dockerfile's image
// runs it (docker itself does not run here): the ENTRYPOINT's arguments,
// as the image's non-root user, with the image's paths under a scratch
// root where only the declared volumes are writable by that user. It
// serves, and its ledger and witness land in the volumes: the witness of
// an earlier image sat beside the data directory, where the non-root user
// could not write, and serve exited 1.
func TestImageRunsAsNonroot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs serve as a real process")
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI runs this test as root, which it needs to start serve as the image's user")
		}
		t.Skip("needs root to run serve as the image's user")
	}
	im := readImage(t)
	root := t.TempDir()
	// The scratch root and its parents must be open to the image's user
	// (t.TempDir makes them 0700), as / is in the image.
	for d := root; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	at := func(p string) string { return filepath.Join(root, p) }
	arg := func(flag string) string {
		for i, a := range im.entrypoint {
			if a == flag && i+1 < len(im.entrypoint) {
				return im.entrypoint[i+1]
			}
		}
		t.Fatalf("the ENTRYPOINT has no %s", flag)
		return ""
	}
	// What the image's COPY lines put in place, owned by root.
	bin := buildConnhost(t, t.TempDir())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Dir(at(im.entrypoint[0])), 0o755))
	b, err := os.ReadFile(bin)
	must(err)
	must(os.WriteFile(at(im.entrypoint[0]), b, 0o755))
	must(os.MkdirAll(at(arg("--manifests")), 0o755))
	for _, name := range []string{"payments", "email"} {
		text, err := connhost.ManifestText(name)
		must(err)
		must(os.WriteFile(filepath.Join(at(arg("--manifests")), name+".toml"), text, 0o644))
	}
	must(connhost.WriteModules(at(arg("--modules"))))
	// The volumes, the image's user's; their parent is not.
	for _, v := range im.volumes {
		must(os.MkdirAll(at(v), 0o755))
		must(os.Chown(at(v), int(im.uid), int(im.gid)))
	}
	port := freePort(t)
	must(os.MkdirAll(filepath.Dir(at(arg("--config"))), 0o755))
	must(os.WriteFile(at(arg("--config")), []byte(fmt.Sprintf(`[server]
listen = "0.0.0.0:%d"
token = "tok-image-test-0123456789abcdef0123"
behind_tls_proxy = true

[connectors.payments]
api_key = "sk_test_image"

[connectors.email]
default_from = "shop@example.invalid"
`, port)), 0o644))

	args := make([]string, len(im.entrypoint)-1)
	for i, a := range im.entrypoint[1:] {
		if strings.HasPrefix(a, "/") {
			a = at(a)
		}
		args[i] = a
	}
	cmd := exec.Command(at(im.entrypoint[0]), args...)
	cmd.Dir = at(im.workdir)
	cmd.Env = []string{"HOME=/nonexistent", "PATH=/usr/local/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: im.uid, Gid: im.gid}, Pdeathsig: syscall.SIGKILL}
	logFile := filepath.Join(t.TempDir(), "serve.log")
	logw, err := os.Create(logFile)
	must(err)
	defer logw.Close()
	cmd.Stderr = logw
	stderr := func() string { b, _ := os.ReadFile(logFile); return string(b) }
	must(cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	healthy := false
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline) && !healthy; {
		select {
		case err := <-done:
			t.Fatalf("serve as the image runs it exited: %v\n%s", err, stderr())
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err == nil {
			healthy = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
	}
	if !healthy {
		t.Fatalf("serve as the image runs it did not become healthy:\n%s", stderr())
	}
	must(cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve did not stop cleanly on SIGTERM: %v\n%s", err, stderr())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop on SIGTERM")
	}
	for _, p := range []string{filepath.Join(arg("--data"), "ledger"), arg("--witness")} {
		fi, err := os.Stat(at(p))
		if err != nil {
			t.Errorf("%s was not written: %v", p, err)
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != im.uid {
			t.Errorf("%s is not the image user's", p)
		}
	}
}

// freePort returns a TCP port free on all interfaces now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
