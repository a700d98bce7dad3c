package guest_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// A connector registers its operations in init. This one sends a chat
// message. It implements ExecuteWithKey: it hands the idempotency key to the
// provider, so the host may safely retry it.
func init() {
	guest.Register(guest.Operation{
		Name:           "example_send_message",
		ExecuteWithKey: sendMessage,
	})
}

func sendMessage(c *guest.Call, args []byte) abi.Outcome {
	var in struct {
		To   string `json:"to"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return guest.Permanent("bad arguments: %v", err)
	}
	body, _ := json.Marshal(in)
	resp := c.HTTP(abi.HTTPRequest{
		Method: "POST",
		URL:    "https://chat.example.com/v1/messages",
		Header: []abi.Header{
			{Name: "Content-Type", Value: "application/json"},
			{Name: "Idempotency-Key", Value: c.Key},
		},
		Body: body,
	})
	// Classify by what the answer proves about the provider. Retryable
	// promises "this attempt did nothing"; an answer that leaves it open
	// is Uncertain, so the host never believes a sent message was not.
	switch {
	case resp.Err == abi.HTTPDenied, resp.Err == abi.HTTPInvalid:
		// Refused by the host before anything was sent: the allowlist or
		// the request is wrong, and trying again changes nothing.
		return guest.Permanent("chat: %s: %s", resp.Err, resp.Message)
	case resp.Err != abi.HTTPOK: // timeout, network: it may have arrived
		return guest.Uncertain("chat: %s: %s", resp.Err, resp.Message)
	case resp.Status == 409: // the same key is still being processed
		return guest.InProgress("chat: status %d", resp.Status)
	case resp.Status == 429: // rate limited: refused before any effect
		return guest.Retryable("chat: status %d", resp.Status)
	case resp.Status >= 500: // the provider failed mid-way, perhaps after the effect
		return guest.Uncertain("chat: status %d", resp.Status)
	case resp.Status != 201:
		return guest.Permanent("chat: status %d", resp.Status)
	}
	var msg struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(resp.Body, &msg) // the message was sent either way
	return guest.OK(json.RawMessage(resp.Body), msg.ID)
}

// chatHost stands in for the connhost host: it answers every request
// with a canned response and prints what the connector sent.
type chatHost struct{ resp abi.HTTPResponse }

func (h chatHost) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	fmt.Printf("%s %s Idempotency-Key=%s %s\n", req.Method, req.URL, req.Get("Idempotency-Key"), req.Body)
	return h.resp
}
func (chatHost) ExecutionID() string           { return "exec-1" }
func (chatHost) Config(string) (string, int32) { return "", abi.StatusNotDeclared }
func (chatHost) Log(int32, string)             {}
func (chatHost) Now() time.Time                { return time.Unix(0, 0) }
func (chatHost) Sleep(time.Duration) bool      { return true }

func Example() {
	args := []byte(`{"to":"ada","text":"hello"}`)

	sent := chatHost{abi.HTTPResponse{Status: 201, Body: []byte(`{"id":"msg_1"}`)}}
	o := guest.Invoke(sent, abi.ExportExecuteWithKey, "example_send_message", "key-42", args)
	fmt.Println(o.Kind, o.Receipt, string(o.Result))

	denied := chatHost{abi.HTTPResponse{Err: abi.HTTPDenied, Message: "host not in allowlist"}}
	o = guest.Invoke(denied, abi.ExportExecuteWithKey, "example_send_message", "key-43", args)
	fmt.Println(o.Kind, o.Error)

	lost := chatHost{abi.HTTPResponse{Err: abi.HTTPTimeout, Message: "no answer within 15s"}}
	o = guest.Invoke(lost, abi.ExportExecuteWithKey, "example_send_message", "key-44", args)
	fmt.Println(o.Kind, o.Error)

	// Output:
	// POST https://chat.example.com/v1/messages Idempotency-Key=key-42 {"to":"ada","text":"hello"}
	// ok msg_1 {"id":"msg_1"}
	// POST https://chat.example.com/v1/messages Idempotency-Key=key-43 {"to":"ada","text":"hello"}
	// permanent_error chat: denied: host not in allowlist
	// POST https://chat.example.com/v1/messages Idempotency-Key=key-44 {"to":"ada","text":"hello"}
	// uncertain chat: timeout: no answer within 15s
}
