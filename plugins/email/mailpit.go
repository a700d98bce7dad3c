package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
)

// defaultBaseURL is used when the host has no "base_url" configured:
// Mailpit's default HTTP port, on loopback.
const defaultBaseURL = "http://127.0.0.1:8025"

// defaultFrom is the sender when neither the arguments nor the
// "default_from" config give one (Mailpit refuses a message without From).
const defaultFrom = "connhost@connhost.invalid"

// idDomain is the right-hand side of every Message-ID the connector mints.
const idDomain = "connhost.invalid"

// messageID derives the Message-ID (without angle brackets, as Mailpit
// stores it) from the idempotency key. It is deterministic, so reconcile can
// find the message an earlier attempt sent. A key made only of
// [A-Za-z0-9_-] is used verbatim (readable next to the ledger); any other
// key is replaced by its SHA-256 after "sha256." — a form a verbatim key
// cannot take, since verbatim keys have no dot.
func messageID(key string) string {
	if verbatimKey(key) {
		return key + "@" + idDomain
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256." + hex.EncodeToString(sum[:]) + "@" + idDomain
}

func verbatimKey(key string) bool {
	if key == "" || len(key) > 128 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// keyTag is the Mailpit tag put on every message sent for key: lower-case
// (Mailpit lower-cases "tag:" search terms and compares tag names exactly)
// and inside Mailpit's tag charset [a-zA-Z0-9 _.@-]. It helps humans;
// reconcile does not rely on it, because Mailpit can be run with X-Tags
// disabled or title-cased.
func keyTag(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "connhost-" + hex.EncodeToString(sum[:8])
}

// client is a Mailpit API client bound to one call.
type client struct {
	call *guest.Call
	base string // scheme://host[:port][/webroot], no trailing slash
	auth string // Authorization header value, or ""
}

// newMailpit reads the connector's config: base_url (default
// defaultBaseURL) and basic_auth ("user:password", optional, for Mailpit's
// --send-api-auth-file / --ui-auth-file).
func newMailpit(c *guest.Call) (*client, error) {
	base, err := optionalConfig(c, "base_url", defaultBaseURL)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("config base_url %q is not an http(s) origin", base)
	}
	m := &client{call: c, base: strings.TrimRight(base, "/")}
	cred, err := optionalConfig(c, "basic_auth", "")
	if err != nil {
		return nil, err
	}
	if cred != "" {
		if !strings.Contains(cred, ":") || strings.ContainsAny(cred, "\r\n") {
			return nil, errors.New(`config basic_auth must be "user:password"`)
		}
		m.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(cred))
	}
	return m, nil
}

// optionalConfig returns the value of a declared config key, or def when it
// is declared but not set.
func optionalConfig(c *guest.Call, key, def string) (string, error) {
	v, err := c.Config(key)
	switch {
	case errors.Is(err, guest.ErrConfigNotSet) || (err == nil && v == ""):
		return def, nil
	case err != nil:
		return "", err
	}
	return v, nil
}

// do performs one request. query, when non-empty, is the encoded URL
// query; body, when non-nil, is a JSON body.
func (m *client) do(method, path, query string, body []byte) abi.HTTPResponse {
	u := m.base + path
	if query != "" {
		u += "?" + query
	}
	h := make([]abi.Header, 1, 3)
	h[0] = abi.Header{Name: "Accept", Value: "application/json"}
	if m.auth != "" {
		h = append(h, abi.Header{Name: "Authorization", Value: m.auth})
	}
	if body != nil {
		h = append(h, abi.Header{Name: "Content-Type", Value: "application/json"})
	}
	return m.call.HTTP(abi.HTTPRequest{Method: method, URL: u, Header: h, Body: body})
}

// failure describes a response that is not a usable 2xx answer. sent says
// whether the request may have reached Mailpit and been acted on: a timeout,
// a network error, a 5xx (often a proxy that did forward the request) or an
// oversized answer. Requests the host never sent (denied, malformed) and
// Mailpit's own 4xx validation answers did not act.
type failure struct {
	// sent: the request may have reached Mailpit and been acted on, or
	// was refused for now (refused): worth another attempt either way.
	sent bool
	// refused: Mailpit (or a proxy) answered 429 or 408, so nothing was
	// stored by this request.
	refused bool
	msg     string
}

// check classifies resp; ok means a 2xx the caller should decode.
func check(resp abi.HTTPResponse) (failure, bool) {
	switch resp.Err {
	case abi.HTTPOK:
	case abi.HTTPDenied:
		return failure{msg: "mailpit: request denied by the connector's http allowlist: " + resp.Message}, false
	case abi.HTTPTimeout, abi.HTTPNetwork, abi.HTTPTooLarge, abi.HTTPInvalid:
		// HTTPInvalid is also what the guest SDK reports when the host's
		// response envelope does not decode, after the request was
		// performed: treat it as possibly sent.
		return failure{sent: true, msg: fmt.Sprintf("mailpit: %s: %s", resp.Err, resp.Message)}, false
	default:
		return failure{msg: fmt.Sprintf("mailpit: http error %s: %s", resp.Err, resp.Message)}, false
	}
	if resp.Status >= 200 && resp.Status < 300 {
		return failure{}, true
	}
	f := failure{sent: resp.Status >= 500 || resp.Status == 429 || resp.Status == 408,
		refused: resp.Status == 429 || resp.Status == 408,
		msg:     fmt.Sprintf("mailpit: HTTP %d: %s", resp.Status, errorText(resp.Body))}
	return f, false
}

// errorText extracts Mailpit's error: a JSON {"Error": "..."} or plain text.
func errorText(b []byte) string {
	var e string
	err := codec.DecodeObject(b, func(name string, v *codec.Value) error {
		if name == "Error" {
			return v.String(&e)
		}
		return nil
	})
	if err == nil && e != "" {
		return clip(e, 300)
	}
	s := strings.TrimSpace(string(b))
	if s == "" || strings.HasPrefix(s, "<") || !isText(s) {
		return fmt.Sprintf("(%d-byte body)", len(b))
	}
	return clip(s, 300)
}

func isText(s string) bool {
	for _, r := range s {
		if r == '\uFFFD' || (r < 0x20 && r != '\n' && r != '\t' && r != '\r') {
			return false
		}
	}
	return true
}

// clip shortens s to at most n bytes of valid UTF-8.
func clip(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "…"
	}
	return strings.ToValidUTF8(s, "")
}

// address is Mailpit's {"Name", "Address"} (net/mail.Address as JSON),
// which results show the model as {"name", "address"}.
type address struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

func (a *address) member(name string, v *codec.Value) error {
	switch name {
	case "Name":
		return v.String(&a.Name)
	case "Address":
		return v.String(&a.Address)
	}
	return nil
}

// readAddress reads an address or null.
func readAddress(v *codec.Value, dst **address) error {
	if v.Kind() == codec.KindNull {
		*dst = nil
		return v.Skip()
	}
	if *dst == nil {
		*dst = new(address)
	}
	return v.Object((*dst).member)
}

// readAddresses reads a list of addresses (null elements read as empty
// ones) or null.
func readAddresses(v *codec.Value, dst *[]address) error {
	if v.Kind() == codec.KindNull {
		*dst = nil
		return v.Skip()
	}
	list := []address{}
	err := v.Array(func(e *codec.Value) error {
		list = append(list, address{})
		return e.Object(list[len(list)-1].member)
	})
	*dst = list
	return err
}

// writeAddress writes an address as a result shows it, or null.
func writeAddress(o *codec.Object, name string, a *address) {
	if a == nil {
		o.Null(name)
		return
	}
	o.Object(name, func(o *codec.Object) {
		o.String("name", a.Name)
		o.String("address", a.Address)
	})
}

// writeAddresses writes a list of addresses, or null for a nil list.
func writeAddresses(o *codec.Object, name string, list []address) {
	if list == nil {
		o.Null(name)
		return
	}
	o.Array(name, func(arr *codec.Array) {
		for _, a := range list {
			arr.Object(func(o *codec.Object) {
				o.String("name", a.Name)
				o.String("address", a.Address)
			})
		}
	})
}

// summary is what the connector reads of Mailpit's MessageSummary (search
// and list results).
type summary struct {
	ID        string
	MessageID string
	From      *address
	To        []address
	Subject   string
	Created   string
	Tags      []string
	Snippet   string
}

func (s *summary) member(name string, v *codec.Value) error {
	switch name {
	case "ID":
		return v.String(&s.ID)
	case "MessageID":
		return v.String(&s.MessageID)
	case "From":
		return readAddress(v, &s.From)
	case "To":
		return readAddresses(v, &s.To)
	case "Subject":
		return v.String(&s.Subject)
	case "Created":
		return v.String(&s.Created)
	case "Tags":
		return v.Strings(&s.Tags)
	case "Snippet":
		return v.String(&s.Snippet)
	}
	return nil
}

// searchPage is what the connector reads of Mailpit's MessagesSummary for
// GET /api/v1/search.
type searchPage struct {
	MessagesCount *uint64
	Messages      []summary
}

func (p *searchPage) member(name string, v *codec.Value) error {
	switch name {
	case "messages_count":
		return v.OptUint64(&p.MessagesCount)
	case "messages":
		if v.Kind() == codec.KindNull {
			p.Messages = nil
			return v.Skip()
		}
		p.Messages = []summary{}
		return v.Array(func(e *codec.Value) error {
			p.Messages = append(p.Messages, summary{})
			return e.Object(p.Messages[len(p.Messages)-1].member)
		})
	}
	return nil
}

func (m *client) search(query string, start, limit int) (searchPage, *failure) {
	// Fields in sorted order, as url.Values.Encode wrote them.
	var q codec.Form
	q.Add("limit", strconv.Itoa(limit))
	q.Add("query", query)
	q.Add("start", strconv.Itoa(start))
	resp := m.do("GET", "/api/v1/search", q.String(), nil)
	if f, ok := check(resp); !ok {
		return searchPage{}, &f
	}
	var p searchPage
	if err := codec.DecodeObject(resp.Body, p.member); err != nil || p.MessagesCount == nil {
		return searchPage{}, &failure{msg: fmt.Sprintf("mailpit: unreadable search response (%d bytes)", len(resp.Body))}
	}
	return p, nil
}

// Paging of findByMessageID: Mailpit's message-id filter is a substring
// match, so a short id could match many messages; the connector reads at
// most findPages pages before giving up.
const (
	findPageSize = 50
	findPages    = 20
)

// findByMessageID returns the stored message whose Message-ID is exactly
// id, or nil when the whole result set was read and none is. Mailpit's
// "message-id:" filter is a case-insensitive substring match (SQL LIKE
// %id%), so every hit is compared exactly; a message whose Message-ID only
// contains id does not count. A failure means "could not decide".
func (m *client) findByMessageID(id string) (*summary, *failure) {
	var found []summary
	for start, page := 0, 0; ; page++ {
		if page == findPages {
			return nil, &failure{msg: fmt.Sprintf("mailpit: more than %d messages match message-id:%s", findPages*findPageSize, id)}
		}
		p, f := m.search("message-id:"+id, start, findPageSize)
		if f != nil {
			return nil, f
		}
		for _, s := range p.Messages {
			if s.MessageID == id && s.ID != "" {
				found = append(found, s)
			}
		}
		start += len(p.Messages)
		if len(p.Messages) == 0 || uint64(start) >= *p.MessagesCount {
			break
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	if len(found) > 1 {
		ids := make([]string, len(found))
		for i, s := range found {
			ids[i] = s.ID
		}
		m.call.Error("mailpit holds several messages with Message-ID <" + id + ">: " + strings.Join(ids, ", "))
	}
	// Results are newest first: the oldest is the one the first attempt sent.
	s := found[len(found)-1]
	return &s, nil
}

// validMailboxID reports whether id looks like a Mailpit database ID
// (short UUIDs, alphanumeric).
func validMailboxID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
