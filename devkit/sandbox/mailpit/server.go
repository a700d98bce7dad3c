// Package mailpit is an emulator of the subset of Mailpit's HTTP
// API v1 (https://mailpit.axllent.org/docs/api-v1/) the email connector
// uses: send, list, search, get, release and delete. Its behaviour follows
// Mailpit v1.33.1's source and is checked against a real Mailpit by the
// contract tests in this package:
//
//   - there is no idempotency: two sends are two messages (unless
//     Options.IgnoreDuplicateIDs, Mailpit's --ignore-duplicate-ids, drops a
//     send whose Message-ID is already stored and answers an empty ID);
//   - a custom Message-ID is taken from Headers["Message-ID"] (any case),
//     stored without its angle brackets; without one Mailpit generates
//     "<id>@mailpit";
//   - search "message-id:X" is a case-insensitive substring match, so the
//     caller must compare the returned MessageID exactly; "tag:X" matches a
//     tag name exactly (case-insensitively); other words match the
//     addresses, subject and body as substrings;
//   - release relays a stored message through the SMTP relay Mailpit is
//     configured with (--smtp-relay-config) and keeps no record of it.
//     Without a relay it fails, 400 "SMTP error: …", as Mailpit does; with
//     Options.RelayToSelf the relay is the emulator's own mailbox, the way
//     connhost's tests run the real Mailpit (its relay pointed at its own
//     SMTP server): the released copy comes back as a new message with a
//     new ID and Message-ID, the recipients not in its To or Cc as Bcc.
//
// A test-only control API under /_sandbox/ injects faults and reports
// statistics. A Server keeps its messages in memory, and with Persist also
// in a file it reloads after a restart. It is safe for concurrent use.
package mailpit

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/mail"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/connhost/connhost/devkit/sandbox/fault"
	"github.com/connhost/connhost/devkit/sandbox/statefile"
)

// Options configures a Server.
type Options struct {
	// Now returns the current time. The default value is time.Now.
	Now func() time.Time
	// MaxBodyBytes caps the send request body. The default value is 8 MiB.
	MaxBodyBytes int64
	// IgnoreDuplicateIDs mirrors Mailpit's --ignore-duplicate-ids: a send
	// whose custom Message-ID equals (exactly) that of a stored message is
	// dropped and answered 200 with an empty ID. The default value is
	// false, Mailpit's default.
	IgnoreDuplicateIDs bool
	// RelayToSelf gives release an SMTP relay that delivers to this
	// emulator (a released message is stored again, as a new message),
	// like a Mailpit whose --smtp-relay-config names its own SMTP server.
	// The default value false is Mailpit without a relay: release fails.
	RelayToSelf bool
	// Logger receives one line per request. The default value discards.
	Logger *slog.Logger
}

// EnsureDefaults fills in the zero fields with their documented defaults.
func (o *Options) EnsureDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid field at once.
func (o Options) Validate() error {
	if o.MaxBodyBytes < 0 {
		return errors.New("mailpit: MaxBodyBytes must not be negative")
	}
	return nil
}

// Stats counts what the emulator did.
type Stats struct {
	Requests     int `json:"requests"`
	MessagesSent int `json:"messages_sent"`
	// DuplicatesIgnored counts sends dropped by IgnoreDuplicateIDs.
	DuplicatesIgnored int `json:"duplicates_ignored"`
	SendRejected      int `json:"send_rejected"`
	// Released counts messages relayed by release.
	Released       int `json:"released"`
	Deleted        int `json:"deleted"`
	FaultsInjected int `json:"faults_injected"`
}

type message struct {
	Message
	read       bool
	created    time.Time
	snippet    string
	searchText string
}

// Server is the emulator. It implements http.Handler.
type Server struct {
	opts    Options
	faults  *fault.Injector
	api     *http.ServeMux
	control *http.ServeMux

	mu       sync.Mutex
	messages []*message // oldest first
	byID     map[string]*message
	tagNames map[string]string // lower-case → first-seen casing, like Mailpit's tags table
	stats    Stats

	// state is where Persist saves the state (by default in memory only).
	state statefile.File[savedState]
}

// New returns an emulator configured by opts. It panics if opts.Validate
// fails (sandbox.Start validates first and returns the error).
func New(opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts.EnsureDefaults()
	s := &Server{opts: opts, faults: fault.New(), byID: map[string]*message{}, tagNames: map[string]string{}}
	s.state.Name, s.state.Empty = "mailpit", "an empty mailbox"
	s.api = http.NewServeMux()
	s.api.HandleFunc("POST /api/v1/send", s.send)
	s.api.HandleFunc("GET /api/v1/messages", s.list)
	s.api.HandleFunc("DELETE /api/v1/messages", s.deleteMessages)
	s.api.HandleFunc("GET /api/v1/search", s.search)
	s.api.HandleFunc("GET /api/v1/message/{id}", s.get)
	s.api.HandleFunc("POST /api/v1/message/{id}/release", s.release)
	s.api.HandleFunc("GET /api/v1/info", s.info)
	s.api.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.api.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	s.api.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { notFound(w) })
	s.control = http.NewServeMux()
	s.faults.Register(s.control)
	s.control.HandleFunc("GET "+fault.ControlPrefix+"stats", func(w http.ResponseWriter, _ *http.Request) {
		fault.WriteJSON(w, http.StatusOK, s.Stats())
	})
	s.control.HandleFunc("POST "+fault.ControlPrefix+"reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		fault.WriteJSON(w, http.StatusOK, s.Stats())
	})
	return s
}

// Faults returns the fault injector.
func (s *Server) Faults() *fault.Injector { return s.faults }

// Close releases every held or hanging request.
func (s *Server) Close() { s.faults.Close() }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.FaultsInjected = s.faults.Injected()
	return st
}

// Messages returns every stored message, newest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, 0, len(s.messages))
	for i := len(s.messages) - 1; i >= 0; i-- {
		out = append(out, s.messages[i].Message)
	}
	return out
}

// Reset deletes every message and counter. Fault rules are kept.
func (s *Server) Reset() {
	s.mu.Lock()
	s.messages = nil
	s.byID = map[string]*message{}
	s.tagNames = map[string]string{}
	s.stats = Stats{}
	s.mu.Unlock()
	_ = s.save() // logged
}

// ServeHTTP routes the control API, applies faults and serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, fault.ControlPrefix) {
		s.control.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	s.mu.Unlock()
	s.faults.Serve(w, r, s.api, errorBodyFor, "mailpit", s.opts.Logger)
}

func errorBodyFor(status int) (string, []byte) {
	if status == http.StatusOK {
		return "application/json", []byte(`{}`)
	}
	return "text/plain; charset=utf-8", []byte(fmt.Sprintf("%d %s (sandbox fault)\n", status, http.StatusText(status)))
}

// Mailpit answers most errors as 400 text/plain, send errors as 400 JSON
// {"Error": …} and unknown messages as 404 "404 page not found".

func httpError(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = io.WriteString(w, msg)
}

func httpJSONError(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, ErrorResponse{Error: msg})
}

func notFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, "404 page not found")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpError(w, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

var restrictedHeaders = []string{"To", "From", "Cc", "Bcc", "Reply-To", "Date", "Subject", "Content-Type", "Mime-Version"}

// send serves POST /api/v1/send.
func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeJSON(w, http.StatusRequestEntityTooLarge, ErrorResponse{Error: err.Error()})
			return
		}
		httpJSONError(w, err.Error())
		return
	}
	var req SendRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		httpJSONError(w, err.Error())
		return
	}
	msg, err := s.build(&req)
	if err != nil {
		s.mu.Lock()
		s.stats.SendRejected++
		s.mu.Unlock()
		httpJSONError(w, err.Error())
		return
	}
	if s.faults.Checkpoint(r.Context()) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "sandbox exec_error fault")
		return
	}
	id := s.store(msg, req.Tags, req.Headers)
	if !s.saved(w) {
		return
	}
	writeJSON(w, http.StatusOK, SendResponse{ID: id})
}

func parseAddr(kind, email string) (string, error) {
	a, err := mail.ParseAddress(email)
	if err != nil {
		return "", fmt.Errorf("invalid %s address: %s", kind, email)
	}
	return a.Address, nil
}

// build validates a send request in Mailpit's order and builds the message.
func (s *Server) build(req *SendRequest) (*message, error) {
	m := &message{}
	fromEmail := req.From.Email
	if a, err := mail.ParseAddress(req.From.Email); err == nil {
		fromEmail = a.Address
	}
	m.From = &Address{Name: req.From.Name, Address: fromEmail}
	m.To, m.Cc, m.Bcc, m.ReplyTo = []*Address{}, []*Address{}, []*Address{}, []*Address{}
	for _, a := range req.To {
		addr, err := parseAddr("To", a.Email)
		if err != nil {
			return nil, err
		}
		m.To = append(m.To, &Address{Name: a.Name, Address: addr})
	}
	for _, a := range req.Cc {
		addr, err := parseAddr("Cc", a.Email)
		if err != nil {
			return nil, err
		}
		m.Cc = append(m.Cc, &Address{Name: a.Name, Address: addr})
	}
	for _, e := range req.Bcc {
		addr, err := parseAddr("Bcc", e)
		if err != nil {
			return nil, err
		}
		m.Bcc = append(m.Bcc, &Address{Address: addr})
	}
	for _, a := range req.ReplyTo {
		addr, err := parseAddr("Reply-To", a.Email)
		if err != nil {
			return nil, err
		}
		m.ReplyTo = append(m.ReplyTo, &Address{Name: a.Name, Address: addr})
	}
	restricted := restrictedHeaders
	if len(req.Tags) > 0 {
		restricted = append(restricted[:len(restricted):len(restricted)], "X-Tags")
	}
	for k := range req.Headers {
		if !validHeaderKey(k) {
			return nil, fmt.Errorf("invalid header key: %q", k)
		}
		for _, h := range restricted {
			if strings.EqualFold(h, k) {
				return nil, fmt.Errorf("cannot overwrite header: \"%s\"", k)
			}
		}
	}
	m.Attachments, m.Inline = []Attachment{}, []Attachment{}
	for i, a := range req.Attachments {
		parts := strings.Split(a.Content, ",")
		b, err := base64.StdEncoding.DecodeString(parts[len(parts)-1])
		if err != nil {
			return nil, fmt.Errorf("error decoding base64 attachment \"%s\": %s", a.Filename, err.Error())
		}
		ct := a.ContentType
		if ct == "" {
			ct = http.DetectContentType(b)
		}
		att := Attachment{PartID: strconv.Itoa(i + 2), FileName: a.Filename, ContentType: ct, ContentID: a.ContentID, Size: uint64(len(b))}
		if a.ContentID != "" {
			m.Inline = append(m.Inline, att)
		} else {
			m.Attachments = append(m.Attachments, att)
		}
	}
	if m.From.Address == "" {
		return nil, errors.New("error building message: from not set")
	}
	if len(m.To)+len(m.Cc)+len(m.Bcc) == 0 {
		return nil, errors.New("error building message: no recipients (to, cc, bcc) set")
	}
	m.Subject = req.Subject
	m.Text = req.Text
	m.HTML = req.HTML
	if m.Text == "" && m.HTML != "" {
		m.Text = stripHTML(m.HTML)
	}
	m.ReturnPath = req.From.Email
	m.ListUnsubscribe = ListUnsubscribe{Links: []string{}}
	for k, v := range req.Headers {
		switch {
		case strings.EqualFold(k, "Message-ID"):
			m.MessageID = strings.Trim(v, "<>")
		case strings.EqualFold(k, "List-Unsubscribe"):
			m.ListUnsubscribe.Header = v
		case strings.EqualFold(k, "List-Unsubscribe-Post"):
			m.ListUnsubscribe.HeaderPost = v
		}
	}
	return m, nil
}

func validHeaderKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 || c == ':' {
			return false
		}
	}
	return true
}

var (
	tagsInvalidChars = regexp.MustCompile(`[^a-zA-Z0-9\-\ \_\.@]`)
	multiSpaceRe     = regexp.MustCompile(`(\s+)`)
	validTagRe       = regexp.MustCompile(`^([a-zA-Z0-9\-\ \_\.@]){1,100}$`)
	addressPlusRe    = regexp.MustCompile(`(?U)^(.*){1,}\+(.*)@`)
	htmlTagRe        = regexp.MustCompile(`(?s)<[^>]*>`)
	spaceRe          = regexp.MustCompile(`\s+`)
	cleanStringRe    = regexp.MustCompile(`(\r?\n|\t|>|<|"|\,|;|\(|\))`)
)

func cleanTag(s string) string {
	t := strings.TrimSpace(multiSpaceRe.ReplaceAllString(tagsInvalidChars.ReplaceAllString(s, " "), " "))
	if len(t) > 100 {
		return t[:100]
	}
	return t
}

// cleanString normalises search text and search terms like Mailpit:
// punctuation that delimits addresses becomes a space, whitespace is
// collapsed, everything is lower-cased.
func cleanString(s string) string {
	s = strings.ReplaceAll(s, "\uFEFF", " ")
	s = cleanStringRe.ReplaceAllString(s, " ")
	return strings.ToLower(strings.Join(strings.Fields(strings.TrimSpace(s)), " "))
}

func stripHTML(h string) string {
	return strings.TrimSpace(spaceRe.ReplaceAllString(htmlTagRe.ReplaceAllString(h, " "), " "))
}

func snippet(text, html string) string {
	const limit = 200
	t := strings.TrimSpace(text)
	if strings.TrimSpace(html) != "" {
		t = stripHTML(html)
	}
	t = strings.TrimSpace(spaceRe.ReplaceAllString(strings.ReplaceAll(t, "\uFEFF", " "), " "))
	if len(t) <= limit {
		return t
	}
	cut := limit
	for cut > 0 && !utf8Start(t[cut]) {
		cut--
	}
	return t[:cut] + "..."
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func formatAddr(a *Address) string {
	if a.Name == "" {
		return a.Address
	}
	return fmt.Sprintf("%q <%s>", a.Name, a.Address)
}

func formatAddrs(as []*Address) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = formatAddr(a)
	}
	return strings.Join(parts, ", ")
}

// store assigns the message its ID, Message-ID and tags and saves it. It
// returns the new ID, or "" when the message was dropped as a duplicate.
func (s *Server) store(m *message, reqTags []string, headers map[string]string) string {
	now := s.opts.Now()
	m.ID = shortID()
	custom := m.MessageID != ""
	if !custom {
		m.MessageID = shortID() + "@mailpit"
	}
	m.Date = now.Truncate(time.Second)
	m.created = now.Truncate(time.Millisecond)
	m.snippet = snippet(m.Text, m.HTML)
	body := m.Text
	if m.HTML != "" {
		body = stripHTML(m.HTML)
	}
	m.searchText = cleanString(strings.Join([]string{formatAddr(m.From), m.Subject, formatAddrs(m.To), formatAddrs(m.Cc), formatAddrs(m.Bcc), formatAddrs(m.ReplyTo), "<" + m.ReturnPath + ">", body}, " "))
	var raw []string
	xtags := ""
	if len(reqTags) > 0 {
		xtags = strings.Join(reqTags, ", ")
	} else {
		for k, v := range headers {
			if strings.EqualFold(k, "X-Tags") {
				xtags = v
			}
		}
	}
	if strings.TrimSpace(xtags) != "" {
		raw = append(raw, strings.Split(strings.TrimSpace(xtags), ",")...)
	}
	for _, as := range [][]*Address{m.To, m.Cc, m.Bcc, {m.From}} {
		for _, a := range as {
			if mm := addressPlusRe.FindAllStringSubmatch(a.Address, 1); len(mm) == 1 {
				raw = append(raw, strings.Split(mm[0][2], "+")...)
			}
		}
	}
	m.Size = uint64(len(m.Text) + len(m.HTML) + len(m.Subject) + 200)

	s.mu.Lock()
	defer s.mu.Unlock()
	if custom && s.opts.IgnoreDuplicateIDs {
		for _, old := range s.messages {
			if old.MessageID == m.MessageID {
				s.stats.DuplicatesIgnored++
				return ""
			}
		}
	}
	m.Tags = s.tagsLocked(raw)
	s.messages = append(s.messages, m)
	s.byID[m.ID] = m
	s.stats.MessagesSent++
	return m.ID
}

// tagsLocked cleans, validates, de-duplicates (case-insensitively) and
// sorts tags; a tag seen before keeps its first casing.
func (s *Server) tagsLocked(raw []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range raw {
		t = cleanTag(t)
		if t == "" || !validTagRe.MatchString(t) {
			continue
		}
		lc := strings.ToLower(t)
		if seen[lc] {
			continue
		}
		seen[lc] = true
		if name, ok := s.tagNames[lc]; ok {
			t = name
		} else {
			s.tagNames[lc] = t
		}
		out = append(out, t)
	}
	sortNoCase(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// sortNoCase orders tags like SQLite's ORDER BY on a COLLATE NOCASE column.
func sortNoCase(tags []string) {
	sort.SliceStable(tags, func(i, j int) bool { return asciiLower(tags[i]) < asciiLower(tags[j]) })
}

const shortAlphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"

// shortID returns a 22-character id in the shape of Mailpit's shortuuid.
func shortID() string {
	var b [22]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = shortAlphabet[int(b[i])%len(shortAlphabet)]
	}
	return string(b[:])
}

func (m *message) summary() MessageSummary {
	nilIfEmpty := func(a []*Address) []*Address {
		if len(a) == 0 {
			return nil
		}
		return a
	}
	return MessageSummary{
		ID:          m.ID,
		MessageID:   m.MessageID,
		Read:        m.read,
		From:        m.From,
		To:          nilIfEmpty(m.To),
		Cc:          nilIfEmpty(m.Cc),
		Bcc:         nilIfEmpty(m.Bcc),
		ReplyTo:     nilIfEmpty(m.ReplyTo),
		Subject:     m.Subject,
		Created:     m.created,
		Tags:        m.Tags,
		Size:        m.Size,
		Attachments: len(m.Attachments),
		Snippet:     m.snippet,
	}
}

// startLimit reads Mailpit's pagination parameters (defaults 0 and 50).
func startLimit(r *http.Request) (start, limit int) {
	start, limit = 0, 50
	if n, err := strconv.Atoi(r.URL.Query().Get("start")); err == nil && n > 0 {
		start = n
	}
	if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n > -1 {
		limit = n
	}
	return start, limit
}

// summaryLocked builds a MessagesSummary of the matching messages
// (newest first) for one page.
func (s *Server) summaryLocked(match func(*message) bool, start, limit int) MessagesSummary {
	var hits []*message
	var unread, unreadHits uint64
	for i := len(s.messages) - 1; i >= 0; i-- {
		m := s.messages[i]
		if !m.read {
			unread++
		}
		if match(m) {
			hits = append(hits, m)
			if !m.read {
				unreadHits++
			}
		}
	}
	res := MessagesSummary{
		Total:               uint64(len(s.messages)),
		Unread:              unread,
		MessagesCount:       uint64(len(hits)),
		MessagesUnreadCount: unreadHits,
		Start:               start,
		Tags:                s.allTagsLocked(),
		Messages:            []MessageSummary{},
	}
	if start < len(hits) {
		for _, m := range hits[start:min(len(hits), start+limit)] {
			res.Messages = append(res.Messages, m.summary())
		}
	}
	res.Count = uint64(len(res.Messages))
	return res
}

func (s *Server) allTagsLocked() []string {
	set := map[string]bool{}
	for _, m := range s.messages {
		for _, t := range m.Tags {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sortNoCase(out)
	return out
}

// list serves GET /api/v1/messages.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	start, limit := startLimit(r)
	s.mu.Lock()
	res := s.summaryLocked(func(*message) bool { return true }, start, limit)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, res)
}

// search serves GET /api/v1/search.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("query"))
	if q == "" {
		httpError(w, "Error: no search query")
		return
	}
	match := compileSearch(q)
	start, limit := startLimit(r)
	s.mu.Lock()
	res := s.summaryLocked(match, start, limit)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, res)
}

// get serves GET /api/v1/message/{id} ("latest" is the newest message)
// and marks the message read.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	var m *message
	if id == "latest" && len(s.messages) > 0 {
		m = s.messages[len(s.messages)-1]
	} else {
		m = s.byID[id]
	}
	if m == nil {
		s.mu.Unlock()
		notFound(w)
		return
	}
	m.read = true
	msg := m.Message
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, msg)
}

// noRelay is what Mailpit v1.33.1 answers a release when no SMTP relay is
// configured: it dials the empty relay address.
const noRelay = "SMTP error: error connecting to :0: dial tcp :0: connect: connection refused"

// release serves POST /api/v1/message/{id}/release {"To": [addresses]}
// ("latest" is the newest message), checking in Mailpit's order: the
// message, the body, each address, that there is one. With RelayToSelf
// the relayed copy is stored as a new message; Mailpit keeps no other
// record of a release.
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	var orig *message
	if id == "latest" && len(s.messages) > 0 {
		orig = s.messages[len(s.messages)-1]
	} else {
		orig = s.byID[id]
	}
	s.mu.Unlock()
	if orig == nil {
		notFound(w)
		return
	}
	var data struct{ To []string }
	if err := json.NewDecoder(r.Body).Decode(&data); err != nil {
		httpError(w, err.Error())
		return
	}
	for _, to := range data.To {
		if _, err := mail.ParseAddress(to); err != nil {
			httpError(w, "Invalid email address: "+to)
			return
		}
	}
	if len(data.To) == 0 {
		httpError(w, "No valid addresses found")
		return
	}
	if !s.opts.RelayToSelf {
		httpError(w, noRelay)
		return
	}
	for _, to := range data.To {
		// The addresses go to the relay as SMTP recipients verbatim:
		// Mailpit's own SMTP server refuses "Name <addr>" there, and the
		// message is then sent nowhere.
		if a, _ := mail.ParseAddress(to); a.Address != to {
			httpError(w, `SMTP error: error response to DATA command: 503 "5.5.1 Bad sequence of commands (MAIL & RCPT required before DATA)"`)
			return
		}
	}
	if s.faults.Checkpoint(r.Context()) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "sandbox exec_error fault")
		return
	}
	s.mu.Lock()
	cp := orig.relayed(data.To)
	tags := slices.Clone(orig.Tags)
	s.stats.Released++
	s.mu.Unlock()
	s.store(cp, tags, nil)
	if !s.saved(w) {
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
}

// relayed is the copy of m a relay to this mailbox delivers to rcpts: the
// headers travel (To, Cc, Subject, From, Reply-To; Bcc is removed), the
// envelope recipients that no header names become its Bcc, and it gets a
// new ID and Message-ID when stored. s.mu must be held.
func (m *message) relayed(rcpts []string) *message {
	cp := &message{}
	cp.From = &Address{Name: m.From.Name, Address: m.From.Address}
	cp.To, cp.Cc, cp.ReplyTo = cloneAddrs(m.To), cloneAddrs(m.Cc), cloneAddrs(m.ReplyTo)
	cp.Bcc = []*Address{}
	named := map[string]bool{}
	for _, a := range append(slices.Clone(m.To), m.Cc...) {
		named[strings.ToLower(a.Address)] = true
	}
	for _, r := range rcpts {
		if !named[strings.ToLower(r)] {
			cp.Bcc = append(cp.Bcc, &Address{Address: r})
			named[strings.ToLower(r)] = true
		}
	}
	// Through SMTP the text's line ends become CRLF, and a message of text
	// alone ends with one (its single part's body is terminated).
	cp.Subject, cp.HTML = m.Subject, m.HTML
	cp.Text = strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n")
	if m.HTML == "" && cp.Text != "" {
		cp.Text += "\r\n"
	}
	cp.ReturnPath = m.From.Address
	cp.ListUnsubscribe = m.ListUnsubscribe
	cp.ListUnsubscribe.Links = slices.Clone(m.ListUnsubscribe.Links)
	cp.Attachments, cp.Inline = slices.Clone(m.Attachments), slices.Clone(m.Inline)
	return cp
}

func cloneAddrs(as []*Address) []*Address {
	out := make([]*Address, 0, len(as))
	for _, a := range as {
		out = append(out, &Address{Name: a.Name, Address: a.Address})
	}
	return out
}

// deleteMessages serves DELETE /api/v1/messages: {"IDs": […]} deletes
// those messages, an empty body deletes all.
func (s *Server) deleteMessages(w http.ResponseWriter, r *http.Request) {
	var data struct{ IDs []string }
	if err := json.NewDecoder(r.Body).Decode(&data); err != nil && !errors.Is(err, io.EOF) {
		httpError(w, err.Error())
		return
	}
	s.mu.Lock()
	if len(data.IDs) == 0 {
		s.stats.Deleted += len(s.messages)
		s.messages = nil
		s.byID = map[string]*message{}
	} else {
		del := map[string]bool{}
		for _, id := range data.IDs {
			del[id] = true
		}
		kept := s.messages[:0]
		for _, m := range s.messages {
			if del[m.ID] {
				delete(s.byID, m.ID)
				s.stats.Deleted++
				continue
			}
			kept = append(kept, m)
		}
		s.messages = kept
	}
	s.mu.Unlock()
	if !s.saved(w) {
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, "ok")
}

// info serves a minimal GET /api/v1/info (readiness probes use it).
func (s *Server) info(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	n := len(s.messages)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"Version": "sandbox (mailpit v1.33.1 API subset)", "Messages": n})
}
