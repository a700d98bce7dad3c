package ipclass

import (
	"net/netip"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want Class
	}{
		{"93.184.216.34", Public},
		{"2606:4700::1111", Public},
		{"127.0.0.1", Loopback},
		{"127.1.2.3", Loopback},
		{"::1", Loopback},
		{"::ffff:127.0.0.1", Loopback},
		{"0.0.0.0", Unspecified},
		{"::", Unspecified},
		{"10.1.2.3", Private},
		{"172.16.0.1", Private},
		{"192.168.1.1", Private},
		{"fd12::1", Private},
		{"169.254.1.1", LinkLocal},
		{"fe80::1", LinkLocal},
		{"169.254.169.254", Metadata},
		{"::ffff:169.254.169.254", Metadata},
		{"fd00:ec2::254", Metadata},
		{"100.100.100.200", Metadata},
		{"168.63.129.16", Metadata},
		{"169.254.170.2", Metadata},
		{"224.0.0.251", LinkLocal},
		{"239.1.1.1", Multicast},
		{"100.64.0.1", Reserved},
		{"198.18.0.1", Reserved},
		{"0.1.2.3", Reserved},
		{"64:ff9b::a00:1", Reserved},
	} {
		if got := Of(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Of(%s) = %q, want %q", tc.addr, got, tc.want)
		}
		if Internal(netip.MustParseAddr(tc.addr)) != (tc.want != Public) {
			t.Errorf("Internal(%s) disagrees with Of", tc.addr)
		}
	}
}

func TestOfHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want Class
	}{
		{"api.stripe.com", Public},
		{"localhost", Loopback},
		{"app.localhost", Loopback},
		{"[::1]", Loopback},
		{"10.0.0.8", Private},
		{"metadata.google.internal", Metadata},
		{"Metadata.Google.Internal.", Metadata},
		{"169.254.169.254", Metadata},
		{"[fd00:ec2::254]", Metadata},
	} {
		if got := OfHost(tc.host); got != tc.want {
			t.Errorf("OfHost(%q) = %q, want %q", tc.host, got, tc.want)
		}
	}
}
