package wasmrt

import (
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/internal/telemetry"
)

// endRequest ends the span of one provider request with the HTTP client
// conventions' attributes: method, server address and port, scheme, and
// the response status or the failure's kind. The path, query, headers and
// bodies are not recorded: they carry the call's arguments and the
// connector's credentials.
func endRequest(span trace.Span, method string, u *url.URL, resp abi.HTTPResponse) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	span.SetAttributes(telemetry.HTTPRequestMethod.String(method), telemetry.ServerAddress.String(u.Hostname()),
		telemetry.URLScheme.String(u.Scheme))
	if p, err := strconv.Atoi(port); err == nil {
		span.SetAttributes(telemetry.ServerPort.Int(p))
	}
	if resp.Err != 0 {
		span.SetAttributes(telemetry.ErrorType.String(resp.Err.String()))
		span.SetStatus(codes.Error, resp.Err.String())
		return
	}
	span.SetAttributes(telemetry.HTTPResponseStatus.Int(resp.Status))
	if resp.Status >= 500 {
		span.SetAttributes(telemetry.ErrorType.String(strconv.Itoa(resp.Status)))
		span.SetStatus(codes.Error, "")
	}
}
