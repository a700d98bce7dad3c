// Package server is connhost's server: the front doors of an executor —
// the HTTP API (server/httpapi), MCP over streamable HTTP at /mcp
// (server/mcpserver) and the reviewers' console at /ui/ (server/console),
// behind one authentication — and what a server runs beside them: the
// executor's background pass, the log and notifications of what waits for
// a human (server/waiting, server/notify).
//
// A Config is a connhost.toml (LoadConfig): the server table's paths,
// listen address, ledger and TLS, the principals and their limits, the mcp
// and notify tables, and the connectors' values. New opens the executor the config
// describes (OpenExecutor), or serves one the caller opened with
// host.Open; Serve serves it on a listener the way `connhost serve` does,
// and Handler hands its HTTP handler to a program that serves it from its
// own http.Server (running Run beside it). Shutdown stops what Serve and
// Run run and closes what New opened.
//
// cmd/connhost's serve, dev and mcp commands are built on this package;
// the flags, the discovery file and the printing stay there.
package server
