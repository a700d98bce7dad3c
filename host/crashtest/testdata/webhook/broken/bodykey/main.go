// Command bodykey is a webhook connector that sends its key as the
// delivery's event_id (and in a header X-Event-Id the receiver ignores),
// built to a wasip1 module (connhost build broken/bodykey); honest only for a manifest whose
// [provider] names idempotency_field = "event_id". main is empty and
// never called: the host runs init, then the module's exports.
package main

import "example.com/webhook/connector"

func init() { connector.Register(connector.BodyKey) }

func main() {}
