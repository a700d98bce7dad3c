//go:build unix

package main

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// openOwnFile opens path for reading if this user's connhost server could
// have written it: a regular file (not a symbolic link) owned by this
// user, readable and writable by nobody else, in a directory owned by this
// user that nobody else may write to. Anything else is a
// *untrustedFileError: a file another user put there, or a copy (a
// checkout of a repository, an unpacked archive) that no server of this
// user wrote. A missing file is an error wrapping fs.ErrNotExist.
func openOwnFile(path, dir string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errLoop(err) {
			return nil, &untrustedFileError{Path: path, Why: "it is a symbolic link"}
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if why := notOwn(fi, 0o077, "readable or writable by others"); why != "" {
		f.Close()
		return nil, &untrustedFileError{Path: path, Why: why}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &untrustedFileError{Path: path, Why: "it is not a regular file"}
	}
	di, err := os.Stat(dir)
	if err != nil {
		f.Close()
		return nil, err
	}
	if why := notOwn(di, 0o022, "writable by others"); why != "" {
		f.Close()
		return nil, &untrustedFileError{Path: path, Why: "its directory " + dir + ": " + why}
	}
	return f, nil
}

// notOwn says why fi is not this user's alone ("" when it is): another
// owner, or a permission bit of others in deny.
func notOwn(fi fs.FileInfo, deny fs.FileMode, what string) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Sprintf("it is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid())
	}
	if m := fi.Mode().Perm(); m&deny != 0 {
		return fmt.Sprintf("its mode %04o makes it %s", m, what)
	}
	return ""
}

func errLoop(err error) bool {
	pe, ok := err.(*fs.PathError)
	return ok && pe.Err == syscall.ELOOP
}
