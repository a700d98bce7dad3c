package main

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
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

// read reads one address or a list of them. null reads as one empty
// address, which validation refuses.
func (r *recipients) read(v *codec.Value) error {
	switch v.Kind() {
	case codec.KindString:
		var one string
		err := v.String(&one)
		*r = recipients{one}
		return err
	case codec.KindArray:
		return v.Strings((*[]string)(r))
	case codec.KindNull:
		*r = recipients{""}
		return v.Skip()
	}
	if err := v.Skip(); err != nil {
		return err
	}
	return errors.New("must be an email address or a list of them")
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
	To      recipients
	Cc      recipients
	Subject string
	Text    string
	HTML    string
	From    string
}

// member reads one argument; any other name is refused as unknown.
func (a *sendArgs) member(name string, v *codec.Value) error {
	switch name {
	case "to":
		return a.To.read(v)
	case "cc":
		return a.Cc.read(v)
	case "subject":
		return v.String(&a.Subject)
	case "text":
		return v.String(&a.Text)
	case "html":
		return v.String(&a.HTML)
	case "from":
		return v.String(&a.From)
	}
	return nil
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

// json returns r as encoding/json marshals it.
func (r sendRequest) json() []byte {
	addr := func(o *codec.Object, a sendAddr) {
		if a.Name != "" {
			o.String("Name", a.Name)
		}
		o.String("Email", a.Email)
	}
	addrs := func(o *codec.Object, name string, list []sendAddr) {
		if list == nil {
			o.Null(name)
			return
		}
		o.Array(name, func(arr *codec.Array) {
			for _, a := range list {
				arr.Object(func(o *codec.Object) { addr(o, a) })
			}
		})
	}
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.Object("From", func(o *codec.Object) { addr(o, r.From) })
		addrs(o, "To", r.To)
		if len(r.Cc) > 0 {
			addrs(o, "Cc", r.Cc)
		}
		o.String("Subject", r.Subject)
		o.String("Text", r.Text)
		if r.HTML != "" {
			o.String("HTML", r.HTML)
		}
		o.Strings("Tags", r.Tags)
		o.StringMap("Headers", r.Headers)
	})
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

// json returns r as encoding/json marshals it.
func (r sendResult) json() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("id", r.ID)
		o.String("message_id", r.MessageID)
		o.Bool("already_sent", r.AlreadySent)
	})
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
	if err := guest.ReadArgs(args, a.member); err != nil {
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
		return guest.OK(sendResult{ID: prior.ID, MessageID: id, AlreadySent: true}.json(), prior.ID)
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
	resp := m.do("POST", "/api/v1/send", "", req.json())
	f, ok := check(resp)
	if ok {
		var sent *string
		err := codec.DecodeObject(resp.Body, func(name string, v *codec.Value) error {
			if name == "ID" {
				return v.OptString(&sent)
			}
			return nil
		})
		switch {
		case err != nil || sent == nil:
			f = failure{sent: true, msg: fmt.Sprintf("mailpit: unreadable send response (%d bytes)", len(resp.Body))}
		case *sent != "":
			return guest.OK(sendResult{ID: *sent, MessageID: id}.json(), *sent)
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
		return guest.OK(sendResult{ID: landed.ID, MessageID: id}.json(), landed.ID)
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
	return guest.Applied(sendResult{ID: s.ID, MessageID: id}.json(), s.ID)
}

// releaseArgs are release_message's arguments.
type releaseArgs struct {
	ID string
	To recipients
}

// member reads one argument; any other name is refused as unknown.
func (a *releaseArgs) member(name string, v *codec.Value) error {
	switch name {
	case "id":
		return v.String(&a.ID)
	case "to":
		return a.To.read(v)
	}
	return nil
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
	if err := guest.ReadArgs(args, a.member); err != nil {
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
	resp := m.do("POST", "/api/v1/message/"+url.PathEscape(a.ID)+"/release", "",
		codec.AppendObject(nil, func(o *codec.Object) { o.Strings("To", a.To) }))
	if f, ok := check(resp); !ok {
		if f.sent {
			msg := "release_message: outcome uncertain, the relay may have happened; not retried automatically: " + f.msg
			c.Error(msg)
			return guest.Uncertain("%s", msg)
		}
		return guest.Permanent("release_message: %s", f.msg)
	}
	return guest.OK(codec.AppendObject(nil, func(o *codec.Object) {
		o.String("id", a.ID)
		o.Strings("released_to", a.To)
	}), a.ID)
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

// json returns v as encoding/json marshals it.
func (v messageView) json() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("id", v.ID)
		o.String("message_id", v.MessageID)
		writeAddress(o, "from", v.From)
		writeAddresses(o, "to", v.To)
		writeAddresses(o, "cc", v.Cc)
		o.String("subject", v.Subject)
		o.String("date", v.Date)
		o.Strings("tags", v.Tags)
		o.String("text", v.Text)
		o.Bool("text_truncated", v.Truncated)
		o.Uint("size", v.Size)
	})
}

// message is what get_message reads of Mailpit's Message.
type message struct {
	ID, MessageID string
	From          *address
	To, Cc        []address
	Subject, Date string
	Tags          []string
	Text          string
	Size          uint64
}

func (m *message) member(name string, v *codec.Value) error {
	switch name {
	case "ID":
		return v.String(&m.ID)
	case "MessageID":
		return v.String(&m.MessageID)
	case "From":
		return readAddress(v, &m.From)
	case "To":
		return readAddresses(v, &m.To)
	case "Cc":
		return readAddresses(v, &m.Cc)
	case "Subject":
		return v.String(&m.Subject)
	case "Date":
		return v.String(&m.Date)
	case "Tags":
		return v.Strings(&m.Tags)
	case "Text":
		return v.String(&m.Text)
	case "Size":
		return v.Uint64(&m.Size)
	}
	return nil
}

// getMessage returns one stored message (GET /api/v1/message/{ID}).
func getMessage(c *guest.Call, args []byte) abi.Outcome {
	var id string
	err := guest.ReadArgs(args, func(name string, v *codec.Value) error {
		if name == "id" {
			return v.String(&id)
		}
		return nil
	})
	if err != nil {
		return guest.Permanent("get_message: invalid arguments: %v", err)
	}
	if !validMailboxID(id) {
		return guest.Permanent("get_message: invalid arguments: id must be a Mailpit message ID")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("get_message: %v", err)
	}
	resp := m.do("GET", "/api/v1/message/"+url.PathEscape(id), "", nil)
	if f, ok := check(resp); !ok {
		return readFailure("get_message", f)
	}
	var msg message
	if err := codec.DecodeObject(resp.Body, msg.member); err != nil || msg.ID == "" {
		return guest.Permanent("get_message: unreadable response from Mailpit (%d bytes)", len(resp.Body))
	}
	v := messageView{ID: msg.ID, MessageID: msg.MessageID, From: msg.From, To: msg.To, Cc: msg.Cc,
		Subject: msg.Subject, Date: msg.Date, Tags: msg.Tags, Text: msg.Text, Size: msg.Size}
	if len(v.Text) > maxText {
		v.Text, v.Truncated = strings.ToValidUTF8(v.Text[:maxText], ""), true
	}
	return guest.OK(v.json(), msg.ID)
}

// searchMessages runs a Mailpit search (GET /api/v1/search) with Mailpit's
// search syntax (to:, from:, subject:, message-id:, tag:, is:unread, …).
func searchMessages(c *guest.Call, args []byte) abi.Outcome {
	var query string
	limit := int64(20)
	err := guest.ReadArgs(args, func(name string, v *codec.Value) error {
		switch name {
		case "query":
			return v.String(&query)
		case "limit":
			return v.Int64(&limit)
		}
		return nil
	})
	if err != nil {
		return guest.Permanent("search_messages: invalid arguments: %v", err)
	}
	if strings.TrimSpace(query) == "" || len(query) > 500 || strings.ContainsAny(query, "\r\n") || limit < 1 || limit > 50 {
		return guest.Permanent("search_messages: invalid arguments: query must be one non-empty line (≤500 bytes), limit 1..50")
	}
	m, err := newMailpit(c)
	if err != nil {
		return guest.Permanent("search_messages: %v", err)
	}
	p, f := m.search(query, 0, int(limit))
	if f != nil {
		return readFailure("search_messages", *f)
	}
	return guest.OK(codec.AppendObject(nil, func(o *codec.Object) {
		o.Uint("total", *p.MessagesCount)
		o.Array("messages", func(a *codec.Array) {
			for _, s := range p.Messages {
				a.Object(func(o *codec.Object) {
					o.String("id", s.ID)
					o.String("message_id", s.MessageID)
					writeAddress(o, "from", s.From)
					writeAddresses(o, "to", s.To)
					o.String("subject", s.Subject)
					o.String("created", s.Created)
					o.Strings("tags", s.Tags)
					o.String("snippet", s.Snippet)
				})
			}
		})
	}), "")
}
