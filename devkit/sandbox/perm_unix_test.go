//go:build unix

package sandbox_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/connhost/connhost/devkit/sandbox"
)

// TestStateIsTheOwnersAlone: the emulators' state (customers' payments and
// messages) is written into a directory only its owner may enter, as files
// only its owner may read, under the usual umask 022 too.
func TestStateIsTheOwnersAlone(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "sandbox")
	sb := start(t, sandbox.Options{Listen: "127.0.0.1:0", EmailListen: "127.0.0.1:0", StateDir: dir})
	charge(t, sb.PaymentsURL(), "ex_1", "k1")
	sendMail(t, sb.EmailURL(), "<m1@connhost.test>")
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("state dir: %v %v", entries, err)
	}
	paths := []string{dir}
	for _, e := range entries {
		paths = append(paths, filepath.Join(dir, e.Name()))
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %s: other users may read it", p, fi.Mode().Perm())
		}
	}
}
