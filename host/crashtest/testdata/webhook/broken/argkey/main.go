// Command argkey is a broken webhook connector that derives its Idempotency-Key from the arguments, built to a wasip1 module
// (connhost build broken/argkey). main is empty and never called: the host runs
// init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.KeyFromArgs) }

func main() {}
