package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/connhost/connhost/internal/wasmbuild"
	"github.com/connhost/connhost/manifests"
)

// TestShippedManifestsArePinned proves the digests committed in manifests/
// are those of the modules built from plugins/ today. It fails whenever a
// connector's code (or the SDK it compiles in) changes without
// `connhost build plugins/<name> --pin`: a stale pin would make `connhost
// dev` refuse to load the connector.
func TestShippedManifestsArePinned(t *testing.T) {
	root, err := wasmbuild.ModuleRoot("")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := manifests.LoadDir(filepath.Join(root, "manifests"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 {
		t.Fatalf("manifests/ holds %d manifests, want email and payments", len(ms))
	}
	for _, m := range ms {
		_, digest, err := wasmbuild.Cached(context.Background(), filepath.Join("plugins", m.Connector.Name))
		if err != nil {
			t.Fatal(err)
		}
		if m.Connector.SHA256 != digest {
			t.Errorf("%s pins %s but plugins/%s builds to %s: run `connhost build plugins/%s --pin`",
				m.Path, m.Connector.SHA256, m.Connector.Name, digest, m.Connector.Name)
		}
	}
}
