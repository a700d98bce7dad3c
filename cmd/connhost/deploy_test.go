package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDockerfileFollowsMakefile guards deploy/Dockerfile against rot
// (docker does not run in the test suite): every build command it RUNs is
// one of the Makefile's build target, with $(GO) as go, and every path
// it COPYs from the repository exists or is what those commands write.
func TestDockerfileFollowsMakefile(t *testing.T) {
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var build []string
	in := false
	for _, l := range strings.Split(string(mk), "\n") {
		switch {
		case strings.HasPrefix(l, "build:"):
			in = true
		case in && strings.HasPrefix(l, "\t"):
			build = append(build, strings.ReplaceAll(strings.TrimSpace(l), "$(GO)", "go"))
		case in:
			in = false
		}
	}
	if len(build) == 0 {
		t.Fatal("the Makefile has no build target")
	}
	f, err := os.Open(filepath.Join(root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	written := map[string]bool{}
	var ran []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "RUN":
			cmd := strings.Join(fields[1:], " ")
			if cmd == "go mod download" {
				continue
			}
			if dirs, ok := strings.CutPrefix(cmd, "mkdir -p "); ok {
				// The volumes' mount points, copied with their owner.
				for _, d := range strings.Fields(dirs) {
					written[d] = true
				}
				continue
			}
			found := false
			for _, b := range build {
				found = found || b == cmd
			}
			if !found {
				t.Errorf("Dockerfile RUN %q is none of make build's commands:\n%s", cmd, strings.Join(build, "\n"))
			}
			ran = append(ran, cmd)
			switch {
			case strings.Contains(cmd, "-o bin/connhost"):
				written["bin/connhost"] = true
			case strings.Contains(cmd, "connhost build"):
				written["build"] = true
			}
		case "COPY":
			args := fields[1:]
			from := len(args) > 0 && strings.HasPrefix(args[0], "--from=")
			if from {
				args = args[1:]
			}
			if len(args) > 0 && strings.HasPrefix(args[0], "--chown=") {
				args = args[1:]
			}
			for _, src := range args[:len(args)-1] {
				p := strings.TrimPrefix(src, "/src/")
				if src == "." || written[p] || from && mkdirParent(written, src) {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("Dockerfile COPY %s: no %s in the repository, and no RUN writes it", src, p)
				}
			}
		}
	}
	if len(ran) != len(build) {
		t.Errorf("the Dockerfile runs %d of make build's %d commands: %q", len(ran), len(build), ran)
	}
}

// TestSystemdUnitVerifies runs systemd-analyze verify on
// deploy/connhost.service where it is installed; the binary the unit
// starts is not installed here, which is the one complaint allowed.
func TestSystemdUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("no systemd-analyze")
	}
	out, _ := exec.Command(sa, "verify", filepath.Join("..", "..", "deploy", "connhost.service")).CombinedOutput()
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "/usr/local/bin/connhost is not executable") {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
}

// mkdirParent reports whether dir is a directory a RUN mkdir -p made, or
// the parent of one.
func mkdirParent(written map[string]bool, dir string) bool {
	for d := range written {
		if d == dir || strings.HasPrefix(d, strings.TrimSuffix(dir, "/")+"/") {
			return true
		}
	}
	return false
}
