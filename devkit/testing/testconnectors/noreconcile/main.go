// Command noreconcile is a test connector whose only operation, "charge",
// implements plain execute: no execute_with_key, no reconcile. A manifest
// declaring charge with recovery idempotent-retry or reconcile must refuse
// to load.
package main

import (
	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

func init() {
	guest.Register(guest.Operation{
		Name:    "charge",
		Execute: func(c *guest.Call, args []byte) abi.Outcome { return guest.OK(nil, "ch_1") },
	})
}

func main() {}
