// Package crash injects real process kills at named persistence boundaries.
//
// With CONNHOST_CRASH_AT=<point> (or <point>:<n>, the n-th time the point is
// reached) the process sends itself SIGKILL when it reaches that point: no
// deferred function, no flush, no graceful close runs, exactly as if the
// machine lost power after the last synced write. Crash tests start a real
// connhost process with the variable set, let it die, restart it on the same
// data directory and check what the provider saw.
//
// Only a program that calls [ArmFromEnv] (the connhost binary does, first
// thing in main) or [Arm] can be killed; importing the package arms
// nothing. When no point is armed, [At] costs one atomic load.
package crash

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// EnvVar is the environment variable that arms a crash point.
const EnvVar = "CONNHOST_CRASH_AT"

// The named crash points, in the order an execution reaches them.
const (
	BeforeIntent         = "before_intent"
	AfterIntent          = "after_intent"
	AfterApproval        = "after_approval"
	AfterDispatchRecord  = "after_dispatch_record"
	AfterPluginReturn    = "after_plugin_return"
	AfterOutcomeRecord   = "after_outcome_record"
	AfterReconcileReturn = "after_reconcile_return"
	// AfterAnswer is reached once the answer has left for the caller (exec
	// printed it; the HTTP API wrote it): a kill there, with unsynced
	// writes lost (LoseUnsyncedEnv), checks that what recovery re-derives
	// is what the caller was told.
	AfterAnswer = "after_answer"
)

// Points lists every crash point.
var Points = []string{
	BeforeIntent, AfterIntent, AfterApproval, AfterDispatchRecord,
	AfterPluginReturn, AfterOutcomeRecord, AfterReconcileReturn, AfterAnswer,
}

// LoseUnsyncedEnv, set to "1", makes the connhost binary open its
// executor's ledger so that a kill loses the writes not yet synced, as a
// power loss would: crash tests of lazy outcome durability.
const LoseUnsyncedEnv = "CONNHOST_LOSE_UNSYNCED"

// LoseUnsynced reports whether LoseUnsyncedEnv asks for it.
func LoseUnsynced() bool { return os.Getenv(LoseUnsyncedEnv) == "1" }

// ClockOffsetEnv, set to a duration ("24h30m"), runs the connhost binary's
// executor that far in the future: crash tests of the providers' key
// retention move a provider emulator's clock and the host's together,
// instead of waiting a day.
const ClockOffsetEnv = "CONNHOST_CLOCK_OFFSET"

// ClockOffset returns the offset ClockOffsetEnv asks for, 0 when it is
// unset, or an error for a value that is no positive duration.
func ClockOffset() (time.Duration, error) {
	v := os.Getenv(ClockOffsetEnv)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("crash: %s=%q: want a positive duration such as 24h30m", ClockOffsetEnv, v)
	}
	return d, nil
}

type loseUnsyncedKey struct{}

// WithLoseUnsynced returns ctx marked so that a Pebble ledger opened with
// it (ledger.Open, directly or through host.Open) holds its write-ahead
// log in memory until synced, and a SIGKILL loses the unsynced writes as a
// power loss would (a killed process otherwise leaves them to the kernel,
// which writes them out). Only code of this module can mark a context: the
// lossy disk is a test hook, not an option of the public API.
func WithLoseUnsynced(ctx context.Context) context.Context {
	return context.WithValue(ctx, loseUnsyncedKey{}, true)
}

// LosesUnsynced reports whether ctx is marked by WithLoseUnsynced.
func LosesUnsynced(ctx context.Context) bool {
	v, _ := ctx.Value(loseUnsyncedKey{}).(bool)
	return v
}

var (
	armed  atomic.Bool
	point  string
	target int64 = 1
	hits   atomic.Int64
)

// Arm sets the crash point from a spec "<point>" or "<point>:<n>"; an empty
// spec disarms. Importing this package arms nothing: the connhost binary
// calls ArmFromEnv at the start of main, so no other program that imports
// the executor can be killed by a stray variable. It is not safe to call
// concurrently with At.
func Arm(spec string) error {
	armed.Store(false)
	hits.Store(0)
	if spec == "" {
		return nil
	}
	name, nth, hasN := strings.Cut(spec, ":")
	n := int64(1)
	if hasN {
		v, err := strconv.ParseInt(nth, 10, 64)
		if err != nil || v < 1 {
			return fmt.Errorf("crash: %s=%q: count must be a positive integer", EnvVar, spec)
		}
		n = v
	}
	known := false
	for _, p := range Points {
		known = known || p == name
	}
	if !known {
		return fmt.Errorf("crash: %s=%q: unknown point (known: %s)", EnvVar, spec, strings.Join(Points, ", "))
	}
	point, target = name, n
	armed.Store(true)
	return nil
}

// hook, when set, replaces the kill; see SetHook.
var hook atomic.Pointer[func(point string)]

// SetHook makes every crash point call fn instead of killing the process,
// for in-process tests that stop an executor at a point (fn typically
// panics with a sentinel the test recovers). A nil fn removes the hook. It
// returns a function restoring the previous hook.
func SetHook(fn func(point string)) (restore func()) {
	prev := hook.Load()
	if fn == nil {
		hook.Store(nil)
	} else {
		hook.Store(&fn)
	}
	return func() { hook.Store(prev) }
}

// armedAt reports whether reaching name could stop the process: name is
// the armed point, or a hook is set (one atomic load when unset).
func armedAt(name string) bool {
	return hook.Load() != nil || (armed.Load() && name == point)
}

// AtIf is At for a point whose meaning holds only under a condition that
// costs work to establish (a ledger read): cond runs only while name could
// stop the process, and At(name) follows when it answers true. cond must
// only observe: whatever it answers, the caller goes on the same way, so
// an armed point changes nothing but where the process may die.
func AtIf(name string, cond func() bool) {
	if armedAt(name) && cond() {
		At(name)
	}
}

// At kills the process with SIGKILL if name is the armed point and this is
// the n-th time it is reached. It never returns in that case.
func At(name string) {
	if h := hook.Load(); h != nil {
		(*h)(name)
		return
	}
	if !armed.Load() || name != point {
		return
	}
	if hits.Add(1) != target {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not deliverable to a handler; wait for it.
}

// Environ returns base (typically os.Environ()) without any crash point,
// plus EnvVar=spec when spec is not empty: the environment of a child
// process that must die at spec, or must not die at all.
func Environ(base []string, spec string) []string {
	env := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, EnvVar+"=") {
			env = append(env, kv)
		}
	}
	if spec != "" {
		env = append(env, EnvVar+"="+spec)
	}
	return env
}

// ArmFromEnv arms the point named by the CONNHOST_CRASH_AT environment
// variable (see Arm).
func ArmFromEnv() error { return Arm(os.Getenv(EnvVar)) }
