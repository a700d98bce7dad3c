// Package otlp sets up connhost's tracing: the OpenTelemetry SDK's tracer
// provider with its sampler and batching span processor, exporting over
// OTLP/HTTP (protobuf) to a collector or a tracing backend, and hands it to
// internal/telemetry (telemetry.Enable). `connhost serve` configures it from
// connhost.toml's [telemetry] table.
//
// It is the only package that imports the SDK and the exporter (the
// dependency test, devkit/testing/depcheck, says so): the host
// package and everything a Go program embedding it imports carry the
// OpenTelemetry API only.
package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/connhost/connhost/internal/telemetry"
)

// Samplers, named as OTEL_TRACES_SAMPLER names them. Each follows the
// decision of a caller that sent a trace context (parent-based); they
// differ in the traces connhost starts itself (a call that came without
// one, a recovery pass's takeover).
const (
	// SamplerAlwaysOn records every trace.
	SamplerAlwaysOn = "parentbased_always_on"
	// SamplerRatio records the fraction Options.SampleRatio of new traces.
	SamplerRatio = "parentbased_traceidratio"
	// SamplerAlwaysOff records a trace only when the caller's context says
	// it is sampled.
	SamplerAlwaysOff = "parentbased_always_off"
)

// Errors.
var (
	// ErrOptions: the options are invalid (Validate says which).
	ErrOptions = errors.New("otlp: invalid telemetry options")
)

// Options configures Setup. Zero values take the documented defaults
// (EnsureDefaults).
type Options struct {
	// Endpoint is the OTLP/HTTP endpoint spans are exported to: an http or
	// https URL, "http://127.0.0.1:4318" (traces are posted to its
	// /v1/traces) or the full URL of the traces resource when it has a
	// path. Required: with none, tracing is off and Setup is not called.
	Endpoint string
	// Headers are sent with every export request (e.g. an authorization
	// header a hosted backend asks for). connhost.toml names the
	// environment variables that hold their values, never the values.
	// The default value is none.
	Headers map[string]string
	// Sampler is one of SamplerAlwaysOn, SamplerRatio and
	// SamplerAlwaysOff. The default value is SamplerAlwaysOn.
	Sampler string
	// SampleRatio is SamplerRatio's fraction of new traces, in [0, 1].
	// Ignored by the other samplers.
	SampleRatio float64
	// ServiceName is the service.name of every span. The default value is
	// "connhost".
	ServiceName string
	// ServiceVersion is service.version (the build's version). The
	// default value is none.
	ServiceVersion string
	// InstanceID is service.instance.id (a fleet node's id). The default
	// value is none.
	InstanceID string
	// Logger receives the exporter's failures (a backend that is down:
	// spans are dropped, calls are not slowed). The default value is
	// slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills zero fields with their default values.
func (o *Options) EnsureDefaults() {
	if o.Sampler == "" {
		o.Sampler = SamplerAlwaysOn
	}
	if o.ServiceName == "" {
		o.ServiceName = "connhost"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Validate reports every problem of o at once.
func (o *Options) Validate() error {
	var errs []error
	if _, err := tracesURL(o.Endpoint); err != nil {
		errs = append(errs, err)
	}
	switch o.Sampler {
	case SamplerAlwaysOn, SamplerAlwaysOff, "":
	case SamplerRatio:
		if !(o.SampleRatio >= 0 && o.SampleRatio <= 1) {
			errs = append(errs, fmt.Errorf("sample_ratio %v: want a fraction between 0 and 1", o.SampleRatio))
		}
	default:
		errs = append(errs, fmt.Errorf("sampler %q: want %s, %s or %s", o.Sampler, SamplerAlwaysOn, SamplerRatio, SamplerAlwaysOff))
	}
	for k := range o.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			errs = append(errs, fmt.Errorf("header name %q is not a valid HTTP header name", k))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrOptions, errors.Join(errs...))
	}
	return nil
}

// tracesURL is the URL spans are posted to.
func tracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("endpoint %q: want an http or https URL such as \"http://127.0.0.1:4318\", without user info or query", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Setup starts exporting spans as opts says and turns tracing on
// (telemetry.Enable). The returned shutdown turns it off, exports what is
// still queued (within ctx's deadline) and stops the exporter; call it
// once, before the process exits. Spans are batched and exported in the
// background: a backend that is slow or down never slows a call (spans
// beyond the queue are dropped, and the failure is logged).
func Setup(ctx context.Context, opts Options) (shutdown func(context.Context) error, err error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	endpoint, _ := tracesURL(opts.Endpoint)
	eo := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	if len(opts.Headers) > 0 {
		eo = append(eo, otlptracehttp.WithHeaders(opts.Headers))
	}
	exp, err := otlptracehttp.New(ctx, eo...)
	if err != nil {
		return nil, fmt.Errorf("otlp: exporter: %w", err)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", opts.ServiceName)}
	if opts.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", opts.ServiceVersion))
	}
	if opts.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", opts.InstanceID))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(Sampler(opts.Sampler, opts.SampleRatio)),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	logger := opts.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("telemetry: exporting spans failed; they are dropped, calls are not affected", "endpoint", endpoint, "err", err)
	}))
	telemetry.Enable(tp)
	return func(ctx context.Context) error {
		telemetry.Enable(nil)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		return tp.Shutdown(ctx)
	}, nil
}

// Sampler returns the SDK sampler named name (one of the Sampler
// constants; ratio is SamplerRatio's fraction).
func Sampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case SamplerRatio:
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	case SamplerAlwaysOff:
		return sdktrace.ParentBased(sdktrace.NeverSample())
	default:
		return sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
}
