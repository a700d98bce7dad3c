package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/connhost/connhost/abi/guest"
	"github.com/connhost/connhost/manifests"
	"github.com/connhost/connhost/manifests/manifesttest"
)

// TestManifest proves manifests/email.toml and this module agree: the
// same operations, each declared policy backed by the entry point it needs,
// every config key the connector reads declared, and the input schemas
// accepting what the connector accepts and refusing a smuggled key.
func TestManifest(t *testing.T) {
	m, err := manifests.Load(filepath.Join("..", "..", "manifests", "email.toml"))
	if err != nil {
		t.Fatal(err)
	}
	manifesttest.CheckManifest(t, m, guest.Describe())
	for _, k := range []string{"base_url", "default_from", "basic_auth"} {
		if !slices.Contains(m.Capabilities.Config, k) {
			t.Errorf("config key %q used but not declared", k)
		}
	}
	valid := map[string][]string{
		"send": {sendJSON, `{"to":"a@b.c","subject":"s","html":"<p>x</p>"}`,
			`{"to":["a@b.c"],"cc":"d@e.f","subject":"s","text":"t","from":"x@y.z"}`},
		"release_message": {`{"id":"MP0001","to":"a@b.c"}`, `{"id":"abcXYZ09","to":["a@b.c","d@e.f"]}`},
		"get_message":     {`{"id":"MP0001"}`},
		"search_messages": {`{"query":"tag:x"}`, `{"query":"x","limit":50}`},
	}
	invalid := map[string][]string{
		"send": {
			`{"to":"a@b.c","subject":"s","text":"t","key":"k"}`,
			`{"to":"a@b.c","subject":"s","text":"t","idempotency_key":"k"}`,
			`{"to":"a@b.c","subject":"s"}`,
			`{"to":[],"subject":"s","text":"t"}`,
		},
		"release_message": {`{"id":"../x","to":"a@b.c"}`, `{"id":"MP1"}`},
		"get_message":     {`{"id":"a/b"}`},
		"search_messages": {`{"query":""}`, `{"query":"x","limit":51}`},
	}
	manifesttest.CheckSchemas(t, m, valid, invalid)
}
