//go:build !unix

package testenv

import (
	"errors"
	"os"
	"time"
)

// lockFile takes an exclusive lock by creating path exclusively, polling
// while another process holds it (a stale lock older than 20 minutes is
// removed), and returns the function that releases it.
func lockFile(path string) (func(), error) {
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		if err == nil {
			f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && time.Since(fi.ModTime()) > 20*time.Minute {
			_ = os.Remove(path)
			continue
		}
		time.Sleep(200 * time.Millisecond)
	}
}
