package main

import (
	"github.com/connhost/connhost/server"
	"path/filepath"
	"testing"
)

// TestWitnessPath: --witness wins over [server] witness, which wins over
// the default beside --data (outside it: a restore or deletion of the data
// directory must not take the witness with it).
func TestWitnessPath(t *testing.T) {
	cfg, err := server.ParseConfig("c.toml", []byte("[server]\nwitness = \"/state/node-1.witness\"\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(nil, nil, nil)
	a.g.data = "./.connhost/"
	if got, want := a.witnessPath(nil), filepath.Clean(".connhost.witness"); got != want {
		t.Errorf("default witness %q, want %q", got, want)
	}
	if got := a.witnessPath(cfg); got != "/state/node-1.witness" {
		t.Errorf("[server] witness: %q", got)
	}
	a.g.witness = "/elsewhere/w"
	if got := a.witnessPath(cfg); got != "/elsewhere/w" {
		t.Errorf("--witness: %q", got)
	}
	if _, err := server.ParseConfig("c.toml", []byte("[server]\nwitness = 3\n"), nil); err == nil {
		t.Error("a witness that is not a string is accepted")
	}
}
