// Command keyignored is a broken webhook connector that sends a fresh Idempotency-Key per attempt, built to a wasip1 module
// (connhost build broken/keyignored). main is empty and never called: the host runs
// init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.KeyIgnored) }

func main() {}
