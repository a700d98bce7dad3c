// Command brokenreconcile is a deliberately broken email connector, a
// fixture for connhost crashtest: its send is declared reconcile
// (devkit/crashtest/testdata/brokenreconcile.toml) but its reconcile
// answers not_applied without looking, and its send does not look for an
// earlier attempt first. After a crash that follows a delivered send,
// recovery believes the lie and sends the message a second time. The crash
// matrix must catch it (a duplicate at after_plugin_return).
package main

import (
	"encoding/json"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(guest.Operation{
		Name:           "send",
		ExecuteWithKey: send,
		// THE BUG: reconcile never checks the provider.
		Reconcile: func(*guest.Call, []byte) abi.Outcome { return guest.NotApplied("did not look") },
	})
}

type sendArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

type addr struct {
	Email string `json:"Email"`
}

func send(c *guest.Call, args []byte) abi.Outcome {
	var a sendArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return guest.Permanent("send: %v", err)
	}
	base, err := c.Config("base_url")
	if err != nil {
		return guest.Permanent("send: %v", err)
	}
	body, _ := json.Marshal(map[string]any{
		"From": addr{Email: "broken@connhost.invalid"}, "To": []addr{{Email: a.To}},
		"Subject": a.Subject, "Text": a.Text,
		"Headers": map[string]string{"Message-ID": "<" + c.Key + "@connhost.invalid>"},
	})
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: base + "/api/v1/send", Body: body,
		Header: []abi.Header{{Name: "Content-Type", Value: "application/json"}}})
	switch {
	case resp.Err != abi.HTTPOK:
		return guest.Retryable("send: %s: %s", resp.Err, resp.Message)
	case resp.Status != 200:
		return guest.Permanent("send: mailpit answered %d: %s", resp.Status, resp.Body)
	}
	var out struct {
		ID string `json:"ID"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || out.ID == "" {
		return guest.Permanent("send: unreadable answer")
	}
	return guest.OK(map[string]string{"id": out.ID}, out.ID)
}

func main() {}
