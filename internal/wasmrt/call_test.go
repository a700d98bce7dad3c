package wasmrt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
)

func TestCallEcho(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo", "keyed"))
	c := mustLoad(t, rt, m, lo)
	out, err := c.Call(context.Background(), execute("echo", `{"to":"a@b.c","key":"not-the-key"}`))
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != abi.OutcomeOK || string(out.Result) != `{"to":"a@b.c","key":"not-the-key"}` {
		t.Fatalf("outcome %+v", out)
	}
	key := CallRequest{Export: abi.ExportExecuteWithKey, Operation: "keyed", Key: "idem-42", Args: []byte(`{}`)}
	out, err = c.Call(context.Background(), key)
	if err != nil || out.Kind != abi.OutcomeOK || string(out.Result) != `"idem-42"` || out.Receipt != "idem-42" {
		t.Fatalf("execute_with_key: %+v %v", out, err)
	}
	key.Export = abi.ExportReconcile
	out, err = c.Call(context.Background(), key)
	if err != nil || out.Kind != abi.OutcomeApplied || out.Receipt != "idem-42" {
		t.Fatalf("reconcile: %+v %v", out, err)
	}
}

// TestCallBeforeGuest covers errors raised before the guest runs: they
// call nothing, discard nothing and cannot have acted.
func TestCallBeforeGuest(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo", "keyed"))
	c := mustLoad(t, rt, m, lo)
	tests := []struct {
		name string
		req  CallRequest
		kind CallErrorKind
	}{
		{"unknown operation", execute("refund", `{}`), KindUnknownOperation},
		{"reconcile on execute-only op", CallRequest{Export: abi.ExportReconcile, Operation: "echo", Args: []byte(`{}`)}, KindUnsupportedExport},
		{"plain execute on keyed-only op", execute("keyed", `{}`), KindUnsupportedExport},
		{"unknown export", CallRequest{Export: "connhost_frobnicate", Operation: "echo"}, KindUnsupportedExport},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Stats()
			_, err := c.Call(context.Background(), tc.req)
			ce := wantCallError(t, err, "noop", tc.req.Operation, tc.kind)
			if ce.MayHaveActed() {
				t.Fatal("MayHaveActed = true for an error raised before the guest ran")
			}
			if after := c.Stats(); after.Discarded != before.Discarded || after.Created != before.Created {
				t.Fatalf("stats changed: %+v -> %+v", before, after)
			}
		})
	}
}

// TestCallMisbehavingGuest: each bad behaviour yields a typed error naming
// connector and operation, the instance is discarded, and the next good
// call on the same connector succeeds.
func TestCallMisbehavingGuest(t *testing.T) {
	rt, logs := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "trap", "trap",
		ops("ok", "trap", "nilderef", "panic", "loop", "sleep", "hostsleep", "late", "oom", "big", "exit"))
	m.Limits.Timeout = 200 * time.Millisecond
	m.Limits.MaxOutputKiB = 16
	m.Limits.MemoryMiB = 64
	c := mustLoad(t, rt, m, lo)
	// Running out of memory takes a while (the Go runtime grows its heap
	// step by step): give it its own connector with a generous deadline
	// and a smaller memory limit.
	mm, lo := testManifest(t, "trap", "trap", ops("ok", "oom"))
	mm.Limits.MemoryMiB = 32
	cmem := mustLoad(t, rt, mm, lo)

	tests := []struct {
		op, args string
		kind     CallErrorKind
		msg      string // in the error text
		c        *Connector
	}{
		{"trap", `{}`, KindTrap, "out of bounds memory access", nil},
		{"nilderef", `{}`, KindTrap, "nil pointer dereference", nil},
		{"panic", `{}`, KindTrap, "deliberate panic", nil},
		{"exit", `{}`, KindTrap, "exited with code 3", nil},
		{"loop", `{}`, KindTimeout, "limits.timeout 200ms", nil},
		{"sleep", `{}`, KindTimeout, "limits.timeout 200ms", nil},
		{"hostsleep", `{}`, KindTimeout, "limits.timeout 200ms", nil},
		// An answer other than success after the deadline is not taken: the
		// request the host cut may still land at the provider.
		{"late", `{}`, KindTimeout, "limits.timeout 200ms", nil},
		{"oom", `{}`, KindMemoryLimit, "limits.memory_mib 32", cmem},
		{"big", `{"n": 65536}`, KindOutputTooLarge, "max_output_kib 16", nil},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			c := c
			if tc.c != nil {
				c = tc.c
			}
			for _, export := range []string{abi.ExportExecute, abi.ExportExecuteWithKey} {
				before := c.Stats()
				req := CallRequest{Export: export, Operation: tc.op, Key: "k", ExecutionID: "exec-" + tc.op, Args: []byte(tc.args)}
				out, err := c.Call(context.Background(), req)
				ce := wantCallError(t, err, "trap", tc.op, tc.kind)
				contains(t, err.Error(), tc.msg)
				contains(t, err.Error(), "export["+export+"]")
				if !ce.MayHaveActed() {
					t.Fatal("MayHaveActed = false after the guest ran")
				}
				if out.Kind != 0 || out.Result != nil {
					t.Fatalf("failed call returned an outcome: %+v", out)
				}
				after := c.Stats()
				if after.Discarded != before.Discarded+1 || after.Busy != 0 {
					t.Fatalf("stats %+v -> %+v: want one more discarded, none busy", before, after)
				}
				ok, err := c.Call(context.Background(), execute("ok", `{}`))
				if err != nil || ok.Kind != abi.OutcomeOK || string(ok.Result) != `{"status":"fine"}` {
					t.Fatalf("good call after %s: %+v %v", tc.op, ok, err)
				}
			}
		})
	}
	contains(t, logs.String(), "connector instance discarded")
}

func TestCallMalformedEnvelope(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "bad", "badenvelope",
		ops("ok", "garbage", "truncated", "trailing", "badjson", "oob", "huge", "empty", "wrongkind"))
	m.Limits.MaxOutputKiB = 64
	c := mustLoad(t, rt, m, lo)
	tests := []struct {
		op   string
		kind CallErrorKind
		msg  string
	}{
		{"garbage", KindBadEnvelope, "unexpected envelope tag"},
		{"truncated", KindBadEnvelope, "truncated"},
		{"trailing", KindBadEnvelope, "trailing"},
		{"badjson", KindBadEnvelope, "not valid JSON"},
		{"oob", KindBadEnvelope, "outside guest memory"},
		{"huge", KindOutputTooLarge, "exceeds limits.max_output_kib 64"},
		{"empty", KindBadEnvelope, "truncated"},
		{"wrongkind", KindBadEnvelope, "does not fit connhost_execute"},
	}
	for _, tc := range tests {
		t.Run(tc.op, func(t *testing.T) {
			before := c.Stats()
			_, err := c.Call(context.Background(), execute(tc.op, `{}`))
			ce := wantCallError(t, err, "bad", tc.op, tc.kind)
			contains(t, err.Error(), tc.msg)
			if !ce.MayHaveActed() {
				t.Fatal("MayHaveActed = false after the guest ran")
			}
			if after := c.Stats(); after.Discarded != before.Discarded+1 {
				t.Fatalf("instance not discarded: %+v -> %+v", before, after)
			}
			out, err := c.Call(context.Background(), execute("ok", `{}`))
			if err != nil || string(out.Result) != `{"ok":true}` {
				t.Fatalf("good call after %s: %+v %v", tc.op, out, err)
			}
		})
	}
}

func TestCallCanceled(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "trap", "trap", ops("ok", "sleep"))
	c := mustLoad(t, rt, m, lo) // Timeout 5s: the cancellation comes first.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := c.Call(ctx, execute("sleep", `{}`))
	ce := wantCallError(t, err, "trap", "sleep", KindCanceled)
	if !ce.MayHaveActed() {
		t.Fatal("MayHaveActed = false after the guest ran")
	}
	if _, err := c.Call(context.Background(), execute("ok", `{}`)); err != nil {
		t.Fatal(err)
	}

	// A context already done never reaches the guest.
	_, err = c.Call(ctx, execute("ok", `{}`))
	ce = wantCallError(t, err, "trap", "ok", KindCanceled)
	if ce.MayHaveActed() {
		t.Fatal("MayHaveActed = true for a call that never reached the guest")
	}
}

// TestCallPoolWaitTimeout: with one instance busy, a second call waits and
// gives up at its deadline without touching the guest.
func TestCallPoolWaitTimeout(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "trap", "trap", ops("ok", "hostsleep"))
	m.Limits.Instances = 1
	m.Limits.Timeout = 2 * time.Second
	c := mustLoad(t, rt, m, lo)
	started := make(chan struct{})
	done := make(chan error)
	go func() {
		close(started)
		_, err := c.Call(context.Background(), execute("hostsleep", `{}`))
		done <- err
	}()
	<-started
	for c.Stats().Busy == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Call(ctx, execute("ok", `{}`))
	ce := wantCallError(t, err, "trap", "ok", KindTimeout)
	if ce.MayHaveActed() {
		t.Fatal("MayHaveActed = true while waiting for an instance")
	}
	wantCallError(t, <-done, "trap", "hostsleep", KindTimeout)
	if st := c.Stats(); st.Created != 1 || st.Discarded != 1 {
		t.Fatalf("stats %+v: the pool of one must not have grown", st)
	}
	if _, err := c.Call(context.Background(), execute("ok", `{}`)); err != nil {
		t.Fatal(err)
	}
}

// TestCallConcurrent: 8 goroutines × 50 calls through a pool of 2; each
// caller sees its own result, and the pool never exceeds its cap.
func TestCallConcurrent(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo", "keyed"))
	m.Limits.Instances = 2
	c := mustLoad(t, rt, m, lo)
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				args := fmt.Sprintf(`{"g":%d,"i":%d,"pad":%q}`, g, i, strings.Repeat("x", i*10))
				req := execute("echo", args)
				if i%2 == 1 {
					req = CallRequest{Export: abi.ExportExecuteWithKey, Operation: "keyed", Key: fmt.Sprintf("k-%d-%d", g, i), Args: []byte(args)}
					args = fmt.Sprintf(`"k-%d-%d"`, g, i)
				}
				out, err := c.Call(context.Background(), req)
				if err != nil {
					errs <- err
					return
				}
				if string(out.Result) != args {
					errs <- fmt.Errorf("g%d i%d: got %s want %s", g, i, out.Result, args)
					return
				}
				if st := c.Stats(); st.Idle+st.Busy > 2 {
					errs <- fmt.Errorf("pool over its cap: %+v", st)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := c.Stats()
	if st.Created > 2 || st.Busy != 0 || st.Discarded != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCallAfterClose(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo"))
	c := mustLoad(t, rt, m, lo)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Call(context.Background(), execute("echo", `{}`))
	ce := wantCallError(t, err, "noop", "echo", KindClosed)
	if ce.MayHaveActed() {
		t.Fatal("MayHaveActed = true after close")
	}
}

func TestHostFunctions(t *testing.T) {
	const secret = "sk_live_do_not_log"
	rt, logs := newTestRuntime(t, Options{
		Config: func(connector, key string) (string, bool) {
			if connector == "probe" && key == "api_key" {
				return secret, true
			}
			return "", false
		},
	})
	m, lo := testManifest(t, "probe", "httpprobe", ops("config", "execid", "log", "hostsleep", "now", "get"))
	m.Capabilities.Config = []string{"api_key", "base_url"}
	c := mustLoad(t, rt, m, lo)
	call := func(op, args string) map[string]any {
		t.Helper()
		out, err := c.Call(context.Background(), CallRequest{Export: abi.ExportExecuteWithKey, Operation: op, Key: "key-7", ExecutionID: "exec-9", Args: []byte(args)})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if out.Result != nil && string(out.Result) != "null" {
			if err := json.Unmarshal(out.Result, &v); err != nil {
				var n any
				if json.Unmarshal(out.Result, &n) == nil {
					return map[string]any{"value": n}
				}
				t.Fatal(err)
			}
		}
		return v
	}
	t.Run("config declared and set", func(t *testing.T) {
		if got := call("config", `{"key":"api_key"}`); got["value"] != secret {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("config declared not set", func(t *testing.T) {
		got := call("config", `{"key":"base_url"}`)
		contains(t, fmt.Sprint(got["error"]), "has no value")
	})
	t.Run("config not declared", func(t *testing.T) {
		got := call("config", `{"key":"PATH"}`)
		contains(t, fmt.Sprint(got["error"]), "not declared")
	})
	t.Run("execution id and key", func(t *testing.T) {
		got := call("execid", `{}`)
		if got["execution_id"] != "exec-9" || got["key"] != "key-7" {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("log", func(t *testing.T) {
		call("log", `{"msg":"hello from the guest"}`)
		var rec map[string]any
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "hello from the guest") {
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
			}
		}
		if rec["connector"] != "probe" || rec["operation"] != "log" || rec["execution_id"] != "exec-9" || rec["level"] != "INFO" {
			t.Fatalf("log record %v", rec)
		}
	})
	t.Run("host sleep", func(t *testing.T) {
		if got := call("hostsleep", `{"ms":1}`); got["full"] != true {
			t.Fatalf("got %v", got)
		}
	})
	t.Run("now", func(t *testing.T) {
		got := call("now", `{}`)
		n, _ := got["value"].(float64)
		if d := time.Since(time.Unix(0, int64(n))); d < -time.Minute || d > time.Minute {
			t.Fatalf("guest clock off by %v", d)
		}
	})
	if strings.Contains(logs.String(), secret) {
		t.Fatal("a config value reached the log")
	}
}
