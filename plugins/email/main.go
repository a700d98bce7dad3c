// Command email is the connhost email connector: it sends and looks up
// messages through Mailpit's HTTP API (v1.33), reached only through the
// host's HTTP capability.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o email.wasm ./plugins/email
//
// The operations are registered in connector.go so that native tests can
// drive them through guest.Invoke; main is never called in a c-shared
// module.
package main

func main() {}
