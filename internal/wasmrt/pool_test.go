package wasmrt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Prewarm fills the pool up to n instances, never beyond limits.instances,
// and never more than the cap with calls running beside it.
func TestPrewarm(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo"))
	m.Limits.Instances = 3
	c := mustLoad(t, rt, m, lo)
	ctx := context.Background()
	if st := c.Stats(); st.Created != 1 || st.Idle != 1 {
		t.Fatalf("after Load: %+v", st)
	}
	if err := c.Prewarm(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Created != 2 || st.Idle != 2 {
		t.Fatalf("after Prewarm(2): %+v", st)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.Call(ctx, execute("echo", `{}`)); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := c.Prewarm(ctx, 10); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if st := c.Stats(); st.Idle+st.Busy > 3 || st.Idle != 3 {
		t.Fatalf("after calls and Prewarm(10) beside them: %+v (cap 3)", st)
	}
}

// waiting returns how many calls wait for a slot of c's pool.
func waiting(c *Connector) int {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return len(c.pool.waiters)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestPoolSharesFairly: the slots of a connector's pool go to namespaces
// fairly. tenant-b holds both slots and has three more calls waiting;
// tenant-a's call, which came after them, gets the first slot that frees
// (its namespace holds none), and tenant-b's waiting calls get the rest in
// the order they came. A reservation that may not wait fails at once
// while every slot is taken, one with a bounded wait fails once it has
// passed, both with ErrBusy; a call on a reserved slot runs on the real
// module and gives the slot back.
func TestPoolSharesFairly(t *testing.T) {
	rt, _ := newTestRuntime(t, Options{})
	m, lo := testManifest(t, "noop", "noop", ops("echo"))
	m.Limits.Instances = 2
	c := mustLoad(t, rt, m, lo)
	ctx := context.Background()

	var held []*Slot
	for range 2 {
		s, err := c.Reserve(ctx, "tenant-b", -1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	granted := make(chan string, 8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var later []*Slot
	reserve := func(ns, name string) {
		wg.Go(func() {
			s, err := c.Reserve(ctx, ns, 0)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			later = append(later, s)
			mu.Unlock()
			granted <- name
		})
	}
	for i := range 3 {
		reserve("tenant-b", fmt.Sprintf("b%d", i))
		waitFor(t, "tenant-b's waiting call", func() bool { return waiting(c) == i+1 })
	}
	reserve("tenant-a", "a")
	waitFor(t, "tenant-a's waiting call", func() bool { return waiting(c) == 4 })

	if _, err := c.Reserve(ctx, "tenant-c", -1); !errors.Is(err, ErrBusy) {
		t.Fatalf("a reservation that may not wait, every slot taken: %v, want ErrBusy", err)
	}
	start := time.Now()
	if _, err := c.Reserve(ctx, "tenant-c", 50*time.Millisecond); !errors.Is(err, ErrBusy) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("a reservation with a bounded wait: %v after %v, want ErrBusy after the wait", err, time.Since(start))
	}

	held[0].Release()
	if first := <-granted; first != "a" {
		t.Fatalf("the first slot freed went to %s, want tenant-a's call (it held none)", first)
	}
	held[1].Release()
	held[0].Release() // twice: nothing more
	if next := <-granted; next != "b0" {
		t.Fatalf("the next slot went to %s, want tenant-b's earliest waiting call", next)
	}
	mu.Lock()
	for _, s := range later {
		s.Release()
	}
	later = nil
	mu.Unlock()
	wg.Wait()
	if rest := []string{<-granted, <-granted}; !(rest[0] == "b1" && rest[1] == "b2" || rest[0] == "b2" && rest[1] == "b1") {
		t.Fatalf("then granted %v, want tenant-b's other two", rest)
	}
	mu.Lock()
	for _, s := range later {
		s.Release()
	}
	mu.Unlock()

	s, err := c.Reserve(ctx, "tenant-a", -1)
	if err != nil {
		t.Fatal(err)
	}
	req := execute("echo", `{}`)
	req.Slot = s
	if _, err := c.Call(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, req); err == nil {
		t.Fatal("a slot served a second call")
	}
	c.pool.mu.Lock()
	taken := c.pool.taken
	c.pool.mu.Unlock()
	if st := c.Stats(); st.Busy != 0 || taken != 0 {
		t.Fatalf("after every slot was given back: %+v, %d taken", st, taken)
	}
}
