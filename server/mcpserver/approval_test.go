package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/connhost/connhost/server/mcpserver"
)

// The attacks on the approval dialog: what the user approves must be what
// the dialog showed, whole. Each runs over every transport and protocol
// revision that asks in the client's dialog.

// TestDialogShowsEscapedPaddingDecoded: a model puts amount last, behind a
// description of \u0041 escapes (within its maxLength: 990 characters, six
// bytes of JSON each). The dialog used to cut the raw JSON at 2,000 bytes,
// so "amount" never appeared and the user approved 99,999,999 unseen. Now
// the amount comes first, in minor and major units, and the padding is
// shown as the text it is.
func TestDialogShowsEscapedPaddingDecoded(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			decline := &approvalHandler{action: "decline"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
			args := json.RawMessage(`{"currency":"usd","payment_method":"pm_card_visa","description":"` +
				strings.Repeat(`\u0041`, 990) + `","amount":99999999}`)
			before := charges()
			res, out := callTool(t, cs, "payments.create_payment", args, ids("s-pad", "c1"))
			require.Equal(t, "rejected", out.Status, text(res))
			require.Equal(t, 1, decline.count())
			msg := decline.asked[0].Message
			require.Contains(t, msg, "\n  amount = 99999999  (999,999.99 USD (99,999,999 minor units))\n")
			require.Contains(t, msg, `description = "`+strings.Repeat("A", 990)+`"`)
			require.NotContains(t, msg, `\u0041`)
			require.Less(t, strings.Index(msg, "amount ="), strings.Index(msg, "description ="), "the amount first")
			require.Equal(t, before, charges())
		})
	}
}

// TestDialogOrdersByReview: the fields the manifest names for review come
// first, in its order, whatever order the model wrote; money is shown in
// its currency.
func TestDialogOrdersByReview(t *testing.T) {
	f := newFixture(t, overHTTP)
	decline := &approvalHandler{action: "decline"}
	cs := f.client(clientOpts{approver: true, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
	args := json.RawMessage(`{"description":"invoice 7","customer_email":"a@example.com","payment_method":"pm_card_visa","currency":"jpy","amount":500}`)
	callTool(t, cs, "payments.create_payment", args, ids("s-order", "c1"))
	require.Equal(t, 1, decline.count())
	msg := decline.asked[0].Message
	want := "Decide on:\n" +
		"  amount = 500  (500 JPY (500 minor units))\n" +
		"  currency = \"jpy\"\n" +
		"  payment_method = \"pm_card_visa\"\n" +
		"  customer_email = \"a@example.com\"\n" +
		"Other arguments:\n" +
		"  description = \"invoice 7\"\n"
	require.Contains(t, msg, want)
}

// TestDialogUnboundedTextCannotHideTo: email.send's text had no maxLength,
// so a body before "to" pushed the recipient out of the 2,000-byte dialog.
// The recipient is a review field and comes first.
func TestDialogUnboundedTextCannotHideTo(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			decline := &approvalHandler{action: "decline"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
			args := json.RawMessage(`{"subject":"your invoice","text":"` + strings.Repeat("Please find the invoice attached. ", 60) +
				`","to":"attacker@evil.example"}`)
			res, out := callTool(t, cs, "mailish.echo", args, ids("s-to", "c1"))
			require.Equal(t, "rejected", out.Status, text(res))
			require.Equal(t, 1, decline.count())
			msg := decline.asked[0].Message
			require.Contains(t, msg, "Decide on:\n  to = \"attacker@evil.example\"\n  subject = \"your invoice\"\n")
			require.Contains(t, msg, strings.Repeat("Please find the invoice attached. ", 60), "the body is shown whole")
		})
	}
}

// TestDialogEscapesControlAndBidi: a right-to-left override, a zero-width
// space, a newline forging a line and a terminal escape reach the dialog
// as visible escapes, never as the characters.
func TestDialogEscapesControlAndBidi(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			decline := &approvalHandler{action: "decline"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: decline.handle}})
			msg := "refund \u202efdp.exe\u200b\namount = 1\x1b[2J"
			callTool(t, cs, "gated.echo", map[string]any{"msg": msg}, ids("s-bidi", "c1"))
			require.Equal(t, 1, decline.count())
			shown := decline.asked[0].Message
			require.Contains(t, shown, `  msg = "refund \u202Efdp.exe\u200B\namount = 1\u001B[2J"`+"\n")
			for _, c := range []string{"\u202e", "\u200b", "\x1b", "\namount = 1"} {
				require.NotContains(t, shown, c)
			}
			require.Contains(t, shown, "control, invisible or direction-changing characters")
		})
	}
}

// TestDialogRefusedWhenTheCallDoesNotFit: a call whose whole view is
// longer than the dialog's limit is not shown in part: the user is not
// asked, the call waits for a reviewer out of band, and the result and
// the log say why.
func TestDialogRefusedWhenTheCallDoesNotFit(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f := newFixture(t, v.kind)
			never := &approvalHandler{action: "accept"}
			cs := f.client(clientOpts{approver: true, version: v.version, client: &mcp.ClientOptions{ElicitationHandler: never.handle}})
			args := map[string]any{"to": "bob@example.com", "subject": "long", "text": strings.Repeat("x", mcpserver.DefaultMaxDialogBytes)}
			res, out := callTool(t, cs, "mailish.echo", args, ids("s-big", "c1"))
			require.False(t, res.IsError, text(res))
			require.Equal(t, "awaiting_approval", out.Status)
			require.Zero(t, never.count(), "the dialog was never shown")
			require.Contains(t, text(res), "too large to show whole in the client's approval dialog")
			require.Contains(t, text(res), "connhost approve "+out.Approval.ID)
			f.log.waitFor(t, "approval dialog not shown: the call does not fit whole")

			// A call that fits is still asked.
			res, small := callTool(t, cs, "mailish.echo", map[string]any{"to": "bob@example.com", "subject": "short", "text": "hi"}, ids("s-big", "c2"))
			require.Equal(t, "succeeded", small.Status, text(res))
			require.Equal(t, 1, never.count())
		})
	}
}
