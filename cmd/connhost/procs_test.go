package main

import "testing"

// TestProcs: connhost adds spare Ps for the goroutines blocked in fsync,
// unless the environment chose the number.
func TestProcs(t *testing.T) {
	for _, tc := range []struct {
		envSet        bool
		current, want int
	}{
		{false, 2, 2 + spareProcs},
		{false, 16, 16 + spareProcs},
		{true, 2, 2},
		{true, 1, 1},
	} {
		if got := procs(tc.envSet, tc.current); got != tc.want {
			t.Errorf("procs(%v, %d) = %d, want %d", tc.envSet, tc.current, got, tc.want)
		}
	}
}
