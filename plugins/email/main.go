// Command email is the connhost email connector (Mailpit HTTP API).
package main

import (
	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(guest.Operation{
		Name: "send",
		ExecuteWithKey: func(c *guest.Call, args []byte) abi.Outcome {
			return guest.OK(map[string]string{"key": c.Key}, "")
		},
	})
}

func main() {}
