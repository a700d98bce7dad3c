package main

import (
	"fmt"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/sandbox/mailpit"
)

// BenchmarkGuestSend is send's own work: decode and validate the
// arguments, look the Message-ID up (Mailpit's search answer over a
// mailbox of 100 messages sent by the connector, each with its own tag,
// recorded from the emulator and served in-process), encode the send
// request, read its answer and encode the result. It runs natively (see
// BenchmarkGuestCreatePayment in plugins/payments).
func BenchmarkGuestSend(b *testing.B) {
	s := mailpit.New(mailpit.Options{})
	b.Cleanup(s.Close)
	const origin = "http://mailpit.test:80"
	h := newTestHost(origin, map[string]string{"base_url": origin, "default_from": "", "basic_auth": ""})
	h.Handler = s
	for i := range 100 {
		wantKind(b, sendOp(h, fmt.Sprintf("ck_fill_%d", i), sendJSON), abi.OutcomeOK, "")
	}
	rec := newTestHost(origin, h.Values)
	rec.Handler = s
	wantKind(b, sendOp(rec, key1, sendJSON), abi.OutcomeOK, "")
	c := &guesttest.Canned{ExecID: rec.ExecID, Values: rec.Values, Responses: rec.Responses()}
	args := []byte(sendJSON)
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		if o := guest.Invoke(c, abi.ExportExecuteWithKey, "send", key1, args); o.Kind != abi.OutcomeOK {
			b.Fatalf("%s %q", o.Kind, o.Error)
		}
	}
}
