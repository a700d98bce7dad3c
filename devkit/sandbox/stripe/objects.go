package stripe

// The wire types below are the subset of Stripe's API objects the emulator
// serves. Field names and JSON shapes follow https://docs.stripe.com/api;
// fields the emulator does not model are omitted, not faked.

// PaymentIntent is Stripe's payment_intent object.
type PaymentIntent struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *Error            `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	ReceiptEmail       *string           `json:"receipt_email"`
	Status             string            `json:"status"`
}

// Refund is Stripe's refund object.
type Refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

// Error is the object inside Stripe's error answer {"error": {...}}.
type Error struct {
	Type          string            `json:"type"`
	Code          string            `json:"code,omitempty"`
	DeclineCode   string            `json:"decline_code,omitempty"`
	Message       string            `json:"message"`
	Param         string            `json:"param,omitempty"`
	DocURL        string            `json:"doc_url,omitempty"`
	Charge        string            `json:"charge,omitempty"`
	PaymentIntent *PaymentIntent    `json:"payment_intent,omitempty"`
	PaymentMethod *PaymentMethodRef `json:"payment_method,omitempty"`
}

// PaymentMethodRef is the short payment_method object carried by card errors.
type PaymentMethodRef struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	Type   string `json:"type"`
}

// ErrorResponse is Stripe's error envelope.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

// List is Stripe's list object (GET /v1/payment_intents, GET /v1/refunds).
type List[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
}

// SearchResult is Stripe's search_result object.
type SearchResult[T any] struct {
	Object   string  `json:"object"`
	Data     []T     `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
	URL      string  `json:"url"`
}

// Error types and codes used by the emulator (https://docs.stripe.com/error-codes).
const (
	typeInvalidRequest = "invalid_request_error"
	typeCard           = "card_error"
	typeAPI            = "api_error"
	typeIdempotency    = "idempotency_error"

	codeParameterMissing    = "parameter_missing"
	codeParameterUnknown    = "parameter_unknown"
	codeParameterInvalid    = "parameter_invalid_integer"
	codeResourceMissing     = "resource_missing"
	codeAmountTooSmall      = "amount_too_small"
	codeAmountTooLarge      = "amount_too_large"
	codeCardDeclined        = "card_declined"
	codeChargeRefunded      = "charge_already_refunded"
	codeIdempotencyKeyInUse = "idempotency_key_in_use"
	codeUnexpectedState     = "payment_intent_unexpected_state"
	codeRateLimit           = "rate_limit"
)

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (pi *PaymentIntent) clone() *PaymentIntent {
	c := *pi
	c.Metadata = cloneMap(pi.Metadata)
	c.PaymentMethodTypes = append([]string(nil), pi.PaymentMethodTypes...)
	if pi.LastPaymentError != nil {
		e := *pi.LastPaymentError
		c.LastPaymentError = &e
	}
	return &c
}

func (r *Refund) clone() *Refund {
	c := *r
	c.Metadata = cloneMap(r.Metadata)
	return &c
}

func cloneMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
