package abi_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/connhost/connhost/abi"
)

// Valid envelopes shared by the round-trip, truncation and fuzz-seed tests.
var (
	validOutcomes = []struct {
		name string
		o    abi.Outcome
	}{
		{"ok with result and receipt", abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`{"id":"pi_1","amount":100}`), Receipt: "pi_1"}},
		{"ok without result", abi.Outcome{Kind: abi.OutcomeOK}},
		{"ok with scalar result", abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`42`)}},
		{"retryable with message", abi.Outcome{Kind: abi.OutcomeRetryable, Error: "rate limited"}},
		{"permanent with message", abi.Outcome{Kind: abi.OutcomePermanent, Error: "card declined"}},
		{"applied with result", abi.Outcome{Kind: abi.OutcomeApplied, Result: []byte(`[1,2,3]`), Receipt: "msg_9"}},
		{"not applied", abi.Outcome{Kind: abi.OutcomeNotApplied, Error: "no such message"}},
		{"unknown", abi.Outcome{Kind: abi.OutcomeUnknown, Error: "provider unreachable"}},
		{"non-utf8 receipt and error survive", abi.Outcome{Kind: abi.OutcomePermanent, Receipt: "\xff\x00", Error: "\xfe"}},
	}
	validRequests = []struct {
		name string
		q    abi.HTTPRequest
	}{
		{"empty request", abi.HTTPRequest{}},
		{"get without body", abi.HTTPRequest{Method: "GET", URL: "https://api.example.com/v1/x"}},
		{"post with repeated headers, body and timeout", abi.HTTPRequest{
			Method: "POST", URL: "https://api.stripe.com/v1/payment_intents",
			Header:        []abi.Header{{"Idempotency-Key", "k1"}, {"Accept", "a"}, {"Accept", "b"}},
			Body:          []byte("amount=100&currency=eur"),
			TimeoutMillis: 2500,
		}},
		{"max timeout", abi.HTTPRequest{Method: "PUT", URL: "/", TimeoutMillis: ^uint32(0)}},
	}
	validResponses = []struct {
		name string
		p    abi.HTTPResponse
	}{
		{"empty 200", abi.HTTPResponse{Status: 200}},
		{"status zero", abi.HTTPResponse{}},
		{"status 999 is the largest accepted", abi.HTTPResponse{Status: 999}},
		{"response with headers and body", abi.HTTPResponse{
			Status: 201,
			Header: []abi.Header{{"Content-Type", "application/json"}, {"Set-Cookie", "a=1"}, {"Set-Cookie", "b=2"}},
			Body:   []byte(`{"id":"pi_1"}`),
		}},
		{"denied", abi.HTTPResponse{Err: abi.HTTPDenied, Message: "host not in allowlist"}},
		{"timeout", abi.HTTPResponse{Err: abi.HTTPTimeout, Message: "deadline"}},
		{"network", abi.HTTPResponse{Err: abi.HTTPNetwork, Message: "connection refused"}},
		{"too large", abi.HTTPResponse{Err: abi.HTTPTooLarge, Message: "body over 1 MiB"}},
		{"invalid", abi.HTTPResponse{Err: abi.HTTPInvalid, Message: "bad method"}},
	}
)

func outcomeEqual(a, b abi.Outcome) bool {
	return a.Kind == b.Kind && bytes.Equal(a.Result, b.Result) && a.Receipt == b.Receipt && a.Error == b.Error
}

func requestEqual(a, b abi.HTTPRequest) bool {
	return a.Method == b.Method && a.URL == b.URL && slices.Equal(a.Header, b.Header) &&
		bytes.Equal(a.Body, b.Body) && a.TimeoutMillis == b.TimeoutMillis
}

func responseEqual(a, b abi.HTTPResponse) bool {
	return a.Err == b.Err && a.Message == b.Message && a.Status == b.Status &&
		slices.Equal(a.Header, b.Header) && bytes.Equal(a.Body, b.Body)
}

func TestOutcomeRoundTripPreservesEveryField(t *testing.T) {
	for _, tc := range validOutcomes {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.o.AppendBinary(nil)
			got, err := abi.DecodeOutcome(b)
			if err != nil {
				t.Fatalf("DecodeOutcome: %v", err)
			}
			if !outcomeEqual(got, tc.o) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.o)
			}
		})
	}
}

func TestOutcomeAppendBinaryAppendsToPrefix(t *testing.T) {
	o := abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`1`)}
	prefix := []byte("prefix")
	b := o.AppendBinary(bytes.Clone(prefix))
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("AppendBinary dropped the prefix: %q", b)
	}
	if !bytes.Equal(b[len(prefix):], o.AppendBinary(nil)) {
		t.Fatal("AppendBinary after a prefix differs from AppendBinary(nil)")
	}
}

func TestDecodeOutcomeNormalizesEmptyResultToNil(t *testing.T) {
	b := abi.Outcome{Kind: abi.OutcomeOK, Result: []byte{}}.AppendBinary(nil)
	o, err := abi.DecodeOutcome(b)
	if err != nil {
		t.Fatal(err)
	}
	if o.Result != nil {
		t.Fatalf("Result = %#v, want nil", o.Result)
	}
}

func TestHTTPRequestRoundTripPreservesEveryField(t *testing.T) {
	for _, tc := range validRequests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := abi.DecodeHTTPRequest(tc.q.AppendBinary(nil))
			if err != nil {
				t.Fatalf("DecodeHTTPRequest: %v", err)
			}
			if !requestEqual(got, tc.q) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.q)
			}
		})
	}
}

func TestHTTPResponseRoundTripPreservesEveryField(t *testing.T) {
	for _, tc := range validResponses {
		t.Run(tc.name, func(t *testing.T) {
			got, err := abi.DecodeHTTPResponse(tc.p.AppendBinary(nil))
			if err != nil {
				t.Fatalf("DecodeHTTPResponse: %v", err)
			}
			if !responseEqual(got, tc.p) {
				t.Fatalf("round trip: got %+v, want %+v", got, tc.p)
			}
		})
	}
}

// decoders runs each binary decoder over each of its valid encodings, so the
// failure-path tests cover every envelope the same way.
type decodeCase struct {
	envelope string
	name     string
	wire     []byte
	decode   func([]byte) error
}

func binaryCases() []decodeCase {
	var cs []decodeCase
	for _, tc := range validOutcomes {
		cs = append(cs, decodeCase{"outcome", tc.name, tc.o.AppendBinary(nil), func(b []byte) error { _, err := abi.DecodeOutcome(b); return err }})
	}
	for _, tc := range validRequests {
		cs = append(cs, decodeCase{"http request", tc.name, tc.q.AppendBinary(nil), func(b []byte) error { _, err := abi.DecodeHTTPRequest(b); return err }})
	}
	for _, tc := range validResponses {
		cs = append(cs, decodeCase{"http response", tc.name, tc.p.AppendBinary(nil), func(b []byte) error { _, err := abi.DecodeHTTPResponse(b); return err }})
	}
	return cs
}

func TestDecodersRefuseTruncationAtEveryOffset(t *testing.T) {
	for _, tc := range binaryCases() {
		t.Run(tc.envelope+"/"+tc.name, func(t *testing.T) {
			for n := range len(tc.wire) {
				if err := tc.decode(tc.wire[:n]); !errors.Is(err, abi.ErrTruncated) {
					t.Fatalf("decode of first %d of %d bytes: err = %v, want ErrTruncated", n, len(tc.wire), err)
				}
			}
		})
	}
}

func TestDecodersRefuseATrailingByte(t *testing.T) {
	for _, tc := range binaryCases() {
		t.Run(tc.envelope+"/"+tc.name, func(t *testing.T) {
			if err := tc.decode(append(bytes.Clone(tc.wire), 0)); !errors.Is(err, abi.ErrTrailing) {
				t.Fatalf("err = %v, want ErrTrailing", err)
			}
		})
	}
}

func TestDecodersRefuseAnotherEnvelopesTag(t *testing.T) {
	for _, tc := range binaryCases() {
		for _, tag := range []byte{0x00, 0xC1, 0xD1, 0xD2, 0xFF} {
			if tag == tc.wire[0] {
				continue
			}
			b := bytes.Clone(tc.wire)
			b[0] = tag
			if err := tc.decode(b); !errors.Is(err, abi.ErrBadTag) {
				t.Errorf("%s/%s with tag %#x: err = %v, want ErrBadTag", tc.envelope, tc.name, tag, err)
			}
		}
	}
}

func TestDecodeOutcomeRefusesUnknownKind(t *testing.T) {
	for _, kind := range []uint8{0, 9, 0x80, 0xFF} {
		b := abi.Outcome{Kind: abi.OutcomeKind(kind)}.AppendBinary(nil)
		if _, err := abi.DecodeOutcome(b); !errors.Is(err, abi.ErrBadKind) {
			t.Errorf("kind %d: err = %v, want ErrBadKind", kind, err)
		}
	}
}

func TestDecodeOutcomeRefusesResultThatIsNotJSON(t *testing.T) {
	for _, result := range []string{"not json", `{"a":`, `{} {}`, " ", "\xff"} {
		b := abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(result)}.AppendBinary(nil)
		_, err := abi.DecodeOutcome(b)
		if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("result %q: err = %v, want a not-valid-JSON error", result, err)
		}
	}
}

// putU32 overwrites the little-endian uint32 at off.
func putU32(b []byte, off int, v uint32) []byte {
	b = bytes.Clone(b)
	binary.LittleEndian.PutUint32(b[off:], v)
	return b
}

func TestDecodersRefuseLengthFieldsLongerThanTheInput(t *testing.T) {
	outcome := abi.Outcome{Kind: abi.OutcomeOK, Result: []byte(`1`), Receipt: "r", Error: "e"}.AppendBinary(nil)
	request := abi.HTTPRequest{Method: "GET", URL: "u", Body: []byte("b")}.AppendBinary(nil)
	response := abi.HTTPResponse{Status: 200, Message: "m", Body: []byte("b")}.AppendBinary(nil)
	withHeader := abi.HTTPRequest{Header: []abi.Header{{"n", "v"}}}.AppendBinary(nil)
	decOutcome := func(b []byte) error { _, err := abi.DecodeOutcome(b); return err }
	decRequest := func(b []byte) error { _, err := abi.DecodeHTTPRequest(b); return err }
	decResponse := func(b []byte) error { _, err := abi.DecodeHTTPResponse(b); return err }
	tests := []struct {
		name   string
		wire   []byte
		decode func([]byte) error
	}{
		// outcome: tag(1) kind(1) result@2 receipt@7 error@12
		{"outcome result length past end", putU32(outcome, 2, 1<<20), decOutcome},
		{"outcome result length max uint32", putU32(outcome, 2, ^uint32(0)), decOutcome},
		{"outcome receipt length past end", putU32(outcome, 7, 100), decOutcome},
		{"outcome error length one past end", putU32(outcome, 12, 2), decOutcome},
		// request: tag(1) method@1 url@8 headers@13 body@17 timeout@22
		{"request method length past end", putU32(request, 1, ^uint32(0)), decRequest},
		{"request url length past end", putU32(request, 8, 1000), decRequest},
		{"request body length past end", putU32(request, 17, 9), decRequest},
		// header-only request: tag(1) method@1 url@5 headers@9 name@13
		{"request header name length past end", putU32(withHeader, 13, 1<<30), decRequest},
		// response: tag(1) err(1) message@2 status@7 headers@11 body@15
		{"response message length past end", putU32(response, 2, ^uint32(0)), decResponse},
		{"response body length past end", putU32(response, 15, 2), decResponse},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.decode(tc.wire); !errors.Is(err, abi.ErrTruncated) {
				t.Fatalf("err = %v, want ErrTruncated", err)
			}
		})
	}
}

func manyHeaders(n int) []abi.Header {
	h := make([]abi.Header, n)
	for i := range h {
		h[i] = abi.Header{Name: "X", Value: "v"}
	}
	return h
}

func TestDecodersAcceptTheHeaderCap(t *testing.T) {
	if _, err := abi.DecodeHTTPRequest(abi.HTTPRequest{Header: manyHeaders(256)}.AppendBinary(nil)); err != nil {
		t.Errorf("request with 256 headers: %v", err)
	}
	if _, err := abi.DecodeHTTPResponse(abi.HTTPResponse{Header: manyHeaders(256)}.AppendBinary(nil)); err != nil {
		t.Errorf("response with 256 headers: %v", err)
	}
}

func TestDecodersRefuseHeaderCountOverTheCap(t *testing.T) {
	// A count over the cap is refused before any allocation, even when
	// the input is far too short to hold that many headers.
	hugeCount := putU32(abi.HTTPRequest{}.AppendBinary(nil), 9, ^uint32(0)) // count@9
	tests := []struct {
		name   string
		decode func() error
	}{
		{"request with 257 headers", func() error {
			_, err := abi.DecodeHTTPRequest(abi.HTTPRequest{Header: manyHeaders(257)}.AppendBinary(nil))
			return err
		}},
		{"response with 257 headers", func() error {
			_, err := abi.DecodeHTTPResponse(abi.HTTPResponse{Header: manyHeaders(257)}.AppendBinary(nil))
			return err
		}},
		{"request claiming 2^32-1 headers", func() error {
			_, err := abi.DecodeHTTPRequest(hugeCount)
			return err
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.decode(); !errors.Is(err, abi.ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestDecodeHTTPResponseRefusesStatusOutOfRange(t *testing.T) {
	for _, status := range []int{1000, 1 << 20, -1, 1<<32 - 1} {
		b := abi.HTTPResponse{Status: status}.AppendBinary(nil)
		_, err := abi.DecodeHTTPResponse(b)
		if err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("status %d: err = %v, want out of range", status, err)
		}
	}
}

func TestDecodeHTTPResponseRefusesUnknownErrorCode(t *testing.T) {
	for _, code := range []uint8{6, 0x7F, 0xFF} {
		b := abi.HTTPResponse{Err: abi.HTTPErrorCode(code)}.AppendBinary(nil)
		_, err := abi.DecodeHTTPResponse(b)
		if err == nil || !strings.Contains(err.Error(), "unknown error code") {
			t.Errorf("code %d: err = %v, want unknown error code", code, err)
		}
	}
}

func TestOutcomeKindNamesAndClasses(t *testing.T) {
	tests := []struct {
		kind         abi.OutcomeKind
		name         string
		valid, recon bool
	}{
		{0, "outcome(0)", false, false},
		{abi.OutcomeOK, "ok", true, false},
		{abi.OutcomeRetryable, "retryable_error", true, false},
		{abi.OutcomePermanent, "permanent_error", true, false},
		{abi.OutcomeApplied, "applied", true, true},
		{abi.OutcomeNotApplied, "not_applied", true, true},
		{abi.OutcomeUnknown, "unknown", true, true},
		{abi.OutcomeUncertain, "uncertain", true, false},
		{abi.OutcomeInProgress, "in_progress", true, false},
		{9, "outcome(9)", false, false},
		{255, "outcome(255)", false, false},
	}
	for _, tc := range tests {
		if got := tc.kind.String(); got != tc.name {
			t.Errorf("OutcomeKind(%d).String() = %q, want %q", uint8(tc.kind), got, tc.name)
		}
		if got := tc.kind.Valid(); got != tc.valid {
			t.Errorf("OutcomeKind(%d).Valid() = %v, want %v", uint8(tc.kind), got, tc.valid)
		}
		if got := tc.kind.ForReconcile(); got != tc.recon {
			t.Errorf("OutcomeKind(%d).ForReconcile() = %v, want %v", uint8(tc.kind), got, tc.recon)
		}
	}
}

func TestHTTPErrorCodeNames(t *testing.T) {
	want := map[abi.HTTPErrorCode]string{
		abi.HTTPOK: "ok", abi.HTTPDenied: "denied", abi.HTTPTimeout: "timeout", abi.HTTPNetwork: "network",
		abi.HTTPTooLarge: "too_large", abi.HTTPInvalid: "invalid", 6: "http_error(6)", 255: "http_error(255)",
	}
	for code, name := range want {
		if got := code.String(); got != name {
			t.Errorf("HTTPErrorCode(%d).String() = %q, want %q", uint8(code), got, name)
		}
	}
}

func TestHeaderGetIsCaseInsensitiveAndReturnsTheFirstValue(t *testing.T) {
	h := []abi.Header{{"Set-Cookie", "a=1"}, {"set-cookie", "b=2"}}
	if got := (abi.HTTPResponse{Header: h}).Get("SET-COOKIE"); got != "a=1" {
		t.Errorf("HTTPResponse.Get = %q, want a=1", got)
	}
	if got := (abi.HTTPRequest{Header: h}).Get("set-Cookie"); got != "a=1" {
		t.Errorf("HTTPRequest.Get = %q, want a=1", got)
	}
	if got := (abi.HTTPRequest{Header: h}).Get("Missing"); got != "" {
		t.Errorf("Get of a missing header = %q, want empty", got)
	}
}

func TestPackPtrLenPutsPointerHighAndLengthLow(t *testing.T) {
	tests := []struct {
		name      string
		ptr, size uint32
		packed    uint64
	}{
		{"zero", 0, 0, 0},
		{"pointer only", 1, 0, 1 << 32},
		{"length only", 0, 1, 1},
		{"both", 0x10000, 42, 0x10000<<32 | 42},
		{"max values do not bleed into each other", ^uint32(0), ^uint32(0), ^uint64(0)},
		{"max pointer zero length", ^uint32(0), 0, 0xFFFFFFFF00000000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := abi.PackPtrLen(tc.ptr, tc.size); got != tc.packed {
				t.Fatalf("PackPtrLen(%#x, %#x) = %#x, want %#x", tc.ptr, tc.size, got, tc.packed)
			}
			ptr, size := abi.UnpackPtrLen(tc.packed)
			if ptr != tc.ptr || size != tc.size {
				t.Fatalf("UnpackPtrLen(%#x) = (%#x, %#x), want (%#x, %#x)", tc.packed, ptr, size, tc.ptr, tc.size)
			}
		})
	}
}
