package server

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/connhost/connhost/internal/buildinfo"
	"github.com/connhost/connhost/internal/telemetry"
	"github.com/connhost/connhost/internal/telemetry/otlp"
)

// TelemetryConfig is the [telemetry] table: traces exported over OTLP/HTTP
// (see docs/telemetry.md).
//
//	[telemetry]
//	endpoint = "http://127.0.0.1:4318"  # an OTLP/HTTP receiver (a collector, Jaeger, a hosted backend)
//	headers_env = { authorization = "OTLP_AUTH" }  # export request headers, each value from an environment variable
//	sampler = "parentbased_always_on"   # or parentbased_traceidratio (with sample_ratio), parentbased_always_off
//	sample_ratio = 0.1                  # parentbased_traceidratio: the fraction of new traces recorded
//	service_name = "connhost"           # service.name of the spans
//
// endpoint is required for tracing: without a [telemetry] table (the
// default) or without endpoint, tracing is off and costs nothing. Every
// sampler follows the decision of a caller that sent a trace context
// (traceparent in HTTP headers or MCP _meta); they differ on traces
// connhost starts itself. The default sampler is parentbased_always_on,
// the default service_name "connhost". A header's value is never written
// in the file: headers_env names the variable that holds it, and a
// variable that is not set is an error at start.
type TelemetryConfig struct {
	Endpoint    string
	Headers     map[string]string
	HeadersEnv  map[string]string
	Sampler     string
	SampleRatio float64
	ServiceName string
}

// telemetryKeys are the keys of [telemetry].
var telemetryKeys = []string{"endpoint", "headers_env", "sampler", "sample_ratio", "service_name"}

// parseTelemetry reads the [telemetry] table t.
func parseTelemetry(t map[string]any, env func(string) (string, bool), bad func(key, format string, args ...any)) TelemetryConfig {
	var c TelemetryConfig
	ratioSet := false
	for k, v := range t {
		key := "telemetry." + k
		switch k {
		case "endpoint", "sampler", "service_name":
			s, ok := v.(string)
			if !ok || s == "" {
				bad(key, "%s must be a non-empty string", key)
			}
			switch k {
			case "endpoint":
				c.Endpoint = s
			case "sampler":
				c.Sampler = s
			default:
				c.ServiceName = s
			}
		case "sample_ratio":
			switch n := v.(type) {
			case float64:
				c.SampleRatio = n
			case int64:
				c.SampleRatio = float64(n)
			default:
				bad(key, "sample_ratio must be a number between 0 and 1")
			}
			ratioSet = true
		case "headers_env":
			h, ok := v.(map[string]any)
			if !ok {
				bad(key, "headers_env must be a table of header = \"ENV_VAR\" (e.g. { authorization = \"OTLP_AUTH\" })")
				continue
			}
			c.Headers, c.HeadersEnv = map[string]string{}, map[string]string{}
			names := make([]string, 0, len(h))
			for name := range h {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				variable, _ := h[name].(string)
				if variable == "" {
					bad(key, "headers_env.%s must name an environment variable", name)
					continue
				}
				if val, msg := envValue(env, variable); msg != "" {
					bad(key, "environment variable %s (headers_env.%s) %s", variable, name, msg)
				} else {
					c.Headers[name], c.HeadersEnv[name] = val, variable
				}
			}
		default:
			bad(key, "unknown key %s in [telemetry] (known: %s)", k, strings.Join(telemetryKeys, ", "))
		}
	}
	if len(t) > 0 && c.Endpoint == "" {
		bad("telemetry", "[telemetry] needs endpoint, the OTLP/HTTP receiver spans are exported to (e.g. \"http://127.0.0.1:4318\")")
	}
	if ratioSet && c.Sampler != otlp.SamplerRatio {
		bad("telemetry.sample_ratio", "sample_ratio is used by sampler = %q only", otlp.SamplerRatio)
	}
	if c.Endpoint != "" {
		o := c.options()
		if err := o.Validate(); err != nil {
			bad("telemetry", "%s", strings.TrimPrefix(err.Error(), otlp.ErrOptions.Error()+": "))
		}
	}
	return c
}

// options are the otlp.Options of c (without the logger and the build).
func (c TelemetryConfig) options() otlp.Options {
	return otlp.Options{Endpoint: c.Endpoint, Headers: c.Headers, Sampler: c.Sampler, SampleRatio: c.SampleRatio, ServiceName: c.ServiceName}
}

// sampler is the sampler in force, with its ratio.
func (c TelemetryConfig) sampler() string {
	switch c.Sampler {
	case "":
		return otlp.SamplerAlwaysOn
	case otlp.SamplerRatio:
		return fmt.Sprintf("%s(%g)", c.Sampler, c.SampleRatio)
	}
	return c.Sampler
}

// headerNames names the export headers and their variables, never their
// values.
func (c TelemetryConfig) headerNames() []string {
	hs := []string{}
	for name, v := range c.HeadersEnv {
		hs = append(hs, name+" from $"+v)
	}
	sort.Strings(hs)
	return hs
}

// StartTelemetry exports traces as [telemetry] says
// (internal/telemetry/otlp) and returns what stops it (exporting what is
// queued) and logger, whose records made with a traced context name
// trace_id and span_id. New calls it when tc has an endpoint; connhost
// mcp, which serves no Server, calls it itself.
func StartTelemetry(ctx context.Context, tc TelemetryConfig, logger *slog.Logger) (stop func(), traced *slog.Logger, err error) {
	o := tc.options()
	o.Logger, o.ServiceVersion = logger, buildinfo.Read().Short()
	shutdown, err := otlp.Setup(ctx, o)
	if err != nil {
		return nil, nil, fmt.Errorf("[telemetry]: %w", err)
	}
	logger.Info("telemetry: exporting traces over OTLP/HTTP", "endpoint", o.Endpoint, "sampler", tc.sampler(), "headers", tc.headerNames())
	return func() {
		if err := shutdown(context.WithoutCancel(ctx)); err != nil {
			logger.Warn("telemetry: flushing the last spans failed", "err", err)
		}
	}, slog.New(telemetry.LogHandler(logger.Handler())), nil
}
