package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/connhost/connhost/server/httpapi"
)

// minTokenLength is the shortest bearer token serve takes without a
// warning, and on a non-loopback listen at all: 32 characters, as 16
// random bytes in hex (openssl rand -hex 32 makes 64).
const minTokenLength = 32

// errShortToken refuses a non-loopback listen with a token shorter than
// minTokenLength.
var errShortToken = errors.New("refusing to listen on a non-loopback address with bearer tokens shorter than 32 characters: whoever reaches the port could guess them (and the server proof lets an impostor test guesses offline); make each one 32 random bytes, e.g. openssl rand -hex 32")

// shortTokens names the principals whose token is shorter than
// minTokenLength, with its length.
func shortTokens(ps []httpapi.Principal) []string {
	var out []string
	for _, p := range ps {
		if n := utf8.RuneCountInString(p.Token); n < minTokenLength {
			out = append(out, fmt.Sprintf("%s (%d characters)", p.Name, n))
		}
	}
	return out
}

// errPublicWithoutToken refuses a non-loopback listen address without a
// bearer token.
var errPublicWithoutToken = errors.New("refusing to listen on a non-loopback address without a bearer token (set [server] token_env, or add [[principals]], in the config)")

// IsLoopbackListen reports whether addr ("host:port") binds only loopback
// interfaces. An empty host (":8420") binds every interface.
func IsLoopbackListen(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		// A name is only as loopback as what it resolves to.
		addrs, err := net.LookupHost(h)
		if err != nil || len(addrs) == 0 {
			return false
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
				return false
			}
		}
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// CheckListen refuses to serve the config on the address addr
// ("host:port") where that would expose it: a non-loopback address
// without a bearer token, without TLS (tls_cert, or behind_tls_proxy), or
// with a token shorter than 32 characters. With logger it also logs the
// warnings of an address it accepts: short tokens on loopback, a
// non-loopback address without public_url. The command that serves calls
// it before it opens anything, so that a refused start leaves nothing
// behind; Serve checks its listener's address again.
func (c *Config) CheckListen(addr string, logger *slog.Logger) error {
	principals := c.Credentials()
	loopback := IsLoopbackListen(addr)
	if !loopback && len(principals) == 0 {
		return invalid(fmt.Errorf("%w: %s", errPublicWithoutToken, addr))
	}
	if !loopback && c.Server.TLSCert == "" && !c.Server.BehindTLSProxy {
		return invalid(fmt.Errorf("%w (listen %s)", errPlainPublicListen, addr))
	}
	if short := shortTokens(principals); len(short) > 0 {
		if !loopback {
			return invalid(fmt.Errorf("%w (listen %s): %s", errShortToken, addr, strings.Join(short, ", ")))
		}
		if logger != nil {
			logger.Warn("short bearer tokens: a token under "+strconv.Itoa(minTokenLength)+" characters can be guessed; this server listens on loopback only, where that is allowed (a non-loopback listen refuses to start); make each one 32 random bytes, e.g. openssl rand -hex 32",
				"principals", short)
		}
	}
	if !loopback && c.Server.PublicURL == "" && logger != nil {
		logger.Warn("no [server] public_url: clients check the server's proof against the URL they dial, and the proof names only the listen address; set public_url to the URL clients use, or they will not send their tokens",
			"listen", addr)
	}
	return nil
}
