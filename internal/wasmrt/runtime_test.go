package wasmrt

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/manifests"
)

func TestLoad(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo", "keyed"))
	c := mustLoad(t, rt, m, lo)
	if c.Name() != "noop" || c.Manifest() != m || c.ModuleDigest() != m.Connector.SHA256 {
		t.Fatalf("Name %q Manifest %p ModuleDigest %q", c.Name(), c.Manifest(), c.ModuleDigest())
	}
	d := c.Description()
	if d.ABI != abi.Version || len(d.Operations) != 2 {
		t.Fatalf("description %+v", d)
	}
	if k, _ := d.Operation("keyed"); !k.ExecuteWithKey || !k.Reconcile || k.Execute {
		t.Fatalf("keyed described as %+v", k)
	}
	st := c.Stats()
	if st.Idle != 1 || st.Busy != 0 || st.Created != 1 || st.Discarded != 0 || st.Size != 2 {
		t.Fatalf("after load, stats = %+v; want the describing instance idle", st)
	}
}

func TestLoadDigestMismatch(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "payments", "noop", ops("echo"))
	actual := m.Connector.SHA256
	m.Connector.SHA256 = strings.Repeat("ab", 32)
	_, err := rt.Load(context.Background(), m, lo)
	var de *DigestMismatchError
	if !errors.As(err, &de) || !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v, want *DigestMismatchError", err)
	}
	for _, want := range []string{"connector[payments]", m.Connector.SHA256, actual} {
		contains(t, err.Error(), want)
	}
	if de.Actual != actual || de.Pinned != m.Connector.SHA256 {
		t.Fatalf("error fields %+v", de)
	}
}

func TestLoadUnpinned(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "email", "noop", ops("echo"))
	m.Connector.SHA256 = ""
	_, err := rt.Load(context.Background(), m, lo)
	if !errors.Is(err, ErrUnpinned) {
		t.Fatalf("err = %v, want ErrUnpinned", err)
	}
	contains(t, err.Error(), "connector[email]")

	lo.AllowUnpinned = true
	c := mustLoad(t, rt, m, lo)
	if c.ModuleDigest() == "" {
		t.Fatal("unpinned connector has no digest")
	}
}

func TestLoadWrongABIVersion(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "old", "badversion", ops("echo"))
	_, err := rt.Load(context.Background(), m, lo)
	if !errors.Is(err, ErrABIVersion) {
		t.Fatalf("err = %v, want ErrABIVersion", err)
	}
	for _, want := range []string{"connector[old]", "module speaks abi 2", "host speaks abi 1"} {
		contains(t, err.Error(), want)
	}

	// The manifest's own abi field is checked too.
	m2, lo2 := testManifest(t, "old2", "noop", ops("echo"))
	m2.Connector.ABI = 7
	_, err = rt.Load(context.Background(), m2, lo2)
	if !errors.Is(err, ErrABIVersion) {
		t.Fatalf("manifest abi 7: err = %v, want ErrABIVersion", err)
	}
}

func TestLoadDeclaredExportMissing(t *testing.T) {
	tests := []struct {
		name   string
		policy manifests.Policy
		export string
	}{
		{"idempotent-retry without execute_with_key", manifests.PolicyIdempotentRetry, abi.ExportExecuteWithKey},
		{"reconcile without reconcile", manifests.PolicyReconcile, abi.ExportReconcile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rt, _ := newTestRuntime(t, Options{})
			o := ops("charge")
			o[0].Recovery = tc.policy
			m, lo := testManifest(t, "payments", "noreconcile", o)
			_, err := rt.Load(context.Background(), m, lo)
			if !errors.Is(err, ErrMissingExport) {
				t.Fatalf("err = %v, want ErrMissingExport", err)
			}
			for _, want := range []string{"connector[payments]", "op[charge]", tc.export, string(tc.policy)} {
				contains(t, err.Error(), want)
			}
		})
	}
	t.Run("manual loads", func(t *testing.T) {
		rt, _ := newTestRuntime(t, Options{})
		m, lo := testManifest(t, "payments", "noreconcile", ops("charge"))
		mustLoad(t, rt, m, lo)
	})
}

func TestLoadMissingOperation(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo", "refund"))
	_, err := rt.Load(context.Background(), m, lo)
	if !errors.Is(err, ErrMissingOperation) {
		t.Fatalf("err = %v, want ErrMissingOperation", err)
	}
	contains(t, err.Error(), "op[refund]")
}

func TestLoadBadCapability(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	for _, entry := range []string{"api.stripe.com:443", "ftp://x:21", "https://api.stripe.com", "https://u@h:443", "https://h:443/path"} {
		m, lo := testManifest(t, "caps", "noop", ops("echo"))
		m.Capabilities.HTTP = []string{entry}
		_, err := rt.Load(context.Background(), m, lo)
		if !errors.Is(err, ErrBadCapability) {
			t.Fatalf("entry %q: err = %v, want ErrBadCapability", entry, err)
		}
	}
}

func TestLoadMissingModule(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, _ := testManifest(t, "ghost", "noop", ops("echo"))
	_, err := rt.Load(context.Background(), m, LoadOptions{ModulePath: t.TempDir() + "/missing.wasm"})
	if err == nil {
		t.Fatal("loaded a missing module")
	}
	contains(t, err.Error(), "connector[ghost]")
}

func TestLoadFromDiskCache(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 {
		rt, _ := newTestRuntime(t, Options{CacheDir: dir})
		m, lo := testManifest(t, "noop", "noop", ops("echo"))
		c := mustLoad(t, rt, m, lo)
		out, err := c.Call(context.Background(), execute("echo", `{"i":1}`))
		if err != nil || string(out.Result) != `{"i":1}` {
			t.Fatalf("round %d: %+v %v", i, out, err)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
			t.Fatalf("round %d: compilation cache %s is empty (%v)", i, dir, err)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{HTTPTimeout: -1, MaxHTTPRequestBytes: -1, MaxHTTPResponseBytes: -1}
	err := o.Validate()
	if err == nil {
		t.Fatal("negative options validated")
	}
	for _, want := range []string{"HTTPTimeout", "MaxHTTPRequestBytes", "MaxHTTPResponseBytes"} {
		contains(t, err.Error(), want)
	}
	var d Options
	d.EnsureDefaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}
