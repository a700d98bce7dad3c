package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// JaegerVersion is the Jaeger release tests read traces from. It must
// match the tool pinned in tools/jaeger/go.mod.
const JaegerVersion = "v1.75.0"

// EnvJaegerBin names a prebuilt Jaeger binary to use instead of building
// one. Without it, and when it cannot be built, a test fails under CI and,
// with CONNHOST_SKIP_JAEGER=1 and CI unset, is skipped.
const (
	EnvJaegerBin  = "CONNHOST_JAEGER_BIN"
	EnvSkipJaeger = "CONNHOST_SKIP_JAEGER"
)

// Jaeger is a running Jaeger all-in-one (OTLP receiver, in-memory
// storage, query API).
type Jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver
	// (http://127.0.0.1:PORT; traces are posted to /v1/traces).
	OTLP string
	// Query is the base URL of its query API and UI.
	Query string
}

// JaegerBin returns the path of the pinned Jaeger binary, building it on
// first use (cached in the user cache dir like Mailpit's; a cold build
// takes minutes).
func JaegerBin(tb testing.TB) string {
	tb.Helper()
	p, err := findOrBuildTool(pinnedTool{name: "Jaeger", dir: "jaeger", version: JaegerVersion, envBin: EnvJaegerBin,
		pkg: "github.com/jaegertracing/jaeger/cmd/jaeger", timeout: 30 * time.Minute})
	if err != nil {
		if os.Getenv(EnvSkipJaeger) == "1" && os.Getenv("CI") == "" {
			tb.Skipf("testenv: real Jaeger unavailable and %s=1: %v", EnvSkipJaeger, err)
		}
		tb.Fatalf("testenv: real Jaeger unavailable (set %s to a prebuilt binary; locally %s=1 skips): %v", EnvJaegerBin, EnvSkipJaeger, err)
	}
	return p
}

// jaegerConfig is the all-in-one configuration with every listener on a
// loopback port of the test's (the defaults are fixed ports that parallel
// test runs would fight over) and no telemetry of Jaeger's own.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    enable_tracing: false
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 10000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// StartJaeger starts the pinned Jaeger on free loopback ports with empty
// in-memory storage and waits until its receiver and query API answer.
// It is stopped in tb.Cleanup (SIGTERM, then SIGKILL after 5 s).
func StartJaeger(tb testing.TB) *Jaeger {
	tb.Helper()
	bin := JaegerBin(tb)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a freed port can be taken before Jaeger binds it
		j, err := startJaeger(tb, bin)
		if err == nil {
			return j
		}
		lastErr = err
	}
	tb.Fatalf("testenv: starting Jaeger: %v", lastErr)
	return nil
}

func startJaeger(tb testing.TB, bin string) (*Jaeger, error) {
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, jaegerConfig, ports[0], ports[1], ports[2]), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "jaeger.log")
	cmd := exec.Command(bin, "--config", cfg)
	// Jaeger reads OTEL_* and JAEGER_* variables; keep the caller's from
	// changing it.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "JAEGER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	exited, stop, err := startLogged(cmd, logPath)
	if err != nil {
		return nil, err
	}
	j := &Jaeger{Query: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), OTLP: fmt.Sprintf("http://127.0.0.1:%d", ports[2])}
	if err := j.waitReady(exited, 60*time.Second); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w\njaeger log:\n%s", err, log)
	}
	tb.Cleanup(stop)
	return j, nil
}

// waitReady waits until the query API lists services and the OTLP
// receiver answers (an empty export is accepted).
func (j *Jaeger) waitReady(exited <-chan struct{}, timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-exited:
			return errors.New("jaeger exited before it was ready")
		default:
		}
		var lastErr error
		resp, err := client.Get(j.Query + "/api/services")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("query API: %s", resp.Status)
			}
		}
		if err == nil {
			resp, err = client.Post(j.OTLP+"/v1/traces", "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("OTLP receiver: %s", resp.Status)
				}
			}
		}
		if err == nil {
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("jaeger not ready after %s (last error: %v)", timeout, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// JaegerSpan is a span as Jaeger's query API answers it.
type JaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"`
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
	// Service is the service.name of the span's process.
	Service string `json:"-"`
}

// Parent is the span id of the span's parent (its CHILD_OF reference),
// "" for a root.
func (s JaegerSpan) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Links are the span ids of its FOLLOWS_FROM references (OTLP links).
func (s JaegerSpan) Links() []string {
	var out []string
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" {
			out = append(out, r.SpanID)
		}
	}
	return out
}

// Tag returns the span's attribute key as text ("" if it has none).
func (s JaegerSpan) Tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace returns the spans Jaeger holds of the trace traceID (32 hex
// digits), nil while it holds none.
func (j *Jaeger) Trace(traceID string) ([]JaegerSpan, error) {
	resp, err := http.Get(j.Query + "/api/traces/" + traceID)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %s", traceID, resp.Status)
	}
	var body struct {
		Data []struct {
			Spans     []JaegerSpan `json:"spans"`
			Processes map[string]struct {
				ServiceName string `json:"serviceName"`
			} `json:"processes"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	var spans []JaegerSpan
	for _, d := range body.Data {
		for _, s := range d.Spans {
			s.Service = d.Processes[s.ProcessID].ServiceName
			spans = append(spans, s)
		}
	}
	return spans, nil
}
