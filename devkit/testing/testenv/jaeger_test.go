package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The version testenv builds must be the one tools/jaeger pins, and the
// .ci/run step must name the same binary.
func TestJaegerVersionMatchesToolsModule(t *testing.T) {
	dir, err := toolDir("jaeger")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/jaegertracing/jaeger " + JaegerVersion; !strings.Contains(string(b), want) {
		t.Fatalf("tools/jaeger/go.mod does not require %q; update JaegerVersion or the pin", want)
	}
	if !strings.Contains(string(b), "tool github.com/jaegertracing/jaeger/cmd/jaeger") {
		t.Fatal("tools/jaeger/go.mod lost its tool directive")
	}
	ci, err := os.ReadFile(filepath.Join(dir, "..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "jaeger-"+JaegerVersion) {
		t.Errorf(".ci/run does not build jaeger-%s", JaegerVersion)
	}
}

// A started Jaeger accepts spans and answers for an unknown trace with
// none.
func TestJaegerStarts(t *testing.T) {
	j := StartJaeger(t)
	spans, err := j.Trace("4bf92f3577b34da6a3ce929d0e0e4736")
	if err != nil || len(spans) != 0 {
		t.Fatalf("unknown trace: %d spans, %v", len(spans), err)
	}
}
