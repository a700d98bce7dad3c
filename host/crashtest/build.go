package crashtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/connhost/connhost/internal/wasmbuild"
)

// connhostModule is the module path of connhost.
const connhostModule = "github.com/connhost/connhost"

// BuildConnhost builds the connhost binary into dir and returns its path.
// It builds the connhost the calling module depends on (the directory
// `go list -m github.com/connhost/connhost` names from the working
// directory: a replace target, the module cache, or this repository), with
// that module's own go.mod and go.sum, so the caller's module needs none
// of the binary's dependencies.
func BuildConnhost(ctx context.Context, dir string) (string, error) {
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", connhostModule)
	var stderr bytes.Buffer
	list.Stderr = &stderr
	out, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("crashtest: find the connhost module: go list -m %s: %w: %s", connhostModule, err, bytes.TrimSpace(stderr.Bytes()))
	}
	src := strings.TrimSpace(string(out))
	if src == "" {
		return "", fmt.Errorf("crashtest: go list -m %s named no directory (is the module downloaded?)", connhostModule)
	}
	bin, err := filepath.Abs(filepath.Join(dir, "connhost"))
	if err != nil {
		return "", fmt.Errorf("crashtest: %w", err)
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/connhost")
	build.Dir = src
	// The connhost module builds as its own main module, whatever
	// workspace or flags the caller's module uses.
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("crashtest: go build ./cmd/connhost in %s: %w\n%s", src, err, bytes.TrimSpace(b))
	}
	return bin, nil
}

// BuildModule compiles the connector's main package in pkgDir to the
// wasip1 module out, the way connhost build does (GOOS=wasip1 GOARCH=wasm
// -buildmode=c-shared -trimpath -buildvcs=false, from pkgDir's module
// root), and returns the module's hex sha256.
func BuildModule(ctx context.Context, pkgDir, out string) (string, error) {
	return wasmbuild.Build(ctx, pkgDir, out)
}
