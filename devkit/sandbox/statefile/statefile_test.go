package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	var v struct{ A int }
	if found, err := Load(path, &v); found || err != nil {
		t.Fatalf("missing file: found %v, %v", found, err)
	}
	for i := 1; i <= 2; i++ {
		if err := Save(path, struct{ A int }{i}); err != nil {
			t.Fatal(err)
		}
	}
	if found, err := Load(path, &v); !found || err != nil || v.A != 2 {
		t.Fatalf("Load = %v %v %+v", found, err, v)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	for _, bad := range []string{`{"A":1,"B":2}`, `{"A":1}x`, `{"A":`} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if found, err := Load(path, &v); !found || !errors.Is(err, ErrCorrupt) {
			t.Errorf("Load(%s) = %v, %v", bad, found, err)
		}
	}
}
