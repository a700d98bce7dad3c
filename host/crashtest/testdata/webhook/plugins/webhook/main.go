// Command webhook is the webhook connector, built to a wasip1 module
// (connhost build plugins/webhook). main is empty and never called: the host runs
// init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.Honest) }

func main() {}
