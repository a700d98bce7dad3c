// Command effect is a test connector whose operations perform a countable
// effect on a provider the test controls (an HTTP server at config
// "base_url"), so executor tests can inject every fault and count what the
// provider saw.
//
//   - apply (execute_with_key, reconcile): POST {base_url}/apply with header
//     X-Key: <key> and the arguments as body. 200 → ok (the body is the
//     result, header X-Receipt the receipt); 429/503 → retryable (the test
//     provider refuses those before acting); 409 → in_progress (an earlier
//     request with the key is still running); other 5xx → uncertain; other
//     4xx → permanent; a transport failure → uncertain (the request may
//     have arrived). reconcile: GET {base_url}/lookup?key=<key>: 200 →
//     applied (body, X-Receipt); 404 → not_applied; anything else → unknown.
//   - plain (execute only): POST {base_url}/apply without a key; same
//     mapping.
//   - read (execute, effect read): GET {base_url}/read; a transport failure
//     or 5xx → retryable (a read may always run again).
package main

import (
	"net/url"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(
		guest.Operation{
			Name:           "apply",
			ExecuteWithKey: func(c *guest.Call, args []byte) abi.Outcome { return post(c, c.Key, args) },
			Reconcile:      reconcile,
		},
		guest.Operation{
			Name:    "plain",
			Execute: func(c *guest.Call, args []byte) abi.Outcome { return post(c, "", args) },
		},
		guest.Operation{
			Name: "read",
			Execute: func(c *guest.Call, args []byte) abi.Outcome {
				r := request(c, "GET", "/read", "", nil)
				if r.Err != abi.HTTPOK || r.Status >= 500 {
					return guest.Retryable("read: %s %d: %s", r.Err, r.Status, r.Message)
				}
				return classify(c, r)
			},
		},
	)
}

func request(c *guest.Call, method, path, key string, body []byte) abi.HTTPResponse {
	base, err := c.Config("base_url")
	if err != nil {
		return abi.HTTPResponse{Err: abi.HTTPInvalid, Message: err.Error()}
	}
	h := []abi.Header{{Name: "X-Execution-Id", Value: c.ExecutionID()}}
	if key != "" {
		h = append(h, abi.Header{Name: "X-Key", Value: key})
	}
	return c.HTTP(abi.HTTPRequest{Method: method, URL: base + path, Header: h, Body: body})
}

func post(c *guest.Call, key string, args []byte) abi.Outcome {
	return classify(c, request(c, "POST", "/apply", key, args))
}

func classify(c *guest.Call, r abi.HTTPResponse) abi.Outcome {
	switch {
	case r.Err != abi.HTTPOK:
		return guest.Uncertain("transport: %s: %s", r.Err, r.Message)
	case r.Status == 200:
		return guest.OK(r.Body, r.Get("X-Receipt"))
	case r.Status == 409:
		return guest.InProgress("provider answered 409: an earlier request with the key is running")
	case r.Status == 429 || r.Status == 503:
		return guest.Retryable("provider answered %d", r.Status)
	case r.Status >= 500:
		return guest.Uncertain("provider answered %d", r.Status)
	default:
		return guest.Permanent("provider answered %d: %s", r.Status, r.Body)
	}
}

func reconcile(c *guest.Call, args []byte) abi.Outcome {
	r := request(c, "GET", "/lookup?key="+url.QueryEscape(c.Key), "", nil)
	switch {
	case r.Err != abi.HTTPOK:
		return guest.Unknown("lookup: %s: %s", r.Err, r.Message)
	case r.Status == 200:
		return guest.Applied(r.Body, r.Get("X-Receipt"))
	case r.Status == 404:
		return guest.NotApplied("no effect recorded under the key")
	default:
		return guest.Unknown("lookup answered %d", r.Status)
	}
}

func main() {}
