package abi

import (
	"fmt"
	"strings"
)

// Header is one HTTP header field. Envelopes keep header fields as an ordered
// list so repeated fields survive the boundary.
type Header struct {
	Name  string
	Value string
}

// HTTPRequest is the envelope a guest passes to [ImportHTTPRequest].
type HTTPRequest struct {
	Method string
	URL    string
	Header []Header
	Body   []byte
	// TimeoutMillis bounds this request; 0 means "the call's deadline".
	// The host never lets a request outlive the call's deadline.
	TimeoutMillis uint32
}

// HTTPErrorCode classifies a request the host did not complete.
type HTTPErrorCode uint8

// HTTP error codes carried in [HTTPResponse].
const (
	HTTPOK           HTTPErrorCode = 0 // a response was received (any status)
	HTTPDenied       HTTPErrorCode = 1 // target not in the manifest's allowlist
	HTTPTimeout      HTTPErrorCode = 2 // request or call deadline exceeded
	HTTPNetwork      HTTPErrorCode = 3 // DNS, connect, TLS or read failure
	HTTPTooLarge     HTTPErrorCode = 4 // response body over the size cap
	HTTPInvalid      HTTPErrorCode = 5 // malformed method, URL or header
	httpErrorCodeMax               = HTTPInvalid
)

var httpErrorNames = [...]string{"ok", "denied", "timeout", "network", "too_large", "invalid"}

// String returns the code's name ("ok", "denied", "timeout", "network",
// "too_large", "invalid").
func (c HTTPErrorCode) String() string {
	if c <= httpErrorCodeMax {
		return httpErrorNames[c]
	}
	return fmt.Sprintf("http_error(%d)", uint8(c))
}

// HTTPResponse is the envelope the host returns for an [HTTPRequest].
type HTTPResponse struct {
	// Err is HTTPOK when Status, Header and Body hold a response.
	Err HTTPErrorCode
	// Message explains a non-OK Err.
	Message string
	Status  int
	Header  []Header
	Body    []byte
}

// Get returns the first value of the named header (case-insensitive).
func (r HTTPResponse) Get(name string) string { return getHeader(r.Header, name) }

// Get returns the first value of the named header (case-insensitive).
func (r HTTPRequest) Get(name string) string { return getHeader(r.Header, name) }

func getHeader(h []Header, name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

const (
	tagHTTPRequest  = 0xD1
	tagHTTPResponse = 0xD2
)

func appendHeaders(w *writer, h []Header) {
	w.u32(uint32(len(h)))
	for _, f := range h {
		w.str(f.Name)
		w.str(f.Value)
	}
}

func readHeaders(r *reader) []Header {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if n > maxHeaders {
		r.err = ErrTooLarge
		return nil
	}
	h := make([]Header, 0, n)
	for i := uint32(0); i < n && r.err == nil; i++ {
		h = append(h, Header{Name: r.str(), Value: r.str()})
	}
	return h
}

// AppendBinary appends the wire form of q to b.
func (q HTTPRequest) AppendBinary(b []byte) []byte {
	w := writer{b: b}
	w.u8(tagHTTPRequest)
	w.str(q.Method)
	w.str(q.URL)
	appendHeaders(&w, q.Header)
	w.bytes(q.Body)
	w.u32(q.TimeoutMillis)
	return w.b
}

// DecodeHTTPRequest parses a request envelope. Body aliases b.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	r := reader{b: b}
	if tag := r.u8(); r.err == nil && tag != tagHTTPRequest {
		return HTTPRequest{}, fmt.Errorf("%w: http request tag %#x", ErrBadTag, tag)
	}
	q := HTTPRequest{Method: r.str(), URL: r.str()}
	q.Header = readHeaders(&r)
	q.Body = r.bytes()
	q.TimeoutMillis = r.u32()
	if err := r.done(); err != nil {
		return HTTPRequest{}, fmt.Errorf("abi: decode http request: %w", err)
	}
	return q, nil
}

// AppendBinary appends the wire form of p to b.
func (p HTTPResponse) AppendBinary(b []byte) []byte {
	w := writer{b: b}
	w.u8(tagHTTPResponse)
	w.u8(uint8(p.Err))
	w.str(p.Message)
	w.u32(uint32(p.Status))
	appendHeaders(&w, p.Header)
	w.bytes(p.Body)
	return w.b
}

// DecodeHTTPResponse parses a response envelope. Body aliases b.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	r := reader{b: b}
	if tag := r.u8(); r.err == nil && tag != tagHTTPResponse {
		return HTTPResponse{}, fmt.Errorf("%w: http response tag %#x", ErrBadTag, tag)
	}
	p := HTTPResponse{Err: HTTPErrorCode(r.u8()), Message: r.str(), Status: int(r.u32())}
	p.Header = readHeaders(&r)
	p.Body = r.bytes()
	if err := r.done(); err != nil {
		return HTTPResponse{}, fmt.Errorf("abi: decode http response: %w", err)
	}
	if p.Err > httpErrorCodeMax {
		return HTTPResponse{}, fmt.Errorf("abi: decode http response: unknown error code %d", uint8(p.Err))
	}
	if p.Status < 0 || p.Status > 999 {
		return HTTPResponse{}, fmt.Errorf("abi: decode http response: status %d out of range", p.Status)
	}
	return p, nil
}
