package server

import (
	"strings"
	"testing"

	"github.com/connhost/connhost/internal/telemetry/otlp"
)

// TestConfigTelemetry: [telemetry] reaches otlp.Options with its header
// values read from the environment; without the table tracing is off;
// every bad value is an error with its line, a header's value is never
// written in the file nor printed.
func TestConfigTelemetry(t *testing.T) {
	env := func(k string) (string, bool) {
		if k == "OTLP_AUTH" {
			return "Bearer otlp-secret-value", true
		}
		return "", false
	}
	off, err := ParseConfig("connhost.toml", []byte("[server]\n"), env)
	if err != nil || off.Telemetry.Endpoint != "" {
		t.Fatalf("no [telemetry]: %+v %v", off.Telemetry, err)
	}
	c, err := ParseConfig("connhost.toml", []byte(`[telemetry]
endpoint = "https://otlp.example.com:4318"
headers_env = { authorization = "OTLP_AUTH" }
sampler = "parentbased_traceidratio"
sample_ratio = 0.25
service_name = "connhost-eu"
`), env)
	if err != nil {
		t.Fatal(err)
	}
	o := c.Telemetry.options()
	if o.Endpoint != "https://otlp.example.com:4318" || o.Headers["authorization"] != "Bearer otlp-secret-value" ||
		o.Sampler != otlp.SamplerRatio || o.SampleRatio != 0.25 || o.ServiceName != "connhost-eu" {
		t.Fatalf("options %+v", o)
	}
	if got := strings.Join(c.Telemetry.headerNames(), " "); got != "authorization from $OTLP_AUTH" || strings.Contains(got, "secret") {
		t.Errorf("header names for the log: %q", got)
	}
	if got := c.Telemetry.sampler(); got != "parentbased_traceidratio(0.25)" {
		t.Errorf("sampler for the log: %q", got)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"no endpoint", "[telemetry]\nsampler = \"parentbased_always_on\"\n", "[telemetry] needs endpoint"},
		{"bad endpoint", "[telemetry]\nendpoint = \"127.0.0.1:4318\"\n", `endpoint "127.0.0.1:4318": want an http or https URL`},
		{"unknown sampler", "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nsampler = \"always\"\n", `sampler "always": want parentbased_always_on`},
		{"ratio out of range", "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nsampler = \"parentbased_traceidratio\"\nsample_ratio = 2\n", "sample_ratio 2: want a fraction between 0 and 1"},
		{"ratio without its sampler", "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nsample_ratio = 0.5\n", "connhost.toml:3: sample_ratio is used by sampler = \"parentbased_traceidratio\" only"},
		{"unset header variable", "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nheaders_env = { authorization = \"NOT_SET\" }\n", "environment variable NOT_SET (headers_env.authorization) is not set"},
		{"unknown key", "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nheaders = { authorization = \"x\" }\n", "connhost.toml:3: unknown key headers in [telemetry] (known: endpoint, headers_env, sampler, sample_ratio, service_name)"},
		{"not a table", "telemetry = \"on\"\n", "connhost.toml:1: telemetry must be a table"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("connhost.toml", []byte(tt.text), env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}
