// Package sdk holds the guest kits for connectors written in languages
// other than Go: rust/connhost-guest (a crate) and assemblyscript (the npm
// package @connhost/guest). Go connectors use abi/guest. connhost new
// --lang writes a copy of a kit beside the connectors it scaffolds when
// the project has none, so that a connector builds offline.
package sdk

import "embed"

// Kits holds the kits' sources: rust/connhost-guest/… and
// assemblyscript/…, without build output.
//
//go:embed rust/connhost-guest/Cargo.toml rust/connhost-guest/build.rs rust/connhost-guest/rustfmt.toml rust/connhost-guest/src/*.rs
//go:embed assemblyscript/package.json assemblyscript/asconfig.json assemblyscript/README.md assemblyscript/index.ts assemblyscript/exports.ts
var Kits embed.FS
