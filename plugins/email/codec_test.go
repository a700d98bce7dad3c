package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"reflect"
	"testing"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/abi/guest/guesttest"
	"github.com/connhost/connhost/devkit/testing/testenv"
)

// The connector reads and writes JSON with package codec instead of
// encoding/json. These tests hold it to what encoding/json did: same
// results and request bodies byte for byte, same fields read from
// Mailpit's answers.

// Tagged twins of the connector's types, as encoding/json read them
// (it matched Mailpit's capitalised names case-insensitively).
type jsonAddress struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

type jsonSummary struct {
	ID        string        `json:"ID"`
	MessageID string        `json:"MessageID"`
	From      *jsonAddress  `json:"From"`
	To        []jsonAddress `json:"To"`
	Subject   string        `json:"Subject"`
	Created   string        `json:"Created"`
	Tags      []string      `json:"Tags"`
	Snippet   string        `json:"Snippet"`
}

type jsonSearchPage struct {
	MessagesCount *uint64       `json:"messages_count"`
	Messages      []jsonSummary `json:"messages"`
}

type jsonMessage struct {
	ID        string        `json:"ID"`
	MessageID string        `json:"MessageID"`
	From      *jsonAddress  `json:"From"`
	To        []jsonAddress `json:"To"`
	Cc        []jsonAddress `json:"Cc"`
	Subject   string        `json:"Subject"`
	Date      string        `json:"Date"`
	Tags      []string      `json:"Tags"`
	Text      string        `json:"Text"`
	Size      uint64        `json:"Size"`
}

// mailpitNames are the names the connector reads from Mailpit.
var mailpitNames = []string{"ID", "MessageID", "From", "To", "Cc", "Subject", "Created", "Tags", "Snippet",
	"Date", "Text", "Size", "Name", "Address", "Error", "messages_count", "messages"}

func TestResultsEncodeAsEncodingJSON(t *testing.T) {
	odd := "a <b> & \"c\"\n\u2028\xff"
	for _, tc := range []struct {
		got  []byte
		want any
	}{
		{sendResult{ID: "MP1", MessageID: "k@connhost.invalid", AlreadySent: true}.json(),
			sendResult{ID: "MP1", MessageID: "k@connhost.invalid", AlreadySent: true}},
		{messageView{ID: "MP1", From: &address{Name: odd, Address: "a@b"}, To: []address{{Address: "c@d"}}, Subject: odd,
			Tags: []string{}, Text: odd, Truncated: true, Size: 7}.json(),
			messageView{ID: "MP1", From: &address{Name: odd, Address: "a@b"}, To: []address{{Address: "c@d"}}, Subject: odd,
				Tags: []string{}, Text: odd, Truncated: true, Size: 7}},
		{messageView{Cc: []address{}}.json(), messageView{Cc: []address{}}},
		{sendRequest{From: sendAddr{Email: "a@b"}, To: toSendAddrs(recipients{"c@d", odd}), Subject: odd, Text: "t",
			Tags: []string{"connhost", "connhost-1"}, Headers: map[string]string{"Message-ID": "<x>", "X-Connhost-Execution-Id": odd}}.json(),
			sendRequest{From: sendAddr{Email: "a@b"}, To: toSendAddrs(recipients{"c@d", odd}), Subject: odd, Text: "t",
				Tags: []string{"connhost", "connhost-1"}, Headers: map[string]string{"Message-ID": "<x>", "X-Connhost-Execution-Id": odd}}},
		{sendRequest{From: sendAddr{Name: "n", Email: "a@b"}, To: toSendAddrs(nil), Cc: toSendAddrs(recipients{"e@f"}), HTML: "<p>"}.json(),
			sendRequest{From: sendAddr{Name: "n", Email: "a@b"}, To: toSendAddrs(nil), Cc: toSendAddrs(recipients{"e@f"}), HTML: "<p>"}},
	} {
		want, err := json.Marshal(tc.want)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(tc.got, want) {
			t.Errorf("%T:\ngot  %s\nwant %s", tc.want, tc.got, want)
		}
	}
}

// TestOperationsAnswerAsBefore runs every operation against a real Mailpit
// and compares what the connector returned and sent with what
// encoding/json and url.Values make of the same data.
func TestOperationsAnswerAsBefore(t *testing.T) {
	base := testenv.Mailpit(t)
	h := realHost(base)
	o := sendOp(h, "ck_codec_1", `{"to":"jane@example.com","cc":["a@example.com"],"subject":"S <&>","text":"T","from":"me@example.com"}`)
	wantKind(t, o, abi.OutcomeOK, "")
	get := invoke(h, abi.ExportExecute, "get_message", "", `{"id":"`+o.Receipt+`"}`)
	search := invoke(h, abi.ExportExecute, "search_messages", "", `{"query":"message-id:ck_codec_1","limit":5}`)
	for _, out := range []abi.Outcome{get, search} {
		wantKind(t, out, abi.OutcomeOK, "")
	}

	sent, answers := h.Sent(), h.Responses()
	for i, r := range sent {
		u, err := url.Parse(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		if vals, err := url.ParseQuery(u.RawQuery); err != nil || vals.Encode() != u.RawQuery {
			t.Errorf("%s %s: query %q, url.Values %q (%v)", r.Method, u.Path, u.RawQuery, vals.Encode(), err)
		}
		switch u.Path {
		case "/api/v1/send":
			// Re-marshal the body the connector sent through the struct
			// encoding/json used to marshal.
			var req sendRequest
			if err := json.Unmarshal(r.Body, &req); err != nil {
				t.Fatal(err)
			}
			if want, _ := json.Marshal(req); !bytes.Equal(r.Body, want) {
				t.Errorf("send body:\ngot  %s\nwant %s", r.Body, want)
			}
		case "/api/v1/search":
			checkSearchPage(t, answers[i].Body)
		default:
			checkMessage(t, answers[i].Body)
		}
	}

	// get_message's result is its messageView, marshalled.
	var msg jsonMessage
	if err := json.Unmarshal(answers[len(answers)-2].Body, &msg); err != nil {
		t.Fatal(err)
	}
	view := messageView{ID: msg.ID, MessageID: msg.MessageID, Subject: msg.Subject, Date: msg.Date, Tags: msg.Tags, Text: msg.Text, Size: msg.Size}
	if msg.From != nil {
		view.From = (*address)(msg.From)
	}
	view.To, view.Cc = addresses(msg.To), addresses(msg.Cc)
	if want, _ := json.Marshal(view); !bytes.Equal(get.Result, want) {
		t.Errorf("get_message result:\ngot  %s\nwant %s", get.Result, want)
	}
	// search_messages' result, as the anonymous structs marshalled it.
	var page jsonSearchPage
	if err := json.Unmarshal(answers[len(answers)-1].Body, &page); err != nil {
		t.Fatal(err)
	}
	type hit struct {
		ID        string        `json:"id"`
		MessageID string        `json:"message_id"`
		From      *jsonAddress  `json:"from"`
		To        []jsonAddress `json:"to"`
		Subject   string        `json:"subject"`
		Created   string        `json:"created"`
		Tags      []string      `json:"tags"`
		Snippet   string        `json:"snippet"`
	}
	out := struct {
		Total    uint64 `json:"total"`
		Messages []hit  `json:"messages"`
	}{Total: *page.MessagesCount, Messages: []hit{}}
	for _, s := range page.Messages {
		out.Messages = append(out.Messages, hit{s.ID, s.MessageID, s.From, s.To, s.Subject, s.Created, s.Tags, s.Snippet})
	}
	if want, _ := json.Marshal(out); !bytes.Equal(search.Result, want) || len(out.Messages) != 1 {
		t.Errorf("search_messages result:\ngot  %s\nwant %s", search.Result, want)
	}
}

func addresses(in []jsonAddress) []address {
	if in == nil {
		return nil
	}
	out := make([]address, len(in))
	for i, a := range in {
		out[i] = address(a)
	}
	return out
}

// checkSearchPage compares the connector's search page decoding with
// encoding/json.
func checkSearchPage(t *testing.T, b []byte) {
	t.Helper()
	var got searchPage
	gotErr := codec.DecodeObject(b, got.member)
	var want jsonSearchPage
	wantErr := json.Unmarshal(b, &want)
	if guesttest.CodecDiffers(b, mailpitNames...) {
		if !json.Valid(b) && gotErr == nil {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		return
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("search page %q: %v; encoding/json: %v", b, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	w := searchPage{MessagesCount: want.MessagesCount}
	if want.Messages != nil {
		w.Messages = []summary{}
	}
	for _, s := range want.Messages {
		w.Messages = append(w.Messages, summary{ID: s.ID, MessageID: s.MessageID, From: (*address)(s.From), To: addresses(s.To),
			Subject: s.Subject, Created: s.Created, Tags: s.Tags, Snippet: s.Snippet})
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("search page %q:\ngot  %+v\nwant %+v", b, got, w)
	}
}

// checkMessage compares get_message's decoding with encoding/json.
func checkMessage(t *testing.T, b []byte) {
	t.Helper()
	var got message
	gotErr := codec.DecodeObject(b, got.member)
	var want jsonMessage
	wantErr := json.Unmarshal(b, &want)
	if guesttest.CodecDiffers(b, mailpitNames...) {
		if !json.Valid(b) && gotErr == nil {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		return
	}
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("message %q: %v; encoding/json: %v", b, gotErr, wantErr)
	}
	if gotErr == nil && !reflect.DeepEqual(got, message{ID: want.ID, MessageID: want.MessageID, From: (*address)(want.From),
		To: addresses(want.To), Cc: addresses(want.Cc), Subject: want.Subject, Date: want.Date, Tags: want.Tags, Text: want.Text, Size: want.Size}) {
		t.Fatalf("message %q:\ngot  %+v\nwant %+v", b, got, want)
	}
}

// checkErrorText compares errorText with encoding/json's reading.
func checkErrorText(t *testing.T, b []byte) {
	t.Helper()
	got := errorText(b)
	if guesttest.CodecDiffers(b, mailpitNames...) {
		return
	}
	var e struct{ Error string }
	if json.Unmarshal(b, &e) == nil && e.Error != "" && got != clip(e.Error, 300) {
		t.Fatalf("errorText(%q) = %q, want %q", b, got, clip(e.Error, 300))
	}
}

func FuzzDecodeMailpitAnswers(f *testing.F) {
	for _, s := range []string{
		`{"total":2,"unread":0,"count":1,"messages_count":1,"start":0,"tags":["a","b"],"messages":[{"ID":"x","MessageID":"k@connhost.invalid","Read":false,"From":{"Name":"","Address":"a@b"},"To":[{"Name":"J","Address":"j@e"}],"Cc":null,"Subject":"s","Created":"2026-01-01T00:00:00Z","Tags":[],"Size":1,"Attachments":0,"Snippet":"t"}]}`,
		`{"messages_count":null,"messages":null}`,
		`{"messages_count":0,"messages":[null,{"From":null,"To":[null]}]}`,
		`{"ID":"x","MessageID":"m","From":{"Name":"n","Address":"a"},"To":[],"Cc":[{"Address":"c"}],"Subject":"s","Date":"d","Tags":null,"Text":"t","HTML":"<p>","Size":3,"Inline":[],"Attachments":[]}`,
		`{"Error":"invalid To address"}`, `{"ID":""}`, `{"id":"x"}`, `404 page not found`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSearchPage(t, b)
		checkMessage(t, b)
		checkErrorText(t, b)
	})
}

// FuzzSendArgs: send's arguments read as guest.DecodeArgs read them,
// except that codec also refuses duplicate and case-folded names and text
// encoding/json would alter.
func FuzzSendArgs(f *testing.F) {
	f.Add([]byte(sendJSON))
	f.Add([]byte(`{"to":"a@b","cc":null,"subject":"s","text":"t"}`))
	f.Add([]byte(`{"to":["a@b",null],"cc":[],"subject":"s","html":"h","from":"f@g"}`))
	f.Add([]byte(`{"to":7}`))
	f.Add([]byte(`{"To":"a@b"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got sendArgs
		gotErr := guest.ReadArgs(b, got.member)
		var want struct {
			To      jsonRecipients `json:"to"`
			Cc      jsonRecipients `json:"cc"`
			Subject string         `json:"subject"`
			Text    string         `json:"text"`
			HTML    string         `json:"html"`
			From    string         `json:"from"`
		}
		wantErr := abi.UnmarshalStrict(b, &want)
		names := []string{"to", "cc", "subject", "text", "html", "from"}
		switch {
		case gotErr == nil && wantErr != nil:
			t.Fatalf("accepted %q, which encoding/json refuses: %v", b, wantErr)
		case gotErr == nil && !reflect.DeepEqual(got, sendArgs{recipients(want.To), recipients(want.Cc), want.Subject, want.Text, want.HTML, want.From}):
			t.Fatalf("read %q as %+v; encoding/json %+v", b, got, want)
		case gotErr != nil && wantErr == nil && !guesttest.CodecDiffers(b, names...):
			t.Fatalf("refused %q, which encoding/json accepts: %v", b, gotErr)
		}
	})
}

// jsonRecipients is how recipients decoded with encoding/json.
type jsonRecipients []string

func (r *jsonRecipients) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*r = jsonRecipients{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return json.Unmarshal([]byte(`"`), &one) // any error
	}
	*r = many
	return nil
}
