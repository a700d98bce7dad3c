// Command trap is a test connector whose operations misbehave in every way
// the host must survive. Operation "ok" answers normally.
//
//   - trap: stores to an address past the end of linear memory (a wasm trap).
//   - nilderef: dereferences a nil pointer (a Go runtime panic).
//   - panic: panics.
//   - loop: spins forever.
//   - sleep: time.Sleep(1h) (WASI poll_oneoff on the host).
//   - hostsleep: sleeps 1h through the connhost sleep host function, then
//     spins (it must never get to answer).
//   - late: sleeps like hostsleep, then answers retryable at once: a
//     connector that takes the deadline for "not applied".
//   - oom: allocates until the memory limit is hit.
//   - big: returns a result of {"n": N} bytes of JSON string, N from args.
//   - exit: os.Exit(3).
package main

import (
	"encoding/json"
	"os"
	"strings"
	"time"
	"unsafe"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

var (
	sink    [][]byte
	counter uint64
)

func op(name string, fn guest.Handler) guest.Operation {
	return guest.Operation{Name: name, Execute: fn, ExecuteWithKey: fn}
}

func init() {
	guest.Register(
		op("ok", func(c *guest.Call, args []byte) abi.Outcome { return guest.OK(map[string]string{"status": "fine"}, "") }),
		op("trap", func(c *guest.Call, args []byte) abi.Outcome {
			// An address near 4 GiB, far past any memory limit: the store
			// traps with an out-of-bounds memory access.
			base := unsafe.Pointer(&counter)
			p := (*uint64)(unsafe.Add(base, int(0xFFFFFFF0)-int(uintptr(base))))
			*p = 1
			return guest.OK(nil, "")
		}),
		op("nilderef", func(c *guest.Call, args []byte) abi.Outcome {
			var p *int
			return guest.OK(*p, "")
		}),
		op("panic", func(c *guest.Call, args []byte) abi.Outcome { panic("trap fixture: deliberate panic") }),
		op("loop", func(c *guest.Call, args []byte) abi.Outcome {
			for {
				counter++
			}
		}),
		op("sleep", func(c *guest.Call, args []byte) abi.Outcome {
			time.Sleep(time.Hour)
			return guest.OK("woke", "")
		}),
		op("hostsleep", func(c *guest.Call, args []byte) abi.Outcome {
			c.Sleep(time.Hour)
			for {
				counter++
			}
		}),
		op("late", func(c *guest.Call, args []byte) abi.Outcome {
			c.Sleep(time.Hour) // cut at the deadline
			return guest.Retryable("timed out, so surely not applied")
		}),
		op("oom", func(c *guest.Call, args []byte) abi.Outcome {
			for {
				b := make([]byte, 16<<20)
				b[0] = 1
				sink = append(sink, b)
			}
		}),
		op("big", func(c *guest.Call, args []byte) abi.Outcome {
			var in struct{ N int }
			if err := json.Unmarshal(args, &in); err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			return guest.OK(strings.Repeat("x", in.N), "")
		}),
		op("exit", func(c *guest.Call, args []byte) abi.Outcome {
			os.Exit(3)
			return guest.OK(nil, "")
		}),
	)
}

func main() {}
