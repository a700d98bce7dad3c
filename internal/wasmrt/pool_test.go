package wasmrt

import (
	"context"
	"sync"
	"testing"
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
