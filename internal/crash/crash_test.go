package crash

import (
	"slices"
	"testing"
)

func TestEnvironReplacesTheCrashPoint(t *testing.T) {
	base := []string{"A=1", EnvVar + "=before_intent", "B=2"}
	if got, want := Environ(base, "after_plugin_return:2"), []string{"A=1", "B=2", EnvVar + "=after_plugin_return:2"}; !slices.Equal(got, want) {
		t.Fatalf("Environ = %v, want %v", got, want)
	}
	if got, want := Environ(base, ""), []string{"A=1", "B=2"}; !slices.Equal(got, want) {
		t.Fatalf("Environ without a point = %v, want %v", got, want)
	}
}

func TestArmRefusesUnknownPointsAndCounts(t *testing.T) {
	defer Arm("")
	for _, spec := range []string{"nowhere", "after_intent:0", "after_intent:x"} {
		if err := Arm(spec); err == nil {
			t.Errorf("Arm(%q) accepted", spec)
		}
	}
	if err := Arm("after_intent:3"); err != nil || point != AfterIntent || target != 3 {
		t.Fatalf("Arm(after_intent:3) = %v, point %q target %d", err, point, target)
	}
}

func TestHookReplacesTheKill(t *testing.T) {
	var seen []string
	restore := SetHook(func(p string) { seen = append(seen, p) })
	At(BeforeIntent)
	At(AfterOutcomeRecord)
	restore()
	if !slices.Equal(seen, []string{BeforeIntent, AfterOutcomeRecord}) {
		t.Fatalf("hook saw %v", seen)
	}
}

// TestAtIf: the condition runs only while the point could stop the
// process (armed there, or a hook set), and the point is reached only when
// it holds.
func TestAtIf(t *testing.T) {
	defer Arm("")
	ran := 0
	cond := func(v bool) func() bool { return func() bool { ran++; return v } }
	AtIf(BeforeIntent, cond(true))
	if ran != 0 {
		t.Fatal("the condition ran with nothing armed")
	}
	if err := Arm("after_intent"); err != nil {
		t.Fatal(err)
	}
	AtIf(BeforeIntent, cond(true))
	if ran != 0 {
		t.Fatal("the condition ran for a point that is not armed")
	}
	Arm("")
	var seen []string
	restore := SetHook(func(p string) { seen = append(seen, p) })
	defer restore()
	AtIf(AfterIntent, cond(false))
	AtIf(BeforeIntent, cond(true))
	if ran != 2 || !slices.Equal(seen, []string{BeforeIntent}) {
		t.Fatalf("with a hook: the condition ran %d times, the hook saw %v", ran, seen)
	}
}
