package stripe

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// testCard is the outcome of confirming with one of Stripe's test
// PaymentMethods (https://docs.stripe.com/testing#declined-payments).
type testCard struct {
	brand   string
	code    string // empty: the charge succeeds
	decline string
	message string
}

var testPaymentMethods = map[string]testCard{
	"pm_card_visa":                            {brand: "visa"},
	"pm_card_visa_debit":                      {brand: "visa"},
	"pm_card_mastercard":                      {brand: "mastercard"},
	"pm_card_amex":                            {brand: "amex"},
	"pm_card_chargeDeclined":                  {brand: "visa", code: "card_declined", decline: "generic_decline", message: "Your card was declined."},
	"pm_card_chargeDeclinedInsufficientFunds": {brand: "visa", code: "card_declined", decline: "insufficient_funds", message: "Your card has insufficient funds."},
	"pm_card_chargeDeclinedLostCard":          {brand: "visa", code: "card_declined", decline: "lost_card", message: "Your card was declined."},
	"pm_card_chargeDeclinedStolenCard":        {brand: "visa", code: "card_declined", decline: "stolen_card", message: "Your card was declined."},
	"pm_card_chargeDeclinedFraudulent":        {brand: "visa", code: "card_declined", decline: "fraudulent", message: "Your card was declined."},
	"pm_card_chargeDeclinedExpiredCard":       {brand: "visa", code: "expired_card", decline: "expired_card", message: "Your card has expired."},
	"pm_card_chargeDeclinedIncorrectCvc":      {brand: "visa", code: "incorrect_cvc", decline: "incorrect_cvc", message: "Your card's security code is incorrect."},
	"pm_card_chargeDeclinedProcessingError":   {brand: "visa", code: "processing_error", decline: "processing_error", message: "An error occurred while processing your card. Try again in a little bit."},
}

var currencyRe = regexp.MustCompile(`^[a-zA-Z]{3}$`)

// minimumAmount is Stripe's minimum charge ($0.50 for USD); the emulator
// applies the same number to every currency.
const minimumAmount = 50

// maximumAmount is Stripe's maximum amount (eight digits).
const maximumAmount = 99999999

func execError() (int, any, bool) {
	return 500, errBody(&Error{Type: typeAPI, Message: "Sorry, something went wrong. We've already been notified of the problem, but if you need any help, you can reach us at support.stripe.com/contact. (sandbox exec_error fault)"}), true
}

// createPaymentIntent serves POST /v1/payment_intents.
//
// With confirm=true and a test PaymentMethod the intent is charged at once:
// a success answers 200 with status succeeded (requires_capture when
// capture_method=manual); a decline answers 402 with a card_error whose
// payment_intent carries the created intent in status
// requires_payment_method — the intent exists and is listed and searchable,
// as in Stripe, but nothing was charged.
func (s *Server) createPaymentIntent(r *http.Request, f *form) (int, any, bool) {
	if aerr := f.checkKnown("amount", "currency", "confirm", "payment_method", "payment_method_types",
		"metadata", "description", "capture_method", "customer", "receipt_email", "confirmation_method",
		"automatic_payment_methods", "off_session", "return_url", "expand", "statement_descriptor",
		"statement_descriptor_suffix", "error_on_requires_action", "setup_future_usage"); aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	amount, _, aerr := f.integer("amount", true)
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	if amount < minimumAmount {
		aerr = invalid("amount", codeAmountTooSmall, "Amount must be at least %d cents", minimumAmount)
	} else if amount > maximumAmount {
		aerr = invalid("amount", codeAmountTooLarge, "Amount must be no more than %d", maximumAmount)
	}
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	currency := f.str("currency")
	if !f.has("currency") {
		aerr = invalid("currency", codeParameterMissing, "Missing required param: currency.")
	} else if !currencyRe.MatchString(currency) {
		aerr = invalid("currency", "", "Invalid currency: %s. Stripe currently supports these currencies: usd, eur, gbp, …", currency)
	}
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	currency = strings.ToLower(currency)
	confirm, aerr := f.boolean("confirm")
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	capture := f.str("capture_method")
	switch capture {
	case "":
		capture = "automatic"
	case "automatic", "automatic_async", "manual":
	default:
		aerr := invalid("capture_method", "", "Invalid capture_method: must be one of automatic, automatic_async, or manual")
		return aerr.status, errBody(aerr.err), false
	}
	types := f.array["payment_method_types"]
	if len(types) == 0 {
		types = []string{"card"}
	}
	for _, t := range types {
		if t != "card" {
			aerr := invalid("payment_method_types", "", "The payment method type %q is invalid. The sandbox supports only \"card\".", t)
			return aerr.status, errBody(aerr.err), false
		}
	}
	pmToken := f.str("payment_method")
	card, known := testPaymentMethods[pmToken]
	if pmToken != "" && !known {
		aerr := invalid("payment_method", codeResourceMissing, "No such PaymentMethod: '%s'", pmToken)
		return aerr.status, errBody(aerr.err), false
	}
	if confirm && pmToken == "" {
		aerr := invalid("payment_method", codeParameterMissing, "You cannot confirm this PaymentIntent because it's missing a payment method. To confirm the PaymentIntent, pass a payment_method.")
		return aerr.status, errBody(aerr.err), false
	}
	md, aerr := f.metadata()
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}

	// The endpoint begins executing here: from now on the answer is saved.
	if s.checkpoint(r.Context()) {
		return execError()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	id := newID("pi_")
	pi := &PaymentIntent{
		ID:                 id,
		Object:             "payment_intent",
		Amount:             amount,
		CaptureMethod:      capture,
		ClientSecret:       id + "_secret_" + newID("")[:24],
		ConfirmationMethod: "automatic",
		Created:            now.Unix(),
		Currency:           currency,
		Customer:           strp(f.str("customer")),
		Description:        strp(f.str("description")),
		Metadata:           md,
		PaymentMethodTypes: types,
		ReceiptEmail:       strp(f.str("receipt_email")),
		Status:             "requires_payment_method",
	}
	var pmID string
	if pmToken != "" {
		pmID = newID("pm_")
		pi.PaymentMethod = &pmID
		pi.Status = "requires_confirmation"
	}
	it := &intent{pi: pi, at: now}
	s.intents = append(s.intents, it)
	s.byPI[id] = it
	s.stats.PaymentIntentsCreated++
	if !confirm {
		return 200, pi.clone(), true
	}
	chargeID := newID("ch_")
	pi.LatestCharge = &chargeID
	s.byCharge[chargeID] = it
	if card.code != "" {
		s.stats.ChargesDeclined++
		pi.Status = "requires_payment_method"
		pi.PaymentMethod = nil
		e := &Error{
			Type:          typeCard,
			Code:          card.code,
			DeclineCode:   card.decline,
			Message:       card.message,
			Charge:        chargeID,
			DocURL:        "https://stripe.com/docs/error-codes/" + strings.ReplaceAll(card.code, "_", "-"),
			PaymentMethod: &PaymentMethodRef{ID: pmID, Object: "payment_method", Type: "card"},
		}
		lpe := *e
		pi.LastPaymentError = &lpe
		e.PaymentIntent = pi.clone()
		return 402, errBody(e), true
	}
	s.stats.ChargesSucceeded++
	if capture == "manual" {
		pi.Status = "requires_capture"
		pi.AmountCapturable = amount
	} else {
		pi.Status = "succeeded"
		pi.AmountReceived = amount
	}
	return 200, pi.clone(), true
}

// getPaymentIntent serves GET /v1/payment_intents/{id}.
func (s *Server) getPaymentIntent(r *http.Request, _ string) (int, any) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.byPI[id]
	if !ok {
		aerr := invalid("intent", codeResourceMissing, "No such payment_intent: '%s'", id)
		return aerr.status, errBody(aerr.err)
	}
	return 200, it.pi.clone()
}

// listPaymentIntents serves GET /v1/payment_intents (newest first, never lagged).
func (s *Server) listPaymentIntents(r *http.Request, _ string) (int, any) {
	q := r.URL.Query()
	s.mu.Lock()
	all := make([]*PaymentIntent, 0, len(s.intents))
	for i := len(s.intents) - 1; i >= 0; i-- {
		pi := s.intents[i].pi
		if c := q.Get("customer"); c != "" && (pi.Customer == nil || *pi.Customer != c) {
			continue
		}
		all = append(all, pi.clone())
	}
	s.mu.Unlock()
	sel, more, aerr := page(q, all, func(p *PaymentIntent) string { return p.ID })
	if aerr != nil {
		return aerr.status, errBody(aerr.err)
	}
	return 200, List[*PaymentIntent]{Object: "list", Data: sel, HasMore: more, URL: "/v1/payment_intents"}
}

// searchPaymentIntents serves GET /v1/payment_intents/search. An object is
// visible only once the search lag has passed since its creation.
func (s *Server) searchPaymentIntents(r *http.Request, _ string) (int, any) {
	q := r.URL.Query()
	query := q.Get("query")
	if query == "" {
		aerr := invalid("query", codeParameterMissing, "Missing required param: query.")
		return aerr.status, errBody(aerr.err)
	}
	sq, err := parseSearch(query)
	if err != nil {
		aerr := invalid("query", "", "Invalid search query: %v", err)
		return aerr.status, errBody(aerr.err)
	}
	limit, aerr := limitParam(q)
	if aerr != nil {
		return aerr.status, errBody(aerr.err)
	}
	off := 0
	if p := q.Get("page"); p != "" {
		n, ok := decodePage(p)
		if !ok {
			aerr := invalid("page", "", "Invalid page: %s", p)
			return aerr.status, errBody(aerr.err)
		}
		off = n
	}
	s.mu.Lock()
	now := s.nowLocked()
	var hits []*PaymentIntent
	for i := len(s.intents) - 1; i >= 0; i-- {
		it := s.intents[i]
		if now.Sub(it.at) < s.searchLag {
			continue
		}
		if sq.match(it.pi) {
			hits = append(hits, it.pi.clone())
		}
	}
	s.mu.Unlock()
	res := SearchResult[*PaymentIntent]{Object: "search_result", Data: []*PaymentIntent{}, URL: "/v1/payment_intents/search"}
	if off < len(hits) {
		end := min(off+limit, len(hits))
		res.Data = hits[off:end]
		if end < len(hits) {
			res.HasMore = true
			np := encodePage(end)
			res.NextPage = &np
		}
	}
	return 200, res
}

// createRefund serves POST /v1/refunds. Unknown or missing references are
// validation errors (not saved); a refund larger than what is left on the
// charge is an invalid_request_error raised while executing (saved and
// replayed under its idempotency key).
func (s *Server) createRefund(r *http.Request, f *form) (int, any, bool) {
	if aerr := f.checkKnown("payment_intent", "charge", "amount", "reason", "metadata", "expand"); aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	amount, hasAmount, aerr := f.integer("amount", false)
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	if hasAmount && amount < 1 {
		aerr := invalid("amount", "", "Invalid positive integer")
		return aerr.status, errBody(aerr.err), false
	}
	reason := f.str("reason")
	switch reason {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		aerr := invalid("reason", "", "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
		return aerr.status, errBody(aerr.err), false
	}
	md, aerr := f.metadata()
	if aerr != nil {
		return aerr.status, errBody(aerr.err), false
	}
	piID, chID := f.str("payment_intent"), f.str("charge")
	if piID == "" && chID == "" {
		aerr := invalid("payment_intent", codeParameterMissing, "One of the following params should be provided for this request: payment_intent or charge.")
		return aerr.status, errBody(aerr.err), false
	}
	s.mu.Lock()
	it, ok := s.byPI[piID]
	param, ref := "payment_intent", piID
	if piID == "" {
		it, ok = s.byCharge[chID]
		param, ref = "charge", chID
	}
	s.mu.Unlock()
	if !ok {
		aerr := invalid(param, codeResourceMissing, "No such %s: '%s'", param, ref)
		return aerr.status, errBody(aerr.err), false
	}

	if s.checkpoint(r.Context()) {
		return execError()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	pi := it.pi
	if pi.Status != "succeeded" || pi.LatestCharge == nil {
		aerr := invalid("payment_intent", codeUnexpectedState, "This PaymentIntent (%s) does not have a successful charge to refund.", pi.ID)
		return aerr.status, errBody(aerr.err), true
	}
	if chID != "" && chID != *pi.LatestCharge {
		aerr := invalid("charge", "", "Charge %s did not succeed and cannot be refunded.", chID)
		return aerr.status, errBody(aerr.err), true
	}
	left := pi.AmountReceived - it.refunded
	if left <= 0 {
		aerr := invalid("charge", codeChargeRefunded, "Charge %s has already been refunded.", *pi.LatestCharge)
		return aerr.status, errBody(aerr.err), true
	}
	if !hasAmount {
		amount = left
	}
	if amount > left {
		aerr := invalid("amount", codeAmountTooLarge, "Refund amount (%s) is greater than unrefunded amount on charge (%s)", money(amount, pi.Currency), money(left, pi.Currency))
		return aerr.status, errBody(aerr.err), true
	}
	now := s.nowLocked()
	ref2 := &Refund{
		ID:            newID("re_"),
		Object:        "refund",
		Amount:        amount,
		Charge:        *pi.LatestCharge,
		Created:       now.Unix(),
		Currency:      pi.Currency,
		Metadata:      md,
		PaymentIntent: pi.ID,
		Reason:        strp(reason),
		Status:        "succeeded",
	}
	it.refunded += amount
	s.refunds = append(s.refunds, ref2)
	s.byRefund[ref2.ID] = ref2
	s.stats.Refunds++
	return 200, ref2.clone(), true
}

func money(amount int64, currency string) string {
	return fmt.Sprintf("%s%d.%02d", currencySymbol(currency), amount/100, amount%100)
}

func currencySymbol(c string) string {
	switch c {
	case "usd":
		return "$"
	case "eur":
		return "€"
	case "gbp":
		return "£"
	}
	return strings.ToUpper(c) + " "
}

// getRefund serves GET /v1/refunds/{id}.
func (s *Server) getRefund(r *http.Request, _ string) (int, any) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	ref, ok := s.byRefund[id]
	if !ok {
		aerr := invalid("id", codeResourceMissing, "No such refund: '%s'", id)
		return aerr.status, errBody(aerr.err)
	}
	return 200, ref.clone()
}

// listRefunds serves GET /v1/refunds, optionally filtered by
// payment_intent or charge, newest first.
func (s *Server) listRefunds(r *http.Request, _ string) (int, any) {
	q := r.URL.Query()
	s.mu.Lock()
	all := make([]*Refund, 0, len(s.refunds))
	for i := len(s.refunds) - 1; i >= 0; i-- {
		ref := s.refunds[i]
		if p := q.Get("payment_intent"); p != "" && ref.PaymentIntent != p {
			continue
		}
		if c := q.Get("charge"); c != "" && ref.Charge != c {
			continue
		}
		all = append(all, ref.clone())
	}
	s.mu.Unlock()
	sel, more, aerr := page(q, all, func(r *Refund) string { return r.ID })
	if aerr != nil {
		return aerr.status, errBody(aerr.err)
	}
	return 200, List[*Refund]{Object: "list", Data: sel, HasMore: more, URL: "/v1/refunds"}
}
