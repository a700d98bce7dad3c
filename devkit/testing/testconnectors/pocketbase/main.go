// Command pocketbase is a connector for PocketBase's records API
// (v0.39), a provider with no idempotency keys: the crash tests' example
// of reconciling by a unique field. Its manifest is
// devkit/crashtest/testdata/pocketbase.toml, and connhost crashtest
// proves it against a real PocketBase through the probe config next to
// it, with no code besides this connector.
//
//   - create_item (execute_with_key, reconcile): POST
//     /api/collections/{collection}/records {"name", "quantity", "ref"},
//     ref being the call's idempotency key (c.Key: the same on every
//     attempt of one call, never in the model's arguments). The
//     collection's unique index on ref makes a second create of one call
//     fail (400 validation_not_unique), which the connector answers with
//     the record the first one made. reconcile looks the key up by ref:
//     found → applied, the provider says none → not applied.
//   - delete_item (execute, reconcile): DELETE
//     /api/collections/{collection}/records/{id}. A 404 is uncertain (an
//     earlier attempt of this call may have deleted it); reconcile looks
//     the record up: gone → applied, still there → not applied.
//   - get_item (execute, a read): GET the record.
//
// Config: base_url, collection, token (an auth token, sent as the
// Authorization header).
package main

import (
	"net/url"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/codec"
	"github.com/connhost/connhost/abi/guest"
)

func main() {}

func init() {
	guest.Register(
		guest.Operation{Name: "create_item", ExecuteWithKey: createItem, Reconcile: reconcileCreate},
		guest.Operation{Name: "delete_item", Execute: deleteItem, Reconcile: reconcileDelete},
		guest.Operation{Name: "get_item", Execute: getItem},
	)
}

// records returns the collection's records URL and the request headers.
func records(c *guest.Call) (string, []abi.Header, error) {
	base, err := c.Config("base_url")
	if err != nil {
		return "", nil, err
	}
	coll, err := c.Config("collection")
	if err != nil {
		return "", nil, err
	}
	h := []abi.Header{{Name: "Content-Type", Value: "application/json"}}
	if tok, err := c.Config("token"); err == nil && tok != "" {
		h = append(h, abi.Header{Name: "Authorization", Value: tok})
	}
	return strings.TrimSuffix(base, "/") + "/api/collections/" + url.PathEscape(coll) + "/records", h, nil
}

// record is what the connector reads of a record.
type record struct {
	ID, Name, Ref string
	Quantity      int64
}

func (r *record) member(name string, v *codec.Value) error {
	switch name {
	case "id":
		return v.String(&r.ID)
	case "name":
		return v.String(&r.Name)
	case "ref":
		return v.String(&r.Ref)
	case "quantity":
		var f float64 // PocketBase numbers are floats
		err := v.Float64(&f)
		r.Quantity = int64(f)
		return err
	}
	return nil
}

func (r *record) result() []byte {
	return codec.AppendObject(nil, func(o *codec.Object) {
		o.String("id", r.ID)
		o.String("name", r.Name)
		o.Int("quantity", r.Quantity)
	})
}

func createItem(c *guest.Call, args []byte) abi.Outcome {
	var in record
	err := guest.ReadArgs(args, func(name string, v *codec.Value) error {
		switch name {
		case "name":
			return v.String(&in.Name)
		case "quantity":
			return v.Int64(&in.Quantity)
		}
		return nil // unread: refused as an unknown field
	})
	if err != nil {
		return guest.Permanent("create_item: bad arguments: %v", err)
	}
	u, h, err := records(c)
	if err != nil {
		return guest.Permanent("create_item: %v", err)
	}
	body := codec.AppendObject(nil, func(o *codec.Object) {
		o.String("name", in.Name)
		o.Int("quantity", in.Quantity)
		o.String("ref", c.Key) // the unique field: one record per call
	})
	resp := c.HTTP(abi.HTTPRequest{Method: "POST", URL: u, Header: h, Body: body})
	switch {
	case resp.Err == abi.HTTPDenied || resp.Err == abi.HTTPInvalid:
		return guest.Permanent("create_item: %s: %s", resp.Err, resp.Message)
	case resp.Err != abi.HTTPOK:
		return guest.Uncertain("create_item: %s: %s", resp.Err, resp.Message)
	case resp.Status == 400 && notUnique(resp.Body, "ref"):
		// An earlier attempt of this call made the record: answer it, with
		// execute's kinds.
		if o := reconcileCreate(c, args); o.Kind == abi.OutcomeApplied {
			return guest.OK(o.Result, o.Receipt)
		}
		return guest.Uncertain("create_item: ref %s is taken, and the record was not found", c.Key)
	case resp.Status == 429:
		return guest.Retryable("create_item: rate limited")
	case resp.Status >= 500:
		return guest.Uncertain("create_item: provider error %d", resp.Status)
	case resp.Status != 200:
		return guest.Permanent("create_item: status %d: %s", resp.Status, clip(resp.Body))
	}
	var r record
	if err := codec.DecodeObject(resp.Body, r.member); err != nil || r.ID == "" {
		return guest.Uncertain("create_item: unreadable answer: %v", err)
	}
	return guest.OK(r.result(), r.ID)
}

// notUnique reports whether a PocketBase 400 says field's value is taken:
// {"data": {field: {"code": "validation_not_unique"}}}.
func notUnique(body []byte, field string) bool {
	var code string
	_ = codec.DecodeObject(body, func(name string, v *codec.Value) error {
		if name != "data" {
			return nil
		}
		return v.Object(func(name string, v *codec.Value) error {
			if name != field {
				return nil
			}
			return v.Object(func(name string, v *codec.Value) error {
				if name == "code" {
					return v.String(&code)
				}
				return nil
			})
		})
	})
	return code == "validation_not_unique"
}

// reconcileCreate looks the call up by its key in ref. It receives the
// attempt's key and the call's original arguments.
func reconcileCreate(c *guest.Call, _ []byte) abi.Outcome {
	u, h, err := records(c)
	if err != nil {
		return guest.Unknown("create_item: %v", err)
	}
	filter := "(ref='" + strings.ReplaceAll(c.Key, "'", `\'`) + "')"
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: u + "?perPage=1&filter=" + url.QueryEscape(filter), Header: h})
	if resp.Err != abi.HTTPOK || resp.Status != 200 {
		return guest.Unknown("create_item: lookup by ref: %s %s (status %d)", resp.Err, resp.Message, resp.Status)
	}
	var found []record
	var total int64 = -1
	err = codec.DecodeObject(resp.Body, func(name string, v *codec.Value) error {
		switch name {
		case "totalItems":
			return v.Int64(&total)
		case "items":
			return v.Array(func(e *codec.Value) error {
				var r record
				err := e.Object(r.member)
				found = append(found, r)
				return err
			})
		}
		return nil
	})
	switch {
	case err != nil || total < 0:
		return guest.Unknown("create_item: lookup by ref: unreadable answer: %v", err)
	case len(found) == 0:
		return guest.NotApplied("create_item: no record has ref %s", c.Key)
	}
	return guest.Applied(found[0].result(), found[0].ID)
}

// idArgs reads {"id": "…"} strictly.
func idArgs(args []byte) (string, error) {
	var id string
	err := guest.ReadArgs(args, func(name string, v *codec.Value) error {
		if name == "id" {
			return v.String(&id)
		}
		return nil // unread: refused as an unknown field
	})
	return id, err
}

func deleteItem(c *guest.Call, args []byte) abi.Outcome {
	id, err := idArgs(args)
	if err != nil {
		return guest.Permanent("delete_item: bad arguments: %v", err)
	}
	u, h, err := records(c)
	if err != nil {
		return guest.Permanent("delete_item: %v", err)
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "DELETE", URL: u + "/" + url.PathEscape(id), Header: h})
	switch {
	case resp.Err == abi.HTTPDenied || resp.Err == abi.HTTPInvalid:
		return guest.Permanent("delete_item: %s: %s", resp.Err, resp.Message)
	case resp.Err != abi.HTTPOK:
		return guest.Uncertain("delete_item: %s: %s", resp.Err, resp.Message)
	case resp.Status == 204:
		return guest.OK(codec.AppendObject(nil, func(o *codec.Object) { o.String("deleted", id) }), id)
	case resp.Status == 404:
		// Gone: this call's earlier attempt may have deleted it, or it
		// never was. Reconcile tells which the ledger records.
		return guest.Uncertain("delete_item: record %s is not there", id)
	case resp.Status == 429:
		return guest.Retryable("delete_item: rate limited")
	case resp.Status >= 500:
		return guest.Uncertain("delete_item: provider error %d", resp.Status)
	}
	return guest.Permanent("delete_item: status %d: %s", resp.Status, clip(resp.Body))
}

// reconcileDelete: the call took effect when the record is gone.
func reconcileDelete(c *guest.Call, args []byte) abi.Outcome {
	id, err := idArgs(args)
	if err != nil {
		return guest.Unknown("delete_item: bad arguments: %v", err)
	}
	u, h, err := records(c)
	if err != nil {
		return guest.Unknown("delete_item: %v", err)
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: u + "/" + url.PathEscape(id), Header: h})
	switch {
	case resp.Err != abi.HTTPOK:
		return guest.Unknown("delete_item: lookup: %s %s", resp.Err, resp.Message)
	case resp.Status == 404:
		return guest.Applied(codec.AppendObject(nil, func(o *codec.Object) { o.String("deleted", id) }), id)
	case resp.Status == 200:
		return guest.NotApplied("delete_item: record %s is still there", id)
	}
	return guest.Unknown("delete_item: lookup: status %d", resp.Status)
}

func getItem(c *guest.Call, args []byte) abi.Outcome {
	id, err := idArgs(args)
	if err != nil {
		return guest.Permanent("get_item: bad arguments: %v", err)
	}
	u, h, err := records(c)
	if err != nil {
		return guest.Permanent("get_item: %v", err)
	}
	resp := c.HTTP(abi.HTTPRequest{Method: "GET", URL: u + "/" + url.PathEscape(id), Header: h})
	switch {
	case resp.Err == abi.HTTPDenied:
		return guest.Permanent("get_item: %s", resp.Message)
	case resp.Err != abi.HTTPOK || resp.Status >= 500 || resp.Status == 429:
		return guest.Retryable("get_item: %s %s (status %d)", resp.Err, resp.Message, resp.Status)
	case resp.Status == 404:
		return guest.Permanent("get_item: no record %s", id)
	case resp.Status != 200:
		return guest.Permanent("get_item: status %d: %s", resp.Status, clip(resp.Body))
	}
	var r record
	if err := codec.DecodeObject(resp.Body, r.member); err != nil {
		return guest.Retryable("get_item: unreadable answer: %v", err)
	}
	return guest.OK(r.result(), r.ID)
}

func clip(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}
