package wasmrt

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/connhost/connhost/abi"
)

// envelopeSlack is the room an HTTP request envelope may take beyond its
// body (method, URL, headers).
const envelopeSlack = 256 << 10

// hostHTTPRequest is abi.ImportHTTPRequest:
//
//	http_request(req_ptr wasmI32, req_len wasmI32) -> wasmI32
//
// Parameters: req_ptr and req_len locate an abi.HTTPRequest envelope in
// guest memory.
//
// Results: the length of the abi.HTTPResponse envelope now pending for
// take; or abi.StatusBadRequest when the request envelope lies outside
// guest memory or does not decode. A request whose envelope is larger than
// Options.MaxHTTPRequestBytes plus 256 KiB is answered with
// abi.HTTPTooLarge without being read.
//
// Memory: reads req_len bytes at req_ptr. Nothing is written; the response
// is copied out by take.
//
// The request goes through the connector's http capability (see
// httpcap.go): only to the manifest's capabilities.http origins, re-checked
// on every redirect and on the address dialled, bounded by the call's
// deadline and the body caps. Denials, timeouts and network errors are
// answered inside the response envelope (abi.HTTPDenied, …), never as
// errors of the call. Denials are logged within the guest's log budget:
// the first one, and one warning with the count at the end of the
// invocation (see deniedRequest). Outside the call export (during _initialize or
// connhost_alloc) every request is denied, so a failure before the export
// runs cannot have acted.
var hostHTTPRequest = &hostFunction{
	name:        abi.ImportHTTPRequest,
	fn:          httpRequestFn,
	params:      []api.ValueType{wasmI32, wasmI32},
	paramNames:  []string{"req_ptr", "req_len"},
	results:     []api.ValueType{wasmI32},
	resultNames: []string{"len_or_status"},
}

func httpRequestFn(ctx context.Context, mod api.Module, stack []uint64) {
	cc := callOf(ctx)
	if cc == nil {
		stack[0] = status(abi.StatusBadRequest)
		return
	}
	c := cc.inst.c
	ptr, n := uint32(stack[0]), uint32(stack[1])
	limit := uint64(c.rt.opts.MaxHTTPRequestBytes) + envelopeSlack
	if uint64(n) > limit {
		resp := abi.HTTPResponse{Err: abi.HTTPTooLarge, Message: fmt.Sprintf("request envelope of %d bytes exceeds %d", n, limit)}
		stack[0] = uint64(uint32(setPending(cc, resp.AppendBinary(nil))))
		return
	}
	raw, ok := readGuest(mod, ptr, n, uint32(limit))
	if !ok {
		stack[0] = status(abi.StatusBadRequest)
		return
	}
	req, err := abi.DecodeHTTPRequest(raw)
	if err != nil {
		stack[0] = status(abi.StatusBadRequest)
		return
	}
	var resp abi.HTTPResponse
	if cc.phase != phaseCall {
		resp = abi.HTTPResponse{Err: abi.HTTPDenied, Message: "http is only available while an operation runs"}
	} else {
		resp = c.http.do(ctx, req)
	}
	if resp.Err == abi.HTTPDenied {
		c.deniedRequest(ctx, cc, originOf(req.URL), resp.Message)
	}
	stack[0] = uint64(uint32(setPending(cc, resp.AppendBinary(nil))))
}
