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

func TestArmed(t *testing.T) {
	defer Arm("")
	if Armed(BeforeIntent) {
		t.Fatal("armed with nothing set")
	}
	if err := Arm("before_intent:2"); err != nil {
		t.Fatal(err)
	}
	if !Armed(BeforeIntent) || Armed(AfterIntent) {
		t.Fatal("Armed does not follow the armed point")
	}
	Arm("")
	restore := SetHook(func(string) {})
	defer restore()
	if !Armed(AfterIntent) {
		t.Fatal("a hook arms every point")
	}
}
