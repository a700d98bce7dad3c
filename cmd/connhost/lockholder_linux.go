package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockHolder returns the pid of the process holding a POSIX lock on path,
// read from /proc/locks, or 0 when none is found. It never opens path:
// closing any descriptor of a file drops the fcntl locks this process
// holds on it, so probing with F_GETLK could release a ledger this very
// process has open.
func lockHolder(path string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0
	}
	// /proc/locks names the file as major:minor:inode of its device
	// (decoded as glibc's gnu_dev_major and gnu_dev_minor do).
	dev := uint64(st.Dev)
	major := (dev>>8)&0xfff | uint64(uint32(dev>>32)&^0xfff)
	minor := dev&0xff | uint64(uint32(dev>>12)&^0xff)
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: POSIX  ADVISORY  WRITE 4242 08:01:1234 0 EOF"; a blocked
		// waiter's line reads "1: -> POSIX …" and is skipped.
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "POSIX" {
			continue
		}
		if fields[5] != want {
			continue
		}
		// The pid is 0 (or -1) for a holder outside this pid namespace.
		if n, err := strconv.Atoi(fields[4]); err == nil && n > 0 {
			return n
		}
		return 0
	}
	return 0
}
