package guest_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

// An operation declared recovery = "reconcile" against a provider without
// idempotency keys: ExecuteWithKey puts the call's key (c.Key, the same on
// every attempt) in a field the provider keeps unique, and Reconcile —
// which the host calls after a crash with the same key and the call's
// original arguments — looks the call up by it.
func init() {
	guest.Register(guest.Operation{
		Name:           "example_create_record",
		ExecuteWithKey: createRecord,
		Reconcile:      findRecord,
	})
}

func createRecord(c *guest.Call, args []byte) abi.Outcome {
	var in struct {
		Title string `json:"title"`
	}
	if err := guest.DecodeArgs(args, &in); err != nil {
		return guest.Permanent("bad arguments: %v", err)
	}
	// The key, not c.ExecutionID(), is what the provider keeps: the
	// lookup below finds the call by it.
	body, _ := json.Marshal(map[string]string{"title": in.Title, "ref": c.Key})
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: "https://records.example.com/records", Body: body})
	switch {
	case resp.Err == abi.HTTPDenied:
		return guest.Permanent("records: %s", resp.Message)
	case resp.Err != abi.HTTPOK, resp.Status >= 500:
		return guest.Uncertain("records: %s %d", resp.Err, resp.Status) // the host reconciles
	case resp.Status == 409:
		// ref is unique: an earlier attempt of this call made it. Execute
		// answers with execute's kinds (OK, not Applied).
		if o := findRecord(c, args); o.Kind == abi.OutcomeApplied {
			return guest.OK(json.RawMessage(o.Result), o.Receipt)
		}
		return guest.Uncertain("records: ref %s taken, and not found", c.Key)
	case resp.Status != 201:
		return guest.Permanent("records: status %d", resp.Status)
	}
	var rec struct{ ID string }
	_ = json.Unmarshal(resp.Body, &rec)
	return guest.OK(json.RawMessage(resp.Body), rec.ID)
}

func findRecord(c *guest.Call, _ []byte) abi.Outcome {
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: "https://records.example.com/records?ref=" + url.QueryEscape(c.Key)})
	if resp.Err != abi.HTTPOK || resp.Status != 200 {
		return guest.Unknown("lookup: %s %d", resp.Err, resp.Status) // an operator decides
	}
	var found []struct{ ID string }
	if err := json.Unmarshal(resp.Body, &found); err != nil {
		return guest.Unknown("lookup: unreadable answer")
	}
	if len(found) == 0 {
		return guest.NotApplied("no record has ref %s", c.Key) // the host dispatches again, same key
	}
	b, _ := json.Marshal(found[0])
	return guest.Applied(json.RawMessage(b), found[0].ID)
}

// recordsHost stands in for the host and a provider that keeps records
// with a unique ref.
type recordsHost struct{ refs map[string]string }

func (h *recordsHost) HTTP(req abi.HTTPRequest) abi.HTTPResponse {
	if req.Method == "GET" {
		u, _ := url.Parse(req.URL)
		if id, ok := h.refs[u.Query().Get("ref")]; ok {
			return abi.HTTPResponse{Status: 200, Body: []byte(`[{"ID":"` + id + `"}]`)}
		}
		return abi.HTTPResponse{Status: 200, Body: []byte(`[]`)}
	}
	var in struct{ Ref string }
	_ = json.Unmarshal(req.Body, &in)
	if _, taken := h.refs[in.Ref]; taken {
		return abi.HTTPResponse{Status: 409}
	}
	h.refs[in.Ref] = fmt.Sprintf("rec_%d", len(h.refs)+1)
	return abi.HTTPResponse{Status: 201, Body: []byte(`{"ID":"` + h.refs[in.Ref] + `"}`)}
}
func (*recordsHost) ExecutionID() string           { return "ex_7" }
func (*recordsHost) Config(string) (string, int32) { return "", abi.StatusNotDeclared }
func (*recordsHost) Log(int32, string)             {}
func (*recordsHost) Now() time.Time                { return time.Unix(0, 0) }
func (*recordsHost) Sleep(time.Duration) bool      { return true }

func Example_reconcile() {
	h := &recordsHost{refs: map[string]string{}}
	args := []byte(`{"title":"Q3 report"}`)
	// Before anything was sent, reconcile has evidence nothing happened.
	o := guest.Invoke(h, abi.ExportReconcile, "example_create_record", "ck_a", args)
	fmt.Println(o.Kind, o.Error)
	// The call, then (after a crash lost its answer) its reconcile: the
	// key finds the record the call made.
	o = guest.Invoke(h, abi.ExportExecuteWithKey, "example_create_record", "ck_a", args)
	fmt.Println(o.Kind, o.Receipt)
	o = guest.Invoke(h, abi.ExportReconcile, "example_create_record", "ck_a", args)
	fmt.Println(o.Kind, o.Receipt)
	// A re-dispatch of the same call makes nothing new; another call
	// (another key) is another record.
	o = guest.Invoke(h, abi.ExportExecuteWithKey, "example_create_record", "ck_a", args)
	fmt.Println(o.Kind, o.Receipt)
	o = guest.Invoke(h, abi.ExportExecuteWithKey, "example_create_record", "ck_b", args)
	fmt.Println(o.Kind, o.Receipt)
	// Output:
	// not_applied no record has ref ck_a
	// ok rec_1
	// applied rec_1
	// ok rec_1
	// ok rec_2
}

// An operation declared recovery = "manual": nothing can tell whether a
// lost attempt took effect, so the handler needs no key (plain Execute,
// c.Key is empty) and no Reconcile. An answer lost after the request was
// sent is Uncertain: the host makes the call recovery_required and an
// operator finds out at the provider; it never runs again by itself.
func init() {
	guest.Register(guest.Operation{Name: "example_wire_transfer", Execute: wireTransfer})
}

func wireTransfer(c *guest.Call, args []byte) abi.Outcome {
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: "https://bank.example.com/transfers", Body: args})
	switch {
	case resp.Err == abi.HTTPDenied:
		return guest.Permanent("bank: %s", resp.Message) // nothing was sent
	case resp.Err != abi.HTTPOK:
		c.Error("transfer outcome unknown for " + c.ExecutionID()) // names the call to the operator
		return guest.Uncertain("bank: %s: %s", resp.Err, resp.Message)
	case resp.Status != 201:
		return guest.Permanent("bank: status %d", resp.Status)
	}
	return guest.OK(json.RawMessage(resp.Body), strings.Trim(string(resp.Body), `"`))
}

// bankHost answers every request the same way and prints the log.
type bankHost struct{ resp abi.HTTPResponse }

func (h bankHost) HTTP(abi.HTTPRequest) abi.HTTPResponse { return h.resp }
func (bankHost) ExecutionID() string                     { return "ex_9" }
func (bankHost) Config(string) (string, int32)           { return "", abi.StatusNotDeclared }
func (bankHost) Log(_ int32, msg string)                 { fmt.Println("log:", msg) }
func (bankHost) Now() time.Time                          { return time.Unix(0, 0) }
func (bankHost) Sleep(time.Duration) bool                { return true }

func Example_manual() {
	args := []byte(`{"iban":"DE00","amount":100}`)
	o := guest.Invoke(bankHost{abi.HTTPResponse{Status: 201, Body: []byte(`"tr_1"`)}}, abi.ExportExecute, "example_wire_transfer", "", args)
	fmt.Println(o.Kind, o.Receipt)
	o = guest.Invoke(bankHost{abi.HTTPResponse{Err: abi.HTTPTimeout, Message: "no answer within 15s"}}, abi.ExportExecute, "example_wire_transfer", "", args)
	fmt.Println(o.Kind, o.Error)
	// Output:
	// ok tr_1
	// log: transfer outcome unknown for ex_9
	// uncertain bank: timeout: no answer within 15s
}
