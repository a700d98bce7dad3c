package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/internal/wasmrt"
)

// Bad provider responses — an HTML error page from a proxy, JSON cut off
// mid-body, a body over the host's response cap (1 MiB by default), an
// answer slower than the call deadline — must end in a typed outcome or a
// typed *wasmrt.CallError, never a panic, and must not poison the connector:
// the next good call on the same Connector succeeds. A real Mailpit cannot
// be made to answer like this, so the email cases run on the emulator.

// slowTimeout is the call deadline (manifest Limits.Timeout) of the slow
// cases; the provider hangs until the client gives up.
const slowTimeout = 500 * time.Millisecond

// twoMiB is a body over the host's default 1 MiB response cap.
const twoMiB = 2 << 20

// badResponse is one damaged answer and what the call must turn it into.
type badResponse struct {
	name    string
	rule    fault.Rule
	timeout time.Duration // the manifest's Limits.Timeout when zero
	// want is the outcome kind; zero means the call must fail with a
	// *wasmrt.CallError of kind wantErr instead.
	want    abi.OutcomeKind
	wantErr wasmrt.CallErrorKind
	// effects is how many effects the provider holds for the call's key.
	effects int
}

// check checks the damaged call's outcome or error, and that c discarded
// the instance exactly when the call failed (a cut guest's state is
// suspect; an answered call keeps its instance). before is how many
// instances c had discarded before the call.
func (tt badResponse) check(t *testing.T, c *conn, before uint64, o abi.Outcome, err error) {
	t.Helper()
	discarded := c.Stats().Discarded - before
	if tt.want == 0 {
		ce := wantCallError(t, o, err, tt.wantErr)
		if !ce.MayHaveActed() {
			t.Fatalf("a call cut while the guest waited on the provider must count as possibly acted: %v", err)
		}
		if discarded != 1 {
			t.Fatalf("%d instances discarded after a failed call, want 1", discarded)
		}
		return
	}
	if err != nil {
		t.Fatalf("call error %v, want outcome %s", err, tt.want)
	}
	wantOutcome(t, o, tt.want)
	if discarded != 0 {
		t.Fatalf("%d instances discarded after an answered call, want 0", discarded)
	}
}

// connectors are the two loads of one connector the cases share (loading
// is the slow part under -race): one with the shipped limits, one with the
// short call deadline of the slow cases.
type connectors struct{ normal, slow *conn }

func loadBoth(t *testing.T, loader func(testing.TB, string, ...loadOption) *conn, base string) connectors {
	t.Helper()
	return connectors{normal: loader(t, base), slow: loader(t, base, withTimeout(slowTimeout))}
}

func (cs connectors) pick(tt badResponse) *conn {
	if tt.timeout > 0 {
		return cs.slow
	}
	return cs.normal
}

func TestPaymentsBadProviderResponses(t *testing.T) {
	post := func(r fault.Rule) fault.Rule { r.Method, r.Path = "POST", "/v1/payment_intents"; return r }
	tests := []badResponse{
		// A POST's answer that is damaged leaves the charge open: uncertain.
		{name: "HTML error page", rule: post(fault.Rule{Kind: fault.HTML}), want: abi.OutcomeUncertain},
		{name: "HTML error page after the charge", rule: post(fault.Rule{Kind: fault.HTML, Apply: true}), want: abi.OutcomeUncertain, effects: 1},
		{name: "truncated JSON", rule: post(fault.Rule{Kind: fault.Truncated}), want: abi.OutcomeUncertain},
		{name: "truncated JSON after the charge", rule: post(fault.Rule{Kind: fault.Truncated, Apply: true}), want: abi.OutcomeUncertain, effects: 1},
		{name: "huge body over the host cap", rule: post(fault.Rule{Kind: fault.Huge, Size: twoMiB}), want: abi.OutcomeUncertain},
		{name: "huge body over the host cap after the charge", rule: post(fault.Rule{Kind: fault.Huge, Size: twoMiB, Apply: true}), want: abi.OutcomeUncertain, effects: 1},
		{name: "slow response past the call deadline", rule: post(fault.Rule{Kind: fault.Hang}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout},
		{name: "slow response after the charge past the call deadline", rule: post(fault.Rule{Kind: fault.Hang, Apply: true}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout, effects: 1},
	}
	cs := loadBoth(t, loadPayments, shared.sb.PaymentsURL())
	for _, tt := range tests {
		t.Run("create_payment "+tt.name, func(t *testing.T) {
			c := cs.pick(tt)
			before := c.Stats().Discarded
			addPaymentsFault(t, tt.rule)
			key := newKey("bad")
			args := paymentArgs(2000, "pm_card_visa")
			o, err := c.call(t, abi.ExportExecuteWithKey, "create_payment", key, args)
			tt.check(t, c, before, o, err)
			wantIntents(t, key, tt.effects)

			// The same key again (the host's retry) charges at most once.
			replaysBefore := replays(t)
			retry := c.executeWithKey(t, "create_payment", key, args)
			wantOutcome(t, retry, abi.OutcomeOK)
			if replayed := replays(t) > replaysBefore; replayed != (tt.effects == 1) {
				t.Fatalf("retry replayed=%v, want %v", replayed, tt.effects == 1)
			}
			wantIntents(t, key, 1)
			// And a fresh call on the same Connector is unaffected.
			next := newKey("good")
			wantOutcome(t, c.executeWithKey(t, "create_payment", next, args), abi.OutcomeOK)
			wantIntents(t, next, 1)
		})
	}

	get := func(r fault.Rule) fault.Rule { r.Method, r.Path = "GET", "/v1/payment_intents/"; return r }
	reads := []badResponse{
		{name: "HTML error page", rule: get(fault.Rule{Kind: fault.HTML}), want: abi.OutcomeRetryable},
		{name: "truncated JSON", rule: get(fault.Rule{Kind: fault.Truncated}), want: abi.OutcomeRetryable},
		// A read whose answer is over the cap will be over it again.
		{name: "huge body over the host cap", rule: get(fault.Rule{Kind: fault.Huge, Size: twoMiB}), want: abi.OutcomePermanent},
		{name: "slow response past the call deadline", rule: get(fault.Rule{Kind: fault.Hang}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout},
	}
	pi := charge(t, cs.normal, 2000)
	args := fmt.Sprintf(`{"payment_intent":%q}`, pi)
	for _, tt := range reads {
		t.Run("get_payment "+tt.name, func(t *testing.T) {
			c := cs.pick(tt)
			before := c.Stats().Discarded
			addPaymentsFault(t, tt.rule)
			o, err := c.call(t, abi.ExportExecute, "get_payment", "", args)
			tt.check(t, c, before, o, err)
			good := c.execute(t, "get_payment", args)
			wantOutcome(t, good, abi.OutcomeOK)
			if good.Receipt != pi {
				t.Fatalf("follow-up get_payment receipt %q, want %s", good.Receipt, pi)
			}
		})
	}
}

func TestEmailBadProviderResponsesEmulatorFault(t *testing.T) {
	send := func(r fault.Rule) fault.Rule { r.Method, r.Path = "POST", "/api/v1/send"; return r }
	search := func(r fault.Rule) fault.Rule { r.Method, r.Path = "GET", "/api/v1/search"; return r }
	tests := []badResponse{
		{name: "HTML error page", rule: send(fault.Rule{Kind: fault.HTML}), want: abi.OutcomeUncertain},
		// send looks again after a lost answer and finds the stored message.
		{name: "HTML error page after storing", rule: send(fault.Rule{Kind: fault.HTML, Apply: true}), want: abi.OutcomeOK, effects: 1},
		{name: "truncated JSON after storing", rule: send(fault.Rule{Kind: fault.Truncated, Apply: true}), want: abi.OutcomeOK, effects: 1},
		{name: "truncated JSON", rule: send(fault.Rule{Kind: fault.Truncated}), want: abi.OutcomeUncertain},
		{name: "huge body over the host cap", rule: send(fault.Rule{Kind: fault.Huge, Size: twoMiB}), want: abi.OutcomeUncertain},
		{name: "huge search body over the host cap in the pre-check", rule: search(fault.Rule{Kind: fault.Huge, Size: twoMiB}), want: abi.OutcomeRetryable},
		{name: "HTML error page in the pre-check", rule: search(fault.Rule{Kind: fault.HTML}), want: abi.OutcomeRetryable},
		{name: "slow response past the call deadline", rule: send(fault.Rule{Kind: fault.Hang}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout},
		{name: "slow response after storing past the call deadline", rule: send(fault.Rule{Kind: fault.Hang, Apply: true}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout, effects: 1},
	}
	cs := loadBoth(t, loadEmail, shared.sb.EmailURL())
	for _, tt := range tests {
		t.Run("send "+tt.name, func(t *testing.T) {
			c := cs.pick(tt)
			before := c.Stats().Discarded
			addEmailFault(t, tt.rule)
			key := newKey("bad")
			o, err := c.call(t, abi.ExportExecuteWithKey, "send", key, sendArgs)
			tt.check(t, c, before, o, err)
			wantStored(t, shared.sbc, key, tt.effects)

			// The host's retry with the same key leaves one message.
			wantOutcome(t, c.executeWithKey(t, "send", key, sendArgs), abi.OutcomeOK)
			wantStored(t, shared.sbc, key, 1)
			next := newKey("good")
			wantOutcome(t, c.executeWithKey(t, "send", next, sendArgs), abi.OutcomeOK)
			wantStored(t, shared.sbc, next, 1)
		})
	}

	get := func(r fault.Rule) fault.Rule { r.Method, r.Path = "GET", "/api/v1/message/"; return r }
	reads := []badResponse{
		{name: "HTML error page", rule: get(fault.Rule{Kind: fault.HTML}), want: abi.OutcomeRetryable},
		{name: "truncated JSON", rule: get(fault.Rule{Kind: fault.Truncated}), want: abi.OutcomeRetryable},
		{name: "huge body over the host cap", rule: get(fault.Rule{Kind: fault.Huge, Size: twoMiB}), want: abi.OutcomeRetryable},
		{name: "slow response past the call deadline", rule: get(fault.Rule{Kind: fault.Hang}), timeout: slowTimeout, wantErr: wasmrt.KindTimeout},
	}
	sent := cs.normal.executeWithKey(t, "send", newKey("read"), sendArgs)
	args := fmt.Sprintf(`{"id":%q}`, sent.Receipt)
	for _, tt := range reads {
		t.Run("get_message "+tt.name, func(t *testing.T) {
			c := cs.pick(tt)
			before := c.Stats().Discarded
			addEmailFault(t, tt.rule)
			o, err := c.call(t, abi.ExportExecute, "get_message", "", args)
			tt.check(t, c, before, o, err)
			good := c.execute(t, "get_message", args)
			wantOutcome(t, good, abi.OutcomeOK)
			if good.Receipt != sent.Receipt {
				t.Fatalf("follow-up get_message receipt %q, want %s", good.Receipt, sent.Receipt)
			}
		})
	}
}
