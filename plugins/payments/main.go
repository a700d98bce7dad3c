// Command payments is the connhost payments connector: it talks to the
// Stripe API (PaymentIntents and refunds) through the host's HTTP capability.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -buildvcs=false -o payments.wasm ./plugins/payments
//
// The operations are registered in connector.go so that native tests can
// drive them through guest.Invoke; main is never called in a c-shared
// module.
package main

func main() {}
