// Package ipclass classifies IP addresses the way connhost's http
// capability does: which addresses a connector must not reach unless its
// allowlist names them literally (loopback, private, link-local,
// unspecified, multicast, other reserved ranges), and which of those are
// cloud metadata services, whose answers hold the machine's credentials.
//
// The wasm runtime (internal/wasmrt) uses it to check every dialled
// address; the audit (internal/audit) uses it to judge allowlist entries
// before anything is dialled. One table serves both, so the audit warns
// about exactly the addresses the host treats as internal.
package ipclass

import (
	"net/netip"
	"strings"
)

// Class names the kind of an address. The zero value is Public.
type Class string

// Classes, in the order Of tests them.
const (
	// Public: an ordinary internet address.
	Public Class = ""
	// Metadata: a cloud provider's instance metadata service (credentials,
	// user data). Always internal.
	Metadata Class = "cloud metadata"
	// Loopback: 127.0.0.0/8, ::1.
	Loopback Class = "loopback"
	// Unspecified: 0.0.0.0, ::.
	Unspecified Class = "unspecified"
	// Private: 10/8, 172.16/12, 192.168/16, fc00::/7.
	Private Class = "private"
	// LinkLocal: 169.254/16, fe80::/10, and link-local multicast.
	LinkLocal Class = "link-local"
	// Multicast: other multicast addresses.
	Multicast Class = "multicast"
	// Reserved: 0/8, shared address space (100.64/10), IETF protocol
	// assignments (192.0.0/24), benchmarking (198.18/15), 240/4, NAT64.
	Reserved Class = "reserved"
)

// metadataAddrs are the instance metadata endpoints of the large clouds.
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata and credentials
	netip.MustParseAddr("169.254.170.23"),  // AWS EKS Pod Identity agent
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("fd00:ec2::23"),    // AWS EKS Pod Identity agent over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud (classic)
	netip.MustParseAddr("168.63.129.16"),   // Azure WireServer
}

// metadataHosts are host names that resolve to a metadata service.
var metadataHosts = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}

var reservedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// Of returns the class of ip (IPv4-mapped IPv6 addresses are classed as
// their IPv4 address).
func Of(ip netip.Addr) Class {
	ip = ip.Unmap()
	for _, m := range metadataAddrs {
		if ip == m {
			return Metadata
		}
	}
	switch {
	case ip.IsLoopback():
		return Loopback
	case ip.IsUnspecified():
		return Unspecified
	case ip.IsPrivate():
		return Private
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return LinkLocal
	case ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return Multicast
	}
	for _, p := range reservedPrefixes {
		if p.Contains(ip) {
			return Reserved
		}
	}
	return Public
}

// Internal reports whether ip is an address a connector must not reach
// unless its allowlist names it literally: every class but Public.
func Internal(ip netip.Addr) bool { return Of(ip) != Public }

// OfHost classes a host as written in an allowlist entry: an IP literal
// (brackets allowed) by Of, "localhost" and names under ".localhost" as
// Loopback, the metadata services' well-known names as Metadata. Other
// names are Public: what they resolve to is checked when they are
// dialled, not here.
func OfHost(host string) Class {
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if ip, err := netip.ParseAddr(host); err == nil {
		return Of(ip)
	}
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return Loopback
	}
	for _, h := range metadataHosts {
		if host == h {
			return Metadata
		}
	}
	return Public
}
