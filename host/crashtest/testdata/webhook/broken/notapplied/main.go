// Command notapplied is a broken webhook connector whose reconcile answers not_applied without looking, built to a wasip1 module
// (connhost build broken/notapplied). main is empty and never called: the host runs
// init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.AlwaysNotApplied) }

func main() {}
