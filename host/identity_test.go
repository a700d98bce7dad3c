package host_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/host"
	"github.com/connhost/connhost/ledger"
)

// TestExecuteRefusesAmbiguousIdentity: identity fields that are not valid
// UTF-8, hold a control character or are too long are refused before
// anything is recorded, with an error naming the field and the problem.
// "call_\xff" and "call_\xfe" are the pair that JSON decoding turned into
// one tool call ("call_\ufffd").
func TestExecuteRefusesAmbiguousIdentity(t *testing.T) {
	h := newHarness(t, "manual")
	long := strings.Repeat("x", host.MaxIdentityBytes+1)
	for _, tc := range []struct {
		name            string
		ns, sess, tcall string
		want            string
	}{
		{"invalid UTF-8 ff", "", "s1", "call_\xff", `tool_call_id is not valid UTF-8 (byte 0xff at offset 5)`},
		{"invalid UTF-8 fe", "", "s1", "call_\xfe", `tool_call_id is not valid UTF-8 (byte 0xfe at offset 5)`},
		{"truncated rune", "", "s1", "call_\xc3", `tool_call_id is not valid UTF-8 (byte 0xc3 at offset 5)`},
		{"encoded surrogate", "", "s1", "call_\xed\xa0\x80", `tool_call_id is not valid UTF-8 (byte 0xed at offset 5)`},
		{"NUL", "", "s1", "call\x00_1", `tool_call_id holds the control character U+0000 at offset 4`},
		{"newline", "", "s1\nforged log line", "c1", `session_id holds the control character U+000A at offset 2`},
		{"DEL", "", "s1", "c\x7f", `tool_call_id holds the control character U+007F at offset 1`},
		{"C1 NEL", "", "s1", "c\u0085", `tool_call_id holds the control character U+0085 at offset 1`},
		{"namespace", "tenant\x1b[31m", "s1", "c1", `namespace holds the control character U+001B at offset 6`},
		{"namespace UTF-8", "t\xff", "s1", "c1", `namespace is not valid UTF-8`},
		{"too long", "", "s1", long, `tool_call_id is 257 bytes long; at most 256 are allowed`},
		{"session too long", "", long, "c1", `session_id is 257 bytes long`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := call(tc.sess, tc.tcall, `{"n":1}`)
			c.Namespace = tc.ns
			_, err := h.ex.Execute(context.Background(), c)
			require.ErrorIs(t, err, host.ErrBadCall)
			require.ErrorContains(t, err, tc.want)
		})
	}
	recs, err := h.ex.Ledger().List(context.Background(), ledger.Filter{Limit: 100})
	require.NoError(t, err)
	require.Empty(t, recs, "a refused call records nothing")
	require.Zero(t, h.prov.count(), "a refused call reaches no connector")

	// What is allowed: any printable text up to the cap, including a real
	// U+FFFD and other non-ASCII runes.
	for _, id := range []string{strings.Repeat("y", host.MaxIdentityBytes), "call_\ufffd", "toolu_01A09q90qw90lq917835lq9", "会话-1 ☕"} {
		res := h.exec(call(id, id, `{"n":1}`))
		require.Equal(t, host.StatusSucceeded, res.Status, id)
	}
}
