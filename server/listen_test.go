package server

import (
	"net"
	"testing"
)

func TestIsLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8420": true, "localhost:1": true, "[::1]:8420": true,
		":8420": false, "0.0.0.0:8420": false, "10.1.2.3:80": false, "example.com:80": false, "nonsense": false,
	} {
		if got := IsLoopbackListen(addr); got != want {
			t.Errorf("IsLoopbackListen(%q) = %t", addr, got)
		}
	}
}

// TestURL: a client on this machine reaches a listener on an unspecified
// address on loopback.
func TestURL(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8420": "http://127.0.0.1:8420", "[::]:8420": "http://[::1]:8420",
		"127.0.0.1:9": "http://127.0.0.1:9", "10.1.2.3:80": "http://10.1.2.3:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := URL("http", a); got != want {
			t.Errorf("URL(%s) = %s, want %s", addr, got, want)
		}
	}
}
