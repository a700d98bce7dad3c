// Command noop is a test connector whose operations echo their input.
//
//   - echo (execute): returns the arguments as the result.
//   - keyed (execute_with_key, reconcile): returns the key as the result
//     (a JSON string) and as the receipt; reconcile answers applied.
package main

import (
	"encoding/json"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(
		guest.Operation{
			Name:    "echo",
			Execute: func(c *guest.Call, args []byte) abi.Outcome { return guest.OK(json.RawMessage(args), "") },
		},
		guest.Operation{
			Name:           "keyed",
			ExecuteWithKey: func(c *guest.Call, args []byte) abi.Outcome { return guest.OK(c.Key, c.Key) },
			Reconcile:      func(c *guest.Call, args []byte) abi.Outcome { return guest.Applied(c.Key, c.Key) },
		},
	)
}

func main() {}
