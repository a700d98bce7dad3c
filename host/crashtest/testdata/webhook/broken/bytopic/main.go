// Command bytopic is a broken webhook connector whose reconcile answers the first delivery of the event's topic, another call's, built to a wasip1 module
// (connhost build broken/bytopic). main is empty and never called: the host runs
// init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.ByTopic) }

func main() {}
