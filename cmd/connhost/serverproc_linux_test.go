package main

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestCheckServerProcess: this test process, listening on a port, passes
// for that port's URL and fails for another port; pid 1 (alive, but not
// a connhost process of this user listening there) fails.
func TestCheckServerProcess(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	url := "http://" + ln.Addr().String()
	if err := checkServerProcess(os.Getpid(), url); err != nil {
		t.Fatalf("this process listening on %s: %v", url, err)
	}
	if err := checkServerProcess(os.Getpid(), "https://"+ln.Addr().String()); err != nil {
		t.Fatalf("this process listening on %s (https: serve with tls_cert): %v", ln.Addr(), err)
	}
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := other.Addr().(*net.TCPAddr).Port
	other.Close()
	if err := checkServerProcess(os.Getpid(), "http://127.0.0.1:"+strconv.Itoa(port)); err == nil || !strings.Contains(err.Error(), "does not listen") {
		t.Errorf("a port this process does not hold: %v", err)
	}
	if err := checkServerProcess(1, url); err == nil {
		t.Errorf("pid 1 accepted as the server on %s", url)
	} else {
		t.Logf("pid 1: %v", err)
	}
	for _, bad := range []string{"http://localhost:8420", "https://localhost:8420", "ftp://" + ln.Addr().String(), "http://127.0.0.1"} {
		if err := checkServerProcess(os.Getpid(), bad); err == nil {
			t.Errorf("url %q accepted", bad)
		}
	}
}

func TestProcNetIP(t *testing.T) {
	word := func(ip net.IP) string {
		var b []byte
		for i := 0; i < len(ip); i += 4 {
			b = binary.NativeEndian.AppendUint32(b, binary.BigEndian.Uint32(ip[i:]))
		}
		return strings.ToUpper(hex.EncodeToString(b))
	}
	for _, s := range []string{"127.0.0.1", "0.0.0.0", "10.1.2.3", "::1", "::", "::ffff:127.0.0.1", "fe80::1"} {
		ip := net.ParseIP(s)
		if v4 := ip.To4(); v4 != nil && !strings.Contains(s, ":") {
			ip = v4
		}
		if got := procNetIP(word(ip)); !got.Equal(ip) {
			t.Errorf("%s: decoded %v", s, got)
		}
	}
	for _, bad := range []string{"", "XYZ", "0100007F00"} {
		if procNetIP(bad) != nil {
			t.Errorf("%q decoded", bad)
		}
	}
}
