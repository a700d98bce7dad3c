package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// serverProcessChecks says, for messages, what checkServerProcess checks
// on this platform.
const serverProcessChecks = "a live connhost process of yours listening on the URL's port"

// checkServerProcess returns nil when pid is a process of this user whose
// executable is connhost and which holds a socket listening on the host
// and port of rawURL, as the server that wrote server.json does; else what
// it is instead. It reads /proc: the process's owner and executable, the
// listening sockets of this network namespace (/proc/net/tcp, tcp6) and
// the process's open descriptors. A pid that is merely alive (pid 1 always
// is) or a process that does not hold the port fails.
func checkServerProcess(pid int, rawURL string) error {
	dir := "/proc/" + strconv.Itoa(pid)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("process %d runs as uid %d, not as you (uid %d)", pid, st.Uid, os.Geteuid())
	}
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		return fmt.Errorf("process %d: cannot read its executable: %w", pid, err)
	}
	if !isConnhostExecutable(exe) {
		return fmt.Errorf("process %d runs %s, not connhost", pid, exe)
	}
	ip, port, err := urlHostPort(rawURL)
	if err != nil {
		return err
	}
	inodes, err := listeningInodes(ip, port)
	if err != nil {
		return err
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return fmt.Errorf("process %d: cannot list its open files: %w", pid, err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(dir, "fd", fd.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if ino, ok := strings.CutPrefix(target, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return nil
		}
	}
	return fmt.Errorf("process %d (%s) does not listen on %s", pid, filepath.Base(exe), net.JoinHostPort(ip.String(), strconv.Itoa(port)))
}

// isConnhostExecutable reports whether exe (a /proc/<pid>/exe target) is
// a connhost binary: named connhost (connhost.test, connhost-1.2 …), or
// named as this process's own executable.
func isConnhostExecutable(exe string) bool {
	base := filepath.Base(strings.TrimSuffix(exe, " (deleted)")) // a binary replaced while it runs
	if strings.HasPrefix(base, "connhost") {
		return true
	}
	self, err := os.Executable()
	return err == nil && base == filepath.Base(self)
}

// urlHostPort returns the IP and port of a server.json URL: serve and dev
// write the address they listen on, an IP literal.
func urlHostPort(rawURL string) (net.IP, int, error) {
	hostport, ok := strings.CutPrefix(rawURL, "http://")
	if !ok {
		hostport, ok = strings.CutPrefix(rawURL, "https://") // serve with [server] tls_cert
	}
	if !ok {
		return nil, 0, fmt.Errorf("url %q is not http://IP:port", rawURL)
	}
	h, p, err := net.SplitHostPort(hostport)
	ip := net.ParseIP(h)
	port, perr := strconv.Atoi(p)
	if err != nil || ip == nil || perr != nil || port < 1 || port > 65535 {
		return nil, 0, fmt.Errorf("url %q is not http://IP:port", rawURL)
	}
	return ip, port, nil
}

// listeningInodes returns the socket inodes of this network namespace's
// TCP listeners on port whose local address is ip or unspecified.
func listeningInodes(ip net.IP, port int) (map[string]bool, error) {
	out := map[string]bool{}
	read := 0
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read the listening sockets: %w", err)
		}
		read++
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// "  0: 0100007F:20D4 00000000:0000 0A … uid timeout inode …"
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			addr, hexPort, ok := strings.Cut(fields[1], ":")
			if !ok {
				continue
			}
			if p, err := strconv.ParseUint(hexPort, 16, 16); err != nil || int(p) != port {
				continue
			}
			local := procNetIP(addr)
			if local == nil || !(local.Equal(ip) || local.IsUnspecified()) {
				continue
			}
			out[fields[9]] = true
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("cannot read the listening sockets: %w", err)
		}
	}
	if read == 0 {
		return nil, errors.New("cannot read the listening sockets: no /proc/net/tcp")
	}
	return out, nil
}

// procNetIP decodes an address of /proc/net/tcp{,6}: the IP's 32-bit
// words, each in the machine's byte order, in hex.
func procNetIP(s string) net.IP {
	b, err := hex.DecodeString(s)
	if err != nil || (len(b) != net.IPv4len && len(b) != net.IPv6len) {
		return nil
	}
	ip := make(net.IP, len(b))
	for i := 0; i < len(b); i += 4 {
		binary.BigEndian.PutUint32(ip[i:], binary.NativeEndian.Uint32(b[i:]))
	}
	return ip
}
