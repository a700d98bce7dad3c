package manifests

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// SetSHA256 returns a copy of the manifest text data with the [connector]
// table's sha256 set to digest (64 lower-case hex characters), as
// `connhost build --pin` does. Everything else is preserved byte for byte:
// an existing sha256 line keeps its indentation and trailing comment and
// only its value changes; without one, a `sha256 = "…"` line is inserted
// after the `module =` line (else right after the [connector] header). It
// refuses a bad digest (ErrBadDigest), text without a [connector] table
// (ErrNoConnectorTable) and text that is not valid TOML (ErrInvalid).
func SetSHA256(data []byte, digest string) ([]byte, error) {
	if !sha256RE.MatchString(digest) {
		return nil, fmt.Errorf("%w: %q", ErrBadDigest, digest)
	}
	var probe map[string]any
	if _, err := toml.Decode(string(data), &probe); err != nil {
		return nil, syntaxError("", err)
	}
	lines := strings.Split(string(data), "\n")
	infos := scanLines(lines)
	header, module, sha := -1, -1, -1
	for i, li := range infos {
		switch {
		case li.header && li.table == "connector":
			header = i
		case li.table == "connector" && li.key == "module" && module < 0:
			module = i
		case li.table == "connector" && li.key == "sha256" && sha < 0:
			sha = i
		}
	}
	if header < 0 {
		return nil, ErrNoConnectorTable
	}
	value := `"` + digest + `"`
	switch {
	case sha >= 0:
		// The old value is one simple string (the format allows nothing
		// else): keep what follows it, e.g. a comment or "\r".
		line, ok := replaceValue(lines[sha], infos[sha].valueStart, value)
		if !ok {
			return nil, fmt.Errorf("%w: line %d: sha256 is not a one-line string", ErrInvalid, sha+1)
		}
		lines[sha] = line
	default:
		at, indent, eol := header, "", ""
		if module >= 0 {
			at = module
			indent = lines[module][:len(lines[module])-len(strings.TrimLeft(lines[module], " \t"))]
		}
		if strings.HasSuffix(lines[at], "\r") {
			eol = "\r"
		}
		lines = append(lines[:at+1], append([]string{indent + "sha256 = " + value + eol}, lines[at+1:]...)...)
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// PinFile rewrites the manifest file at path with SetSHA256, atomically
// (write to a temporary file in the same directory, then rename), keeping
// its permissions.
func PinFile(path, digest string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("manifests: pin: %w", err)
	}
	out, err := SetSHA256(data, digest)
	if err != nil {
		return fmt.Errorf("manifests: pin %s: %w", path, err)
	}
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".pin-*.toml")
	if err != nil {
		return fmt.Errorf("manifests: pin: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return fmt.Errorf("manifests: pin: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("manifests: pin: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("manifests: pin: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("manifests: pin: %w", err)
	}
	return nil
}

// ReviewDigest returns the hex sha256 of the manifest's text without its
// [connector] sha256 line: what a reviewer reviews. `connhost build --pin`
// changes only that line, so a manifest pinned to a rebuilt module keeps
// its review digest, while any other change — a key, a value, a comment —
// gives a new one. It returns "" for a manifest not parsed from text.
func (m *Manifest) ReviewDigest() string {
	if m.text == nil {
		return ""
	}
	lines := m.text.lines
	for i, li := range m.text.infos {
		if li.table == "connector" && li.key == "sha256" && !li.header {
			lines = append(slices.Clone(lines[:i]), lines[i+1:]...)
			break
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	return hex.EncodeToString(sum[:])
}
