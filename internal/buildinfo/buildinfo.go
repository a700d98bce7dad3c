// Package buildinfo says which connhost this is: its version and commit,
// and the Go, wazero and ABI versions it was built with, read from the
// binary's embedded build information (runtime/debug.ReadBuildInfo).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/connhost/connhost/abi"
)

// wazeroModule is the module path of wazero.
const wazeroModule = "github.com/tetratelabs/wazero"

// Info identifies a build.
type Info struct {
	// Version is the module version: a tag for a released build (go
	// install …@v1.2.3), a pseudo-version or "(devel)" for a build from
	// a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from ("" when the
	// build recorded none), Modified whether the tree had changes.
	Commit   string `json:"commit"`
	Modified bool   `json:"modified,omitempty"`
	// GoVersion and WazeroVersion are the versions it was built with.
	GoVersion     string `json:"go_version"`
	WazeroVersion string `json:"wazero_version"`
	// ABIVersion is the connector ABI version it loads (abi.Version).
	ABIVersion int `json:"abi_version"`
}

// Read returns the build information of the running binary.
func Read() Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version(), WazeroVersion: "unknown", ABIVersion: abi.Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	if bi.Main.Version != "" {
		i.Version = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == wazeroModule {
			i.WazeroVersion = d.Version
			if d.Replace != nil {
				i.WazeroVersion = d.Replace.Version
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	return i
}

// Short is the version and commit in one word, as MCP's serverInfo and
// the OpenAPI document carry it: "v1.2.3", or "(devel)+abcdef012345"
// ("-dirty" appended for a modified tree).
func (i Info) Short() string {
	s := i.Version
	if i.Commit != "" && !strings.Contains(s, shortCommit(i.Commit)) {
		s += "+" + shortCommit(i.Commit)
	}
	if i.Modified && !strings.HasSuffix(s, "+dirty") {
		s += "-dirty"
	}
	return s
}

// Text is what connhost version prints.
func (i Info) Text() string {
	commit := i.Commit
	if commit == "" {
		commit = "unknown"
	}
	if i.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("connhost %s\n  commit  %s\n  go      %s\n  wazero  %s\n  abi     %d\n",
		i.Version, commit, i.GoVersion, i.WazeroVersion, i.ABIVersion)
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
