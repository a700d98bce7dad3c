// Command httpprobe is a test connector that exercises the host functions
// and reports what it saw:
//
//   - get: args {"url": "...", "method": "GET"}; performs the request
//     through the http capability and returns {"err", "message", "status",
//     "body", "location"}.
//   - getn: args {"url": "...", "n": N, "log": "..."}; logs log (if any)
//     at info, then performs the GET N times and returns how many answers
//     were denied.
//   - config: args {"key": "..."}; returns {"value", "error"}.
//   - execid: returns the execution id and the idempotency key.
//   - log: args {"msg": "..."}; logs msg at info and returns null.
//   - hostsleep: args {"ms": N}; sleeps through the host and returns
//     {"full": bool}.
//   - now: returns the host clock in Unix nanoseconds.
package main

import (
	"encoding/json"
	"time"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func op(name string, fn guest.Handler) guest.Operation {
	return guest.Operation{Name: name, Execute: fn, ExecuteWithKey: fn}
}

func init() {
	guest.Register(
		op("get", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct{ URL, Method, Body string }
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			if in.Method == "" {
				in.Method = "GET"
			}
			resp := c.HTTP(abi.HTTPRequest{Method: in.Method, URL: in.URL, Body: []byte(in.Body)})
			return result(c, map[string]any{
				"err":      resp.Err.String(),
				"message":  resp.Message,
				"status":   resp.Status,
				"body":     string(resp.Body),
				"location": resp.Get("Location"),
			})
		}),
		op("getn", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct {
				URL, Log string
				N        int
			}
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			if in.Log != "" {
				c.Info(in.Log)
			}
			denied := 0
			for range in.N {
				if c.HTTP(abi.HTTPRequest{Method: "GET", URL: in.URL}).Err == abi.HTTPDenied {
					denied++
				}
			}
			return result(c, denied)
		}),
		op("config", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct{ Key string }
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			v, err := c.Config(in.Key)
			out := map[string]string{"value": v}
			if err != nil {
				out["error"] = err.Error()
			}
			return result(c, out)
		}),
		op("execid", func(c *guest.Call, args []byte) abi.Outcome {
			return result(c, map[string]string{"execution_id": c.ExecutionID(), "key": c.Key})
		}),
		op("log", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct{ Msg string }
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			c.Info(in.Msg)
			return result(c, nil)
		}),
		op("hostsleep", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct{ Ms int }
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			full := c.Sleep(time.Duration(in.Ms) * time.Millisecond)
			return result(c, map[string]bool{"full": full})
		}),
		op("now", func(c *guest.Call, args []byte) abi.Outcome {
			return result(c, c.Now().UnixNano())
		}),
	)
}

// result answers ok with v as the JSON result.
func result(_ *guest.Call, v any) abi.Outcome { return guest.OK(v, "") }

func main() {}
