package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// Prober finds out the facts about connector modules for the audit by
// loading them with the wasm runtime. One runtime, with the compilation
// cache in the data directory's cache, serves every manifest of a run;
// Close releases it.
// It is not safe for concurrent use (the audit calls it in turn).
type Prober struct {
	ctx context.Context
	// dir is --modules; modules not found there are looked up next to
	// their manifest.
	dir string
	// cacheDir is the compilation cache ("": in memory).
	cacheDir string
	rt       *wasmrt.Runtime
	// rtErr is why the runtime could not be created (reported as each
	// module's load error).
	rtErr error
}

// NewProber returns a prober of the modules in moduleDir (those not there
// are looked up next to their manifest), compiling them with the cache in
// cacheDir ("": in memory).
func NewProber(ctx context.Context, moduleDir, cacheDir string) *Prober {
	return &Prober{ctx: ctx, dir: moduleDir, cacheDir: cacheDir}
}

// runtime returns the prober's runtime, creating it on first use (an audit
// whose manifests all fail to parse creates no cache directory).
func (p *Prober) runtime() (*wasmrt.Runtime, error) {
	if p.rt != nil || p.rtErr != nil {
		return p.rt, p.rtErr
	}
	ro := wasmrt.Options{
		CacheDir: p.cacheDir,
		// Guests may log while they initialise and describe themselves;
		// the audit's output is the report alone.
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	// A cache directory that cannot serve compiles in memory (the cache
	// only saves compile time).
	p.rt, p.rtErr = wasmrt.New(p.ctx, ro)
	return p.rt, p.rtErr
}

func (p *Prober) Close() {
	if p.rt != nil {
		_ = p.rt.Close(context.WithoutCancel(p.ctx))
	}
}

// modulePath resolves m's module: in the module directory, else next to
// the manifest. When neither exists it returns the module directory's path (where connhost build
// writes), and false.
func (p *Prober) modulePath(m *manifests.Manifest) (string, bool) {
	path := m.ModulePath(p.dir)
	if _, err := os.Stat(path); err == nil {
		return path, true
	}
	if alt := m.ModulePath(""); alt != path {
		if _, err := os.Stat(alt); err == nil {
			return alt, true
		}
	}
	return path, false
}

// abiInError extracts the version a module claims from an ErrABIVersion
// load error ("module speaks abi 2", "module describes itself as abi 2").
var abiInError = regexp.MustCompile(`module (?:speaks|describes itself as) abi (-?\d+)`)

// Facts is the FactsFunc of the prober. It reads the module, hashes
// it, and loads it to learn its ABI version and self-description. The load
// is a probe: it uses a copy of the manifest that pins the actual digest
// (a mismatch is the audit's finding, not a reason to stop looking),
// declares the host's ABI version (the audit compares the module's with the
// manifest's) and no operations and capabilities, so that the host's own
// cross-check of declared policies against exports does not hide the
// description the audit needs to report export-missing per operation. A
// second probe declares exactly the operations the module describes, so
// that a module claiming an entry point it does not export is reported as
// module-invalid.
func (p *Prober) Facts(m *manifests.Manifest) ModuleFacts {
	path, found := p.modulePath(m)
	f := ModuleFacts{Path: path, Found: found}
	if !found {
		return f
	}
	code, err := os.ReadFile(path)
	if err != nil {
		f.LoadError = err.Error()
		return f
	}
	sum := sha256.Sum256(code)
	f.ActualSHA256 = hex.EncodeToString(sum[:])
	if _, err := p.runtime(); err != nil {
		f.LoadError = err.Error()
		return f
	}

	desc, err := p.probe(m, path, f.ActualSHA256, nil)
	if err != nil {
		if errors.Is(err, wasmrt.ErrABIVersion) {
			if sm := abiInError.FindStringSubmatch(err.Error()); sm != nil {
				if v, cerr := strconv.Atoi(sm[1]); cerr == nil && v != 0 {
					f.ABI = v // the audit raises abi-mismatch
					return f
				}
			}
		}
		f.LoadError = loadErrorText(m, err)
		return f
	}
	f.ABI = abi.Version // Load checked connhost_abi_version against it
	f.Description = &desc

	ops := make([]*manifests.Operation, 0, len(desc.Operations))
	for _, info := range desc.Operations {
		ops = append(ops, &manifests.Operation{Name: info.Name})
	}
	if _, err := p.probe(m, path, f.ActualSHA256, ops); err != nil {
		f.LoadError = loadErrorText(m, err)
	}
	return f
}

// probe loads the module at path under a probing copy of m (see facts) and
// returns its description.
func (p *Prober) probe(m *manifests.Manifest, path, digest string, ops []*manifests.Operation) (abi.Description, error) {
	pm := *m
	pm.Connector.SHA256 = digest
	pm.Connector.ABI = abi.Version
	pm.Capabilities = manifests.Capabilities{}
	pm.Operations = ops
	c, err := p.rt.Load(p.ctx, &pm, wasmrt.LoadOptions{ModulePath: path, AllowUnpinned: true})
	if err != nil {
		return abi.Description{}, err
	}
	defer c.Close(context.WithoutCancel(p.ctx))
	return c.Description(), nil
}

// loadErrorText makes a load error read well after "module X could not be
// loaded: ": without the connector prefix, on one line.
func loadErrorText(m *manifests.Manifest, err error) string {
	prefix := "connector[" + m.Connector.Name + "]: "
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, prefix)
	}
	return strings.Join(lines, "; ")
}
