package wasmrt

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/connhost/connhost/abi"
)

// kib1 is 1 KiB of JSON (a string), echoed back as 1 KiB of result.
var kib1 = []byte(`"` + strings.Repeat("x", 1022) + `"`)

func loadNoop(b *testing.B, instances int) *Connector {
	b.Helper()
	rt, _ := newTestRuntime(b, Options{})
	m, lo := testManifest(b, "noop", "noop", ops("echo", "keyed"))
	m.Limits.Instances = instances
	return mustLoad(b, rt, m, lo)
}

// BenchmarkWarmCall is one call through the pool: 1 KiB in, 1 KiB out,
// with deadline, alloc, envelope decode and result copy.
func BenchmarkWarmCall(b *testing.B) {
	c := loadNoop(b, 2)
	req := CallRequest{Export: abi.ExportExecute, Operation: "echo", ExecutionID: "bench", Args: kib1}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(kib1)))
	for b.Loop() {
		out, err := c.Call(ctx, req)
		if err != nil || len(out.Result) != len(kib1) {
			b.Fatalf("%v %d", err, len(out.Result))
		}
	}
}

// BenchmarkWarmCallParallel runs WarmCall from GOMAXPROCS callers (2 on
// the reference machine) over a pool of 2 instances.
func BenchmarkWarmCallParallel(b *testing.B) {
	c := loadNoop(b, 2)
	req := CallRequest{Export: abi.ExportExecute, Operation: "echo", ExecutionID: "bench", Args: kib1}
	b.ReportAllocs()
	b.SetBytes(int64(len(kib1)))
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			out, err := c.Call(ctx, req)
			if err != nil || len(out.Result) != len(kib1) {
				b.Errorf("%v %d", err, len(out.Result))
				return
			}
		}
	})
}

// directModule instantiates the noop module in a bare wazero runtime with
// the same host modules, for baselines without pool and envelope.
func directModule(b *testing.B, closeOnDone bool) api.Module {
	b.Helper()
	ctx := context.Background()
	path, _ := fixture(b, "noop")
	code, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	cache, err := wazero.NewCompilationCacheWithDir(testCacheDir(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(closeOnDone).WithCompilationCache(cache)
	wrt := wazero.NewRuntimeWithConfig(ctx, cfg)
	b.Cleanup(func() { wrt.Close(ctx); cache.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, wrt)
	if err := instantiateHostModule(ctx, wrt); err != nil {
		b.Fatal(err)
	}
	mod, err := wrt.InstantiateWithConfig(ctx, code, wazero.NewModuleConfig().WithName("").WithStartFunctions(abi.ExportInitialize))
	if err != nil {
		b.Fatal(err)
	}
	return mod
}

// BenchmarkDirectCall calls connhost_execute on the same module directly
// through api.Function.CallWithStack: no pool, no deadline, no envelope
// decode; the input is written once. It is the baseline for WarmCall.
// "closeOnDone" uses WithCloseOnContextDone(true) like the runtime;
// "closeOnDone+alloc" adds the connhost_alloc round trip the ABI asks for
// before every call; "closeOnDone+alloc+deadline" also gives each call a
// context with a deadline, as Call does (wazero then watches it with a
// goroutine per call); "plain" has no deadline enforcement, to show its
// cost.
func BenchmarkDirectCall(b *testing.B) {
	for _, mode := range []struct {
		name                                string
		closeOnDone, withAlloc, withTimeout bool
	}{{"closeOnDone", true, false, false}, {"closeOnDone+alloc", true, true, false},
		{"closeOnDone+alloc+deadline", true, true, true}, {"plain", false, false, false}} {
		closeOnDone := mode.closeOnDone
		b.Run(mode.name, func(b *testing.B) {
			mod := directModule(b, closeOnDone)
			ctx := context.Background()
			alloc := mod.ExportedFunction(abi.ExportAlloc)
			exec := mod.ExportedFunction(abi.ExportExecute)
			op := "echo"
			stack := make([]uint64, 4)
			stack[0] = uint64(len(op) + len(kib1))
			if err := alloc.CallWithStack(ctx, stack); err != nil {
				b.Fatal(err)
			}
			ptr := uint32(stack[0])
			mod.Memory().Write(ptr, []byte(op))
			mod.Memory().Write(ptr+uint32(len(op)), kib1)
			b.ReportAllocs()
			b.SetBytes(int64(len(kib1)))
			for b.Loop() {
				cctx, cancel := ctx, context.CancelFunc(nil)
				if mode.withTimeout {
					cctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
				}
				if mode.withAlloc {
					stack[0] = uint64(len(op) + len(kib1))
					if err := alloc.CallWithStack(cctx, stack); err != nil {
						b.Fatal(err)
					}
				}
				stack[0], stack[1], stack[2], stack[3] = uint64(ptr), uint64(len(op)), uint64(ptr)+uint64(len(op)), uint64(len(kib1))
				if err := exec.CallWithStack(cctx, stack); err != nil {
					b.Fatal(err)
				}
				if cancel != nil {
					cancel()
				}
				if _, n := abi.UnpackPtrLen(stack[0]); n < uint32(len(kib1)) {
					b.Fatalf("short outcome: %d bytes", n)
				}
			}
		})
	}
}

// BenchmarkLoadWarmCache loads the noop connector with a warm on-disk
// compilation cache: read + sha256, compile from cache, instantiate one
// instance (_initialize), version check, describe, cross-check.
func BenchmarkLoadWarmCache(b *testing.B) {
	dir := b.TempDir()
	rt, _ := newTestRuntime(b, Options{CacheDir: dir})
	m, lo := testManifest(b, "noop", "noop", ops("echo", "keyed"))
	ctx := context.Background()
	c := mustLoad(b, rt, m, lo) // warms the cache
	c.Close(ctx)
	b.ReportAllocs()
	for b.Loop() {
		c, err := rt.Load(ctx, m, lo)
		if err != nil {
			b.Fatal(err)
		}
		c.Close(ctx)
	}
}

// BenchmarkLoadCold loads the noop connector into a fresh runtime with an
// empty compilation cache each time (a full compile).
func BenchmarkLoadCold(b *testing.B) {
	m, lo := testManifest(b, "noop", "noop", ops("echo", "keyed"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rt, err := New(ctx, Options{CacheDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Load(ctx, m, lo); err != nil {
			b.Fatal(err)
		}
		rt.Close(ctx)
	}
}

// BenchmarkNewInstance measures creating one pooled instance
// (instantiate + _initialize) and reports its memory: the guest's linear
// memory after a warm call, and the host heap each live instance holds.
func BenchmarkNewInstance(b *testing.B) {
	c := loadNoop(b, 1)
	ctx := context.Background()
	var insts []*instance
	b.Cleanup(func() {
		for _, inst := range insts {
			inst.close()
		}
	})
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	for b.Loop() {
		inst, err := c.newInstance(ctx)
		if err != nil {
			b.Fatal(err)
		}
		insts = append(insts, inst)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(len(insts)), "heap-B/instance")

	// Linear memory of a pooled instance after a warm 1 KiB call.
	if _, err := c.Call(ctx, CallRequest{Export: abi.ExportExecute, Operation: "echo", Args: kib1}); err != nil {
		b.Fatal(err)
	}
	inst, err := c.pool.get(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(inst.mem.Size()), "linear-B/instance")
	b.ReportMetric(float64(inst.mem.Size()/65536), "pages/instance")
	c.pool.put(inst)
}

// BenchmarkDirectCallParallel is DirectCall/closeOnDone from GOMAXPROCS
// goroutines, each with its own module: the scaling baseline for
// WarmCallParallel.
func BenchmarkDirectCallParallel(b *testing.B) {
	var mu sync.Mutex
	b.SetBytes(int64(len(kib1)))
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		mod := directModule(b, true)
		mu.Unlock()
		ctx := context.Background()
		alloc := mod.ExportedFunction(abi.ExportAlloc)
		exec := mod.ExportedFunction(abi.ExportExecute)
		op := "echo"
		stack := make([]uint64, 4)
		stack[0] = uint64(len(op) + len(kib1))
		if err := alloc.CallWithStack(ctx, stack); err != nil {
			b.Error(err)
			return
		}
		ptr := uint32(stack[0])
		mod.Memory().Write(ptr, []byte(op))
		mod.Memory().Write(ptr+uint32(len(op)), kib1)
		for pb.Next() {
			stack[0], stack[1], stack[2], stack[3] = uint64(ptr), uint64(len(op)), uint64(ptr)+uint64(len(op)), uint64(len(kib1))
			if err := exec.CallWithStack(ctx, stack); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkHTTPCapability is the host side of one guest HTTP request:
// the capability's checks and request building (httpCap.do) plus the
// envelope the guest takes, against the same POST made with a plain
// net/http client, both to one local server answering a 744-byte JSON
// body (the size of a Stripe PaymentIntent) with keep-alive.
func BenchmarkHTTPCapability(b *testing.B) {
	body := []byte(`{"id":"pi_1",` + strings.Repeat(`"k":"vvvvvvvv",`, 48) + `"x":1}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_123")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	form := []byte("amount=2000&confirm=true&currency=usd&description=e2e&metadata%5Bconnhost_key%5D=k")
	hdr := []abi.Header{{Name: "Authorization", Value: "Bearer sk_test"}, {Name: "Stripe-Version", Value: "2024-06-20"},
		{Name: "Accept", Value: "application/json"}, {Name: "Content-Type", Value: "application/x-www-form-urlencoded"},
		{Name: "Idempotency-Key", Value: "k"}}
	b.Run("capability", func(b *testing.B) {
		opts := Options{}
		opts.EnsureDefaults()
		hc, err := newHTTPCap("bench", []string{srv.URL}, &opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(hc.close)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		req := abi.HTTPRequest{Method: "POST", URL: srv.URL + "/v1/payment_intents", Header: hdr, Body: form}
		b.ReportAllocs()
		for b.Loop() {
			resp := hc.do(ctx, req)
			if resp.Err != abi.HTTPOK || len(resp.AppendBinary(nil)) < len(body) {
				b.Fatalf("%v %s", resp.Err, resp.Message)
			}
		}
	})
	b.Run("net/http", func(b *testing.B) {
		client := &http.Client{}
		b.Cleanup(client.CloseIdleConnections)
		b.ReportAllocs()
		for b.Loop() {
			req, err := http.NewRequest("POST", srv.URL+"/v1/payment_intents", bytes.NewReader(form))
			if err != nil {
				b.Fatal(err)
			}
			for _, h := range hdr {
				req.Header.Set(h.Name, h.Value)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || len(got) != len(body) {
				b.Fatal(err)
			}
		}
	})
}
