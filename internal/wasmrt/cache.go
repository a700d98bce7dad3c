package wasmrt

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// The on-disk compilation cache (Options.CacheDir) is wazero's own: it
// keeps each compiled module in a directory named after the wazero
// version, the architecture and the OS, under a key hashed from the
// module's sha256, the termination checks it was compiled with and the
// CPU's features, so one directory serves every data directory, every
// wazero release and every machine that shares it (a home directory on
// NFS) without one reading another's code. Entries are written to a
// temporary file and renamed into place: processes that compile the same
// module at once each write a whole entry, and a reader never sees a
// partial one. A file in the cache is native code this process runs, so
// the directory must be writable by its owner alone.
//
// The cache only saves compile time. Where it cannot serve, modules are
// compiled in memory for the runtime's lifetime and the logger is told
// why, never the caller: a directory that cannot be created or written
// (a read-only home, a container without one), one that others may write
// to, or an entry that does not read back (cut or corrupted on disk).

// openCache returns the compilation cache in dir, or an in-memory one
// (and "" for dir) where dir cannot serve, with a warning saying why.
func openCache(dir string, log *slog.Logger) (wazero.CompilationCache, string) {
	if dir == "" {
		return wazero.NewCompilationCache(), ""
	}
	if err := usableCacheDir(dir); err != nil {
		log.Warn("compiled modules are not cached: each start compiles them again (seconds per connector)",
			"cache_dir", dir, "reason", err.Error())
		return wazero.NewCompilationCache(), ""
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		log.Warn("compiled modules are not cached: each start compiles them again (seconds per connector)",
			"cache_dir", dir, "reason", err.Error())
		return wazero.NewCompilationCache(), ""
	}
	return c, dir
}

// usableCacheDir creates dir (owner only) if it is missing and checks
// that this process can write to it and that no one else can.
func usableCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create it: %w", err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is writable by other users (mode %v), and what it holds runs as native code in this process: chmod go-w it, or give another directory", dir, st.Mode().Perm())
	}
	f, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// compile compiles code (the module at path) in a new wazero runtime configured by cfg and
// cache, with the host modules every connector imports. On error it
// closes what it opened.
func compile(ctx context.Context, cfg wazero.RuntimeConfig, cache wazero.CompilationCache, path string, code []byte) (wazero.Runtime, wazero.CompiledModule, error) {
	wrt := wazero.NewRuntimeWithConfig(ctx, cfg.WithCompilationCache(cache))
	fail := func(err error) (wazero.Runtime, wazero.CompiledModule, error) {
		_ = wrt.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wrt); err != nil {
		return fail(fmt.Errorf("host: instantiate wasi: %w", err))
	}
	if err := instantiateHostModule(ctx, wrt); err != nil {
		return fail(err)
	}
	compiled, err := wrt.CompileModule(ctx, code)
	if err != nil {
		return fail(fmt.Errorf("%w: compile %s: %v", ErrBadModule, path, err))
	}
	return wrt, compiled, nil
}

// memoryCache is the in-memory cache a connector falls back to when the
// on-disk one fails it (see compile's caller, Runtime.Load): created at
// the first such failure, closed with the runtime.
func (r *Runtime) memoryCache() wazero.CompilationCache {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memCache == nil {
		r.memCache = wazero.NewCompilationCache()
	}
	return r.memCache
}

// CacheDir is the directory whose on-disk compilation cache the runtime
// uses: Options.CacheDir as given, or "" when modules are compiled
// in memory (none was given, or it could not serve; see Options.CacheDir).
func (r *Runtime) CacheDir() string { return r.cacheDir }

// DefaultCacheDir is where compiled modules are cached unless told
// otherwise: connhost/wazero in the user's cache directory
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux,
// ~/Library/Caches on macOS, %LocalAppData% on Windows). It is an error
// where the user has no cache directory ($HOME unset).
func DefaultCacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("wasmrt: no user cache directory for compiled modules: %w", err)
	}
	return filepath.Join(base, "connhost", "wazero"), nil
}
