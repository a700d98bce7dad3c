package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/testing/testenv"
	"github.com/connhost/connhost/internal/wasmrt"
	"github.com/connhost/connhost/manifests"
)

// apiKey is the Stripe test key the payments connector is configured with.
const apiKey = "sk_test_e2e"

// defaultFrom is the email connector's configured sender.
const defaultFrom = "agent@connhost.test"

// conn is a connector loaded by a fresh host runtime, with the runtime's
// log records captured.
type conn struct {
	*wasmrt.Connector
	logs *testenv.LogBuffer
}

// loadOption changes the manifest copy before Load.
type loadOption func(*manifests.Manifest)

// withTimeout shortens the manifest's Limits.Timeout (the call deadline).
func withTimeout(d time.Duration) loadOption {
	return func(m *manifests.Manifest) { m.Limits.Timeout = d }
}

// loadPayments loads the shipped payments connector configured for the
// Stripe API at baseURL.
func loadPayments(tb testing.TB, baseURL string, opts ...loadOption) *conn {
	tb.Helper()
	return load(tb, "payments", shared.paymentsWasm, shared.paymentsDigest, baseURL,
		map[string]string{"api_key": apiKey, "base_url": baseURL}, opts)
}

// loadEmail loads the shipped email connector configured for the Mailpit
// at baseURL.
func loadEmail(tb testing.TB, baseURL string, opts ...loadOption) *conn {
	tb.Helper()
	return load(tb, "email", shared.emailWasm, shared.emailDigest, baseURL,
		map[string]string{"base_url": baseURL, "default_from": defaultFrom}, opts)
}

// shippedManifest loads manifests/<name>.toml from the module root and pins
// it to the digest wasmbuild returned, so Load checks the pin.
func shippedManifest(tb testing.TB, name, digest string) *manifests.Manifest {
	tb.Helper()
	m, err := manifests.Load(filepath.Join(shared.root, "manifests", name+".toml"))
	if err != nil {
		tb.Fatal(err)
	}
	m.Connector.SHA256 = digest
	return m
}

// load does what the host's dev mode does: the shipped manifest, pinned to
// the built module, with the provider's origin appended to a copy of its
// http allowlist, and config served from cfg.
func load(tb testing.TB, name, wasm, digest, baseURL string, cfg map[string]string, opts []loadOption) *conn {
	tb.Helper()
	m := shippedManifest(tb, name, digest)
	m.Capabilities.HTTP = append(slices.Clone(m.Capabilities.HTTP), originOf(tb, baseURL))
	for _, o := range opts {
		o(m)
	}
	logs := &testenv.LogBuffer{}
	ctx := context.Background()
	rt, err := wasmrt.New(ctx, wasmrt.Options{
		CacheDir: shared.wazeroCache,
		Logger:   slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Config: func(connector, key string) (string, bool) {
			if connector != name {
				return "", false
			}
			v, ok := cfg[key]
			return v, ok
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := rt.Close(context.Background()); err != nil {
			tb.Errorf("close runtime: %v", err)
		}
	})
	c, err := rt.Load(ctx, m, wasmrt.LoadOptions{ModulePath: wasm, AllowUnpinned: true})
	if err != nil {
		tb.Fatal(err)
	}
	if c.ModuleDigest() != digest {
		tb.Fatalf("loaded module digest %s, wasmbuild built %s", c.ModuleDigest(), digest)
	}
	return &conn{Connector: c, logs: logs}
}

// originOf returns scheme://host:port of a base URL.
func originOf(tb testing.TB, base string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil || u.Port() == "" {
		tb.Fatalf("base URL %q has no explicit port", base)
	}
	return u.Scheme + "://" + u.Host
}

// call validates args against the operation's input schema, as the host
// does before any dispatch, then calls the connector. The execution id is
// derived from the key.
func (c *conn) call(tb testing.TB, export, op, key, args string) (abi.Outcome, error) {
	tb.Helper()
	mop, ok := c.Manifest().Operation(op)
	if !ok {
		tb.Fatalf("%s declares no operation %s", c.Name(), op)
	}
	if err := mop.ValidateArgs([]byte(args)); err != nil {
		tb.Fatalf("test arguments refused by the %s schema: %v", op, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Call(ctx, wasmrt.CallRequest{Export: export, Operation: op, Key: key, ExecutionID: "exec-" + key, Args: []byte(args)})
}

// must calls and fails the test on a *wasmrt.CallError.
func (c *conn) must(tb testing.TB, export, op, key, args string) abi.Outcome {
	tb.Helper()
	o, err := c.call(tb, export, op, key, args)
	if err != nil {
		tb.Fatalf("%s %s: %v", export, op, err)
	}
	return o
}

func (c *conn) execute(tb testing.TB, op, args string) abi.Outcome {
	tb.Helper()
	return c.must(tb, abi.ExportExecute, op, "", args)
}

func (c *conn) executeWithKey(tb testing.TB, op, key, args string) abi.Outcome {
	tb.Helper()
	return c.must(tb, abi.ExportExecuteWithKey, op, key, args)
}

func (c *conn) reconcile(tb testing.TB, op, key, args string) abi.Outcome {
	tb.Helper()
	return c.must(tb, abi.ExportReconcile, op, key, args)
}

// errorLogs returns the messages of the error-level records the runtime
// logged (the guests' c.Error calls among them).
func (c *conn) errorLogs() []string {
	var out []string
	for _, line := range strings.Split(c.logs.String(), "\n") {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "ERROR" {
			out = append(out, rec.Msg)
		}
	}
	return out
}

// newKey returns a fresh idempotency key made of [a-z0-9-] (so the email
// connector uses it verbatim in the Message-ID).
func newKey(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// wantOutcome fails unless o has kind want and its Error contains every
// fragment.
func wantOutcome(tb testing.TB, o abi.Outcome, want abi.OutcomeKind, fragments ...string) {
	tb.Helper()
	if o.Kind != want {
		tb.Fatalf("outcome %s (error %q, result %s), want %s", o.Kind, o.Error, o.Result, want)
	}
	for _, f := range fragments {
		if !strings.Contains(o.Error, f) {
			tb.Fatalf("outcome error %q does not contain %q", o.Error, f)
		}
	}
}

// wantCallError fails unless err is a *wasmrt.CallError of kind want.
func wantCallError(tb testing.TB, o abi.Outcome, err error, want wasmrt.CallErrorKind) *wasmrt.CallError {
	tb.Helper()
	var ce *wasmrt.CallError
	if !errors.As(err, &ce) {
		tb.Fatalf("got outcome %s (%q) and error %v, want a *wasmrt.CallError of kind %s", o.Kind, o.Error, err, want)
	}
	if ce.Kind != want || !errors.Is(err, want.Sentinel()) {
		tb.Fatalf("call error kind %s (%v), want %s", ce.Kind, err, want)
	}
	return ce
}

// result decodes an outcome's JSON result.
func result[T any](tb testing.TB, o abi.Outcome) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(o.Result, &v); err != nil {
		tb.Fatalf("result %s: %v", o.Result, err)
	}
	return v
}

// addPaymentsFault installs a fault on the Stripe emulator and removes
// every fault, held request and search lag when the test ends.
func addPaymentsFault(tb testing.TB, r fault.Rule) {
	tb.Helper()
	resetSandboxAtCleanup(tb)
	if err := shared.sbc.AddPaymentsFault(context.Background(), r); err != nil {
		tb.Fatal(err)
	}
}

// addEmailFault installs a fault on the Mailpit emulator (for failures a
// real Mailpit cannot be made to produce).
func addEmailFault(tb testing.TB, r fault.Rule) {
	tb.Helper()
	resetSandboxAtCleanup(tb)
	if err := shared.sbc.AddEmailFault(context.Background(), r); err != nil {
		tb.Fatal(err)
	}
}

func resetSandboxAtCleanup(tb testing.TB) {
	tb.Cleanup(func() {
		ctx := context.Background()
		if err := errors.Join(shared.sbc.ClearFaults(ctx), shared.sbc.ReleaseHeld(ctx), shared.sbc.SetSearchLag(ctx, 0)); err != nil {
			tb.Errorf("reset sandbox: %v", err)
		}
	})
}
