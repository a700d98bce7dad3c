package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// The operations and the entry points each implements. The manifest
// (manifests/email.toml) declares the recovery policy of each one; the host
// refuses the module when a declared policy lacks its entry point.
//
//	send             execute_with_key + reconcile   declared reconcile
//	release_message  execute                        declared manual
//	get_message      execute                        read
//	search_messages  execute                        read
func init() {
	guest.Register(
		guest.Operation{Name: "send", ExecuteWithKey: send, Reconcile: reconcileSend},
		guest.Operation{Name: "release_message", Execute: releaseMessage},
		guest.Operation{Name: "get_message", Execute: getMessage},
		guest.Operation{Name: "search_messages", Execute: searchMessages},
	)
}

// recipients accepts a JSON string or an array of strings.
type recipients []string

func (r *recipients) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*r = recipients{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("must be an email address or a list of them")
	}
	*r = many
	return nil
}

const maxRecipients = 50

// validAddress accepts a bare addr-spec (local@domain) without spaces,
// brackets or line breaks; Mailpit parses it again with net/mail.
func validAddress(a string) bool {
	at := strings.LastIndexByte(a, '@')
	return len(a) <= 320 && at > 0 && at < len(a)-1 && !strings.ContainsAny(a, " \t\r\n<>,;\"()[]\\")
}

// sendArgs are send's arguments.
type sendArgs struct {
	To      recipients `json:"to"`
	Cc      recipients `json:"cc"`
	Subject string     `json:"subject"`
	Text    string     `json:"text"`
	HTML    string     `json:"html"`
	From    string     `json:"from"`
}

func (a *sendArgs) validate() error {
	var bad []string
	if len(a.To) == 0 {
		bad = append(bad, "to needs at least one address")
	}
	if len(a.To)+len(a.Cc) > maxRecipients {
		bad = append(bad, fmt.Sprintf("at most %d recipients", maxRecipients))
	}
	for _, addr := range append(append([]string(nil), a.To...), a.Cc...) {
		if !validAddress(addr) {
			bad = append(bad, fmt.Sprintf("%q is not an email address", clip(addr, 80)))
		}
	}
	if a.From != "" && !validAddress(a.From) {
		bad = append(bad, "from is not an email address")
	}
	if strings.TrimSpace(a.Subject) == "" || len(a.Subject) > 998 || strings.ContainsAny(a.Subject, "\r\n") {
		bad = append(bad, "subject must be one non-empty line of at most 998 bytes")
	}
	if a.Text == "" && a.HTML == "" {
		bad = append(bad, "text or html is required")
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// Mailpit's POST /api/v1/send request body (server/apiv1 sendMessageParams).
type sendAddr struct {
	Name  string `json:"Name,omitempty"`
	Email string `json:"Email"`
}

type sendRequest struct {
	From    sendAddr          `json:"From"`
	To      []sendAddr        `json:"To"`
	Cc      []sendAddr        `json:"Cc,omitempty"`
	Subject string            `json:"Subject"`
	Text    string            `json:"Text"`
	HTML    string            `json:"HTML,omitempty"`
	Tags    []string          `json:"Tags"`
	Headers map[string]string `json:"Headers"`
}

func toSendAddrs(r recipients) []sendAddr {
	out := make([]sendAddr, len(r))
	for i, a := range r {
		out[i] = sendAddr{Email: a}
	}
	return out
}

// sendResult is send's result (and its reconcile's).
type sendResult struct {
	// ID is Mailpit's database ID of the stored message (the receipt).
	ID string `json:"id"`
	// MessageID is the Message-ID the connector derived from the key.
	MessageID string `json:"message_id"`
	// AlreadySent is true when an earlier attempt of this execution had
	// already delivered the message and nothing new was sent.
	AlreadySent bool `json:"already_sent"`
}

// send delivers a message through Mailpit's send API.
//
// Mailpit keeps no idempotency: two sends are two messages. So send is
// declared reconcile, not idempotent-retry, and it protects its own
// retries: the Message-ID is derived from the idempotency key, and before
// sending, send looks that Message-ID up (Mailpit's search reads its own
// writes). An attempt whose predecessor already landed returns that message
// instead of sending again. When the send's own answer is lost (timeout,
// network error, 5xx, unreadable body) it looks again: found is OK, not
// found is Uncertain — the request may still be in flight, so the host
// reconciles, and takes "not stored" as evidence only once the attempt has
// settled (the operation's reconcile_settle after its dispatch). A request
// that lands even later can still duplicate; running Mailpit with
// --ignore-duplicate-ids closes that too (the duplicate is dropped by
// Message-ID).
func send(c *guest.Call, args []byte) abi.Outcome {
	var a sendArgs
	if err := guest.DecodeArgs(args, &a); err != nil {
		return guest.Permanent("send: invalid arguments: %v", err)
	}
	if err := a.validate(); err != nil {
		return guest.Permanent("send: invalid arguments: %v", err)
	}
	if c.Key == "" {
		return guest.Permanent("send: no idempotency key: send must be called through execute_with_key")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("send: %v", err)
	}
	from := a.From
	if from == "" {
		if from, err = optionalConfig(c, "default_from", defaultFrom); err != nil {
			return guest.Permanent("send: %v", err)
		}
	}
	id := messageID(c.Key)

	// Pre-check: did an earlier attempt of this execution already land?
	prior, pf := m.findByMessageID(id)
	if pf != nil {
		if pf.sent {
			return guest.Retryable("send: nothing sent: looking for an earlier attempt failed: %s", pf.msg)
		}
		return guest.Permanent("send: nothing sent: looking for an earlier attempt failed: %s", pf.msg)
	}
	if prior != nil {
		return guest.OK(sendResult{ID: prior.ID, MessageID: id, AlreadySent: true}, prior.ID)
	}

	req := sendRequest{
		From:    sendAddr{Email: from},
		To:      toSendAddrs(a.To),
		Cc:      toSendAddrs(a.Cc),
		Subject: a.Subject,
		Text:    a.Text,
		HTML:    a.HTML,
		Tags:    []string{"connhost", keyTag(c.Key)},
		Headers: map[string]string{"Message-ID": "<" + id + ">"},
	}
	if x := c.ExecutionID(); x != "" && !strings.ContainsAny(x, "\r\n") {
		req.Headers["X-Connhost-Execution-Id"] = x
	}
	resp := m.do("POST", "/api/v1/send", nil, req)
	f, ok := check(resp)
	if ok {
		var out struct {
			ID *string `json:"ID"`
		}
		switch err := json.Unmarshal(resp.Body, &out); {
		case err != nil || out.ID == nil:
			f = failure{sent: true, msg: fmt.Sprintf("mailpit: unreadable send response (%d bytes)", len(resp.Body))}
		case *out.ID != "":
			return guest.OK(sendResult{ID: *out.ID, MessageID: id}, *out.ID)
		default:
			// Mailpit answers an empty ID when --ignore-duplicate-ids
			// dropped the message: one with this Message-ID is stored.
			f = failure{sent: true, msg: "mailpit ignored the message as a duplicate Message-ID"}
		}
	}
	switch {
	case !f.sent:
		return guest.Permanent("send: %s", f.msg)
	case f.refused:
		return guest.Retryable("send: %s", f.msg)
	}
	// The request may have been stored: look before saying anything.
	landed, lf := m.findByMessageID(id)
	switch {
	case lf != nil:
		return guest.Uncertain("send: %s; checking whether it was stored failed too: %s", f.msg, lf.msg)
	case landed != nil:
		return guest.OK(sendResult{ID: landed.ID, MessageID: id}, landed.ID)
	}
	// Not stored yet is not "not sent": the request may still be on its
	// way through Mailpit. The host reconciles once it has settled.
	return guest.Uncertain("send: %s; no message with Message-ID <%s> is stored yet", f.msg, id)
}

// reconcileSend decides whether an earlier send took effect by looking up
// the key's Message-ID, compared exactly. Found: Applied with Mailpit's ID.
// The whole result read and none found: NotApplied (Mailpit stores a sent
// message before it answers, and a re-dispatch pre-checks again). Mailpit
// unreachable, 5xx or garbage: Unknown.
//
// NotApplied is only as good as Mailpit's retention: a message deleted by a
// user or pruned by --max / --max-age before reconcile runs looks unsent.
func reconcileSend(c *guest.Call, args []byte) abi.Outcome {
	if c.Key == "" {
		return guest.Unknown("send reconcile: no idempotency key")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Unknown("send reconcile: %v", err)
	}
	id := messageID(c.Key)
	s, f := m.findByMessageID(id)
	switch {
	case f != nil:
		return guest.Unknown("send reconcile: %s", f.msg)
	case s == nil:
		return guest.NotApplied("send reconcile: no message with Message-ID <%s> is stored", id)
	}
	return guest.Applied(sendResult{ID: s.ID, MessageID: id}, s.ID)
}

// releaseArgs are release_message's arguments.
type releaseArgs struct {
	ID string     `json:"id"`
	To recipients `json:"to"`
}

// releaseMessage relays a stored message to real recipients through the
// SMTP relay Mailpit is configured with (POST /api/v1/message/{ID}/release).
//
// It is declared manual. Mailpit keeps no record of a release, sets a fresh
// random Message-ID on the relayed copy (unless the relay preserves IDs) and
// has no idempotency; the downstream SMTP server is not searchable through
// any API the connector may reach. Nothing can tell whether a lost release
// happened, so neither idempotent-retry nor reconcile would be honest.
//
// An answer lost after the request may have been acted on is Uncertain
// (and logged at error level): the manual policy then makes the call
// recovery_required for an operator. The manifest caps the operation at
// one attempt.
func releaseMessage(c *guest.Call, args []byte) abi.Outcome {
	var a releaseArgs
	if err := guest.DecodeArgs(args, &a); err != nil {
		return guest.Permanent("release_message: invalid arguments: %v", err)
	}
	var bad []string
	if !validMailboxID(a.ID) {
		bad = append(bad, "id must be a Mailpit message ID")
	}
	if len(a.To) == 0 || len(a.To) > maxRecipients {
		bad = append(bad, fmt.Sprintf("to needs 1 to %d addresses", maxRecipients))
	}
	for _, addr := range a.To {
		if !validAddress(addr) {
			bad = append(bad, fmt.Sprintf("%q is not an email address", clip(addr, 80)))
		}
	}
	if len(bad) > 0 {
		return guest.Permanent("release_message: invalid arguments: %s", strings.Join(bad, "; "))
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("release_message: %v", err)
	}
	resp := m.do("POST", "/api/v1/message/"+url.PathEscape(a.ID)+"/release", nil,
		struct{ To []string }{To: a.To})
	if f, ok := check(resp); !ok {
		if f.sent {
			msg := "release_message: outcome uncertain, the relay may have happened; not retried automatically: " + f.msg
			c.Error(msg)
			return guest.Uncertain("%s", msg)
		}
		return guest.Permanent("release_message: %s", f.msg)
	}
	return guest.OK(struct {
		ID       string   `json:"id"`
		Released []string `json:"released_to"`
	}{a.ID, a.To}, a.ID)
}

// readFailure maps a failed read: transient answers are retryable (a read
// can always run again), the rest permanent.
func readFailure(op string, f failure) abi.Outcome {
	if f.sent {
		return guest.Retryable("%s: %s", op, f.msg)
	}
	return guest.Permanent("%s: %s", op, f.msg)
}

// maxText bounds the message text get_message returns to the model.
const maxText = 32 << 10

// messageView is get_message's result.
type messageView struct {
	ID        string    `json:"id"`
	MessageID string    `json:"message_id"`
	From      *address  `json:"from"`
	To        []address `json:"to"`
	Cc        []address `json:"cc"`
	Subject   string    `json:"subject"`
	Date      string    `json:"date"`
	Tags      []string  `json:"tags"`
	Text      string    `json:"text"`
	Truncated bool      `json:"text_truncated"`
	Size      uint64    `json:"size"`
}

// getMessage returns one stored message (GET /api/v1/message/{ID}).
func getMessage(c *guest.Call, args []byte) abi.Outcome {
	var a struct {
		ID string `json:"id"`
	}
	if err := guest.DecodeArgs(args, &a); err != nil {
		return guest.Permanent("get_message: invalid arguments: %v", err)
	}
	if !validMailboxID(a.ID) {
		return guest.Permanent("get_message: invalid arguments: id must be a Mailpit message ID")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("get_message: %v", err)
	}
	resp := m.do("GET", "/api/v1/message/"+url.PathEscape(a.ID), nil, nil)
	if f, ok := check(resp); !ok {
		return readFailure("get_message", f)
	}
	var msg struct {
		ID        string    `json:"ID"`
		MessageID string    `json:"MessageID"`
		From      *address  `json:"From"`
		To        []address `json:"To"`
		Cc        []address `json:"Cc"`
		Subject   string    `json:"Subject"`
		Date      string    `json:"Date"`
		Tags      []string  `json:"Tags"`
		Text      string    `json:"Text"`
		Size      uint64    `json:"Size"`
	}
	if err := json.Unmarshal(resp.Body, &msg); err != nil || msg.ID == "" {
		return guest.Permanent("get_message: unreadable response from Mailpit (%d bytes)", len(resp.Body))
	}
	v := messageView{ID: msg.ID, MessageID: msg.MessageID, From: msg.From, To: msg.To, Cc: msg.Cc,
		Subject: msg.Subject, Date: msg.Date, Tags: msg.Tags, Text: msg.Text, Size: msg.Size}
	if len(v.Text) > maxText {
		v.Text, v.Truncated = strings.ToValidUTF8(v.Text[:maxText], ""), true
	}
	return guest.OK(v, msg.ID)
}

// searchMessages runs a Mailpit search (GET /api/v1/search) with Mailpit's
// search syntax (to:, from:, subject:, message-id:, tag:, is:unread, …).
func searchMessages(c *guest.Call, args []byte) abi.Outcome {
	var a struct {
		Query string `json:"query"`
		Limit *int   `json:"limit"`
	}
	if err := guest.DecodeArgs(args, &a); err != nil {
		return guest.Permanent("search_messages: invalid arguments: %v", err)
	}
	limit := 20
	if a.Limit != nil {
		limit = *a.Limit
	}
	if strings.TrimSpace(a.Query) == "" || len(a.Query) > 500 || strings.ContainsAny(a.Query, "\r\n") || limit < 1 || limit > 50 {
		return guest.Permanent("search_messages: invalid arguments: query must be one non-empty line (≤500 bytes), limit 1..50")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("search_messages: %v", err)
	}
	p, f := m.search(a.Query, 0, limit)
	if f != nil {
		return readFailure("search_messages", *f)
	}
	type hit struct {
		ID        string    `json:"id"`
		MessageID string    `json:"message_id"`
		From      *address  `json:"from"`
		To        []address `json:"to"`
		Subject   string    `json:"subject"`
		Created   string    `json:"created"`
		Tags      []string  `json:"tags"`
		Snippet   string    `json:"snippet"`
	}
	out := struct {
		Total    uint64 `json:"total"`
		Messages []hit  `json:"messages"`
	}{Total: *p.MessagesCount, Messages: make([]hit, 0, len(p.Messages))}
	for _, s := range p.Messages {
		out.Messages = append(out.Messages, hit{s.ID, s.MessageID, s.From, s.To, s.Subject, s.Created, s.Tags, s.Snippet})
	}
	return guest.OK(out, "")
}
