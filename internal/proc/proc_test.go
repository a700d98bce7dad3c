package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/internal/crash"
)

// The tests run this test binary as the child (the helper-process
// pattern): helperEnv selects what it does instead of running tests.
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		helper(h)
		return
	}
	os.Exit(m.Run())
}

func helper(what string) {
	switch {
	case strings.HasPrefix(what, "exit:"):
		var code int
		fmt.Sscan(strings.TrimPrefix(what, "exit:"), &code)
		fmt.Println("out")
		fmt.Fprintln(os.Stderr, "err")
		os.Exit(code)
	case what == "env":
		v, set := os.LookupEnv(crash.EnvVar)
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"crash_at": v, "set": set})
	case what == "selfkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		block()
	case what == "line":
		fmt.Println(`{"api":"http://127.0.0.1:1"}`)
		fmt.Println(`{"api":"second"}`)
		block()
	case what == "partial":
		fmt.Print(`{"api":`)
		os.Exit(0)
	case what == "badline":
		fmt.Println("listening on 127.0.0.1:1")
		block()
	case what == "block":
		block()
	case what == "ignoreterm":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println(`{}`)
		block()
	case what == "grandchild":
		// A grandchild in the same process group, holding stderr open.
		self, _ := os.Executable()
		gc := exec.Command(self)
		gc.Env = append(os.Environ(), helperEnv+"=block")
		gc.Stderr = os.Stderr
		if err := gc.Start(); err != nil {
			os.Exit(3)
		}
		fmt.Printf("{\"pid\":%d}\n", gc.Process.Pid)
		block()
	}
}

// block sleeps until the process is killed (a bare select{} would be
// reported as a deadlock and end the process).
func block() {
	for {
		time.Sleep(time.Hour)
	}
}

func helperCmd(t *testing.T, what string) Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Cmd{Path: self, Env: append(os.Environ(), helperEnv+"="+what)}
}

// start starts a helper and kills it at the end of the test.
func start(t *testing.T, c Cmd) *Process {
	t.Helper()
	p, err := Start(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}

func TestRunExitCodeAndOutput(t *testing.T) {
	res, err := Run(t.Context(), helperCmd(t, "exit:3"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != 3 || res.Signal != 0 || res.Killed() || res.String() != "exit 3" {
		t.Errorf("result %+v (%s), want exit 3", res, res)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("stdout %q, stderr %q", res.Stdout, res.Stderr)
	}
}

func TestRunOutputToWriters(t *testing.T) {
	var out, errb strings.Builder
	c := helperCmd(t, "exit:0")
	c.Stdout, c.Stderr = &out, &errb
	res, err := Run(t.Context(), c)
	if err != nil || res.Code != 0 {
		t.Fatalf("%s: %v", res, err)
	}
	if out.String() != "out\n" || errb.String() != "err\n" || res.Stdout != nil || res.Stderr != nil {
		t.Errorf("writers got %q %q; result kept %q %q", out.String(), errb.String(), res.Stdout, res.Stderr)
	}
}

// TestRunKilledBySIGKILL: a child that dies by SIGKILL (as one that
// reaches its crash point does) is a Result, told apart from an exit.
func TestRunKilledBySIGKILL(t *testing.T) {
	res, err := Run(t.Context(), helperCmd(t, "selfkill"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Killed() || res.Code != -1 || res.String() != "killed by SIGKILL" {
		t.Errorf("result %+v (%s), want killed by SIGKILL", res, res)
	}
}

// TestCrashAt: the child sees exactly the crash point its caller chose,
// never one inherited from the caller's environment.
func TestCrashAt(t *testing.T) {
	t.Setenv(crash.EnvVar, crash.AfterIntent)
	for _, tc := range []struct {
		name    string
		crashAt string
		env     []string
	}{
		{name: "inherited point dropped"},
		{name: "chosen point", crashAt: crash.AfterPluginReturn + ":2"},
		{name: "point in Env dropped", env: []string{crash.EnvVar + "=" + crash.BeforeIntent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := helperCmd(t, "env")
			c.Env = append(c.Env, tc.env...)
			c.CrashAt = tc.crashAt
			res, err := Run(t.Context(), c)
			if err != nil || res.Code != 0 {
				t.Fatalf("%s: %v", res, err)
			}
			var got struct {
				CrashAt string `json:"crash_at"`
				Set     bool   `json:"set"`
			}
			if err := json.Unmarshal(res.Stdout, &got); err != nil {
				t.Fatal(err)
			}
			if got.CrashAt != tc.crashAt || got.Set != (tc.crashAt != "") {
				t.Errorf("child saw %s=%q (set %t), want %q", crash.EnvVar, got.CrashAt, got.Set, tc.crashAt)
			}
		})
	}
}

// TestRunContextKillsTheChild: a context that ends first kills the child
// and says so.
func TestRunContextKillsTheChild(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p := start(t, helperCmd(t, "block"))
	cancel()
	res, err := p.Wait(ctx)
	if !errors.Is(err, context.Canceled) || !res.Killed() || !p.Exited() {
		t.Fatalf("Wait after cancel: %s, %v (exited %t)", res, err, p.Exited())
	}
}

// TestKillReachesTheGroup: Kill ends what the child started too. The
// grandchild holds the write end of a pipe; the read end sees EOF only
// once every holder is dead.
func TestKillReachesTheGroup(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := helperCmd(t, "grandchild")
	c.Stderr = w
	p := start(t, c)
	w.Close()
	var line struct{ PID int }
	if err := p.DecodeLine(t.Context(), &line); err != nil || line.PID == 0 {
		t.Fatalf("grandchild pid: %+v %v", line, err)
	}
	p.Kill()
	if res, _ := p.Wait(t.Context()); !res.Killed() {
		t.Errorf("child %s, want killed by SIGKILL", res)
	}
	// A bound for a hung test, not a measurement: EOF follows the kill
	// at once when the grandchild died with the group.
	_ = r.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadAll(r); err != nil {
		_ = syscall.Kill(line.PID, syscall.SIGKILL)
		t.Fatalf("the grandchild outlived Kill: %v", err)
	}
}

func TestStop(t *testing.T) {
	t.Run("ends with SIGTERM", func(t *testing.T) {
		p := start(t, helperCmd(t, "block"))
		p.Stop(time.Hour)
		res, err := p.Wait(t.Context())
		if err != nil || res.Signal != syscall.SIGTERM || res.String() != "died by SIGTERM" {
			t.Errorf("%+v (%s) %v, want died by SIGTERM", res, res, err)
		}
	})
	t.Run("SIGKILL after the grace", func(t *testing.T) {
		p := start(t, helperCmd(t, "ignoreterm"))
		var v struct{}
		if err := p.DecodeLine(t.Context(), &v); err != nil { // SIGTERM is ignored from here on
			t.Fatal(err)
		}
		p.Stop(time.Millisecond)
		if res, _ := p.Wait(t.Context()); !res.Killed() {
			t.Errorf("%s, want killed by SIGKILL", res)
		}
	})
}

func TestDecodeLine(t *testing.T) {
	p := start(t, helperCmd(t, "line"))
	for range 2 {
		var v struct{ API string }
		if err := p.DecodeLine(t.Context(), &v); err != nil || v.API != "http://127.0.0.1:1" {
			t.Fatalf("startup line: %+v %v", v, err)
		}
	}
	if p.Exited() {
		t.Error("DecodeLine ended the process")
	}
}

func TestDecodeLineErrors(t *testing.T) {
	t.Run("ended before a whole line", func(t *testing.T) {
		p := start(t, helperCmd(t, "partial"))
		var v any
		err := p.DecodeLine(t.Context(), &v)
		if err == nil || !strings.Contains(err.Error(), "ended (exit 0) before its first line") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		p := start(t, helperCmd(t, "badline"))
		var v any
		err := p.DecodeLine(t.Context(), &v)
		if err == nil || !strings.Contains(err.Error(), "listening on") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("context ends first", func(t *testing.T) {
		p := start(t, helperCmd(t, "block"))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		var v any
		if err := p.DecodeLine(ctx, &v); !errors.Is(err, context.Canceled) {
			t.Errorf("got %v", err)
		}
		if p.Exited() {
			t.Error("the process was ended")
		}
	})
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(Cmd{}); err == nil {
		t.Error("no path: no error")
	}
	if _, err := Run(t.Context(), Cmd{Path: "/nonexistent/connhost"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing binary: %v", err)
	}
}
