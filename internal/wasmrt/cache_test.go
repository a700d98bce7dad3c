package wasmrt

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// cacheEntries returns the files of wazero's version directory in dir
// (wazero-<version>-<arch>-<os>), failing unless there is exactly one
// such directory.
func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	vdirs, err := filepath.Glob(filepath.Join(dir, "wazero-*-"+runtime.GOARCH+"-"+runtime.GOOS))
	if err != nil || len(vdirs) != 1 {
		t.Fatalf("version directories in %s: %v (%v)", dir, vdirs, err)
	}
	entries, err := os.ReadDir(vdirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, filepath.Join(vdirs[0], e.Name()))
	}
	return files
}

// loadEcho loads the noop fixture into rt and checks one call.
func loadEcho(t *testing.T, rt *Runtime) {
	t.Helper()
	m, lo := testManifest(t, "noop", "noop", ops("echo"))
	c := mustLoad(t, rt, m, lo)
	out, err := c.Call(context.Background(), execute("echo", `{"i":1}`))
	if err != nil || string(out.Result) != `{"i":1}` {
		t.Fatalf("call: %+v %v", out, err)
	}
}

// TestCacheMissingDirCreated: a cache directory that does not exist yet
// (a new machine, a new user) is created for its owner alone and used.
// (TestLoadFromDiskCache shows a module written there and read back.)
func TestCacheMissingDirCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "wazero")
	rt, logs := newTestRuntime(t, Options{CacheDir: dir})
	if rt.CacheDir() != dir {
		t.Fatalf("CacheDir() = %q, want %q", rt.CacheDir(), dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o700 {
		t.Fatalf("cache directory mode %v, want 0700", perm)
	}
	if strings.Contains(logs.String(), "WARN") {
		t.Fatalf("warned: %s", logs)
	}
}

// TestCacheUnusableDirFallsBack: a cache directory that cannot be created
// (here: under a regular file) or that others may write to does not stop
// the runtime: modules compile in memory, the logger says why, and
// nothing is written there.
func TestCacheUnusableDirFallsBack(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, dir, reason string
		load              bool // one compile in memory shows the runtime works
	}{
		{"cannot be created", filepath.Join(file, "wazero"), "create it", false},
		{"writable by others", shared, "writable by other users", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, logs := newTestRuntime(t, Options{CacheDir: tc.dir})
			if rt.CacheDir() != "" {
				t.Fatalf("CacheDir() = %q, want in memory", rt.CacheDir())
			}
			if tc.load {
				loadEcho(t, rt)
			}
			contains(t, logs.String(), "compiled modules are not cached")
			contains(t, logs.String(), tc.reason)
		})
	}
	if entries, _ := os.ReadDir(shared); len(entries) != 0 {
		t.Fatalf("wrote %d entries into a directory others may write", len(entries))
	}
}

// TestCacheDamagedEntry: an entry that does not read back (cut short on
// disk) does not stop the load: the module is compiled without the cache
// and the logger names the directory. Without the fallback, wazero's
// checksum error fails the load.
func TestCacheDamagedEntry(t *testing.T) {
	dir := t.TempDir()
	rt, _ := newTestRuntime(t, Options{CacheDir: dir})
	loadEcho(t, rt)
	files := cacheEntries(t, dir)
	if len(files) != 1 {
		t.Fatalf("cache entries %v", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff // inside the native code: its checksum fails
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	rt2, logs := newTestRuntime(t, Options{CacheDir: dir})
	loadEcho(t, rt2)
	contains(t, logs.String(), "the compilation cache failed this module")
	contains(t, logs.String(), dir)
}

// TestCacheConcurrentRuntimes: runtimes with caches of their own on one
// directory (as processes sharing the user's cache directory) compile the
// same module at once; every load succeeds, the directory ends with one
// whole entry, and a later runtime loads from it.
func TestCacheConcurrentRuntimes(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for range 2 {
		rt, _ := newTestRuntime(t, Options{CacheDir: dir})
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, lo := testManifest(t, "noop", "noop", ops("echo"))
			if _, err := rt.Load(context.Background(), m, lo); err != nil {
				t.Errorf("load: %v", err)
			}
		}()
	}
	wg.Wait()
	files := cacheEntries(t, dir)
	if len(files) != 1 || strings.HasSuffix(files[0], ".tmp") {
		t.Fatalf("cache entries %v, want one whole entry", files)
	}
	rt, logs := newTestRuntime(t, Options{CacheDir: dir})
	loadEcho(t, rt)
	if strings.Contains(logs.String(), "WARN") {
		t.Fatalf("warned: %s", logs)
	}
}
