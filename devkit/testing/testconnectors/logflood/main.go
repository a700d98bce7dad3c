// Command logflood is a test connector that writes as much as it can to
// every output a guest has, so tests can check that the host bounds what
// reaches its log and its own streams.
//
//   - log: args {"records": N, "size": S}; logs N records of S bytes at
//     info (each record's first bytes say its number), then answers
//     {"logged": N}.
//   - forever: args {"size": S}; logs records of S bytes until the call's
//     deadline cuts it (it never answers).
//   - stdio: args {"records": N, "size": S}; writes N lines of S bytes to
//     stdout and to stderr, then answers {"written": N}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/connhost/connhost/abi"
	"github.com/connhost/connhost/abi/guest"
)

type params struct {
	Records int
	Size    int
}

func parse(args []byte) (params, error) {
	var p params
	err := json.Unmarshal(args, &p)
	return p, err
}

// record returns a message of size bytes that starts with its number.
func record(i, size int) string {
	head := fmt.Sprintf("record %d ", i)
	if size <= len(head) {
		return head[:max(size, 0)]
	}
	return head + strings.Repeat("x", size-len(head))
}

func init() {
	guest.Register(
		guest.Operation{Name: "log", Execute: func(c *guest.Call, args []byte) abi.Outcome {
			p, err := parse(args)
			if err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			for i := range p.Records {
				c.Info(record(i, p.Size))
			}
			return guest.OK(map[string]int{"logged": p.Records}, "")
		}},
		guest.Operation{Name: "forever", Execute: func(c *guest.Call, args []byte) abi.Outcome {
			p, err := parse(args)
			if err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			for i := 0; ; i++ {
				c.Info(record(i, p.Size))
			}
		}},
		guest.Operation{Name: "stdio", Execute: func(c *guest.Call, args []byte) abi.Outcome {
			p, err := parse(args)
			if err != nil {
				return guest.Permanent("bad args: %v", err)
			}
			for i := range p.Records {
				line := record(i, p.Size) + "\n"
				fmt.Fprint(os.Stdout, line)
				fmt.Fprint(os.Stderr, line)
			}
			return guest.OK(map[string]int{"written": p.Records}, "")
		}},
	)
}

func main() {}
