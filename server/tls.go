package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// certReloader serves the certificate of [server] tls_cert and tls_key,
// read again by reload (on SIGHUP): a pair that cannot be loaded leaves
// the one in use in place. It is safe for concurrent use.
type certReloader struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// newCertReloader loads the pair once: an error here refuses to start.
func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads the pair; on error the previous one stays in use.
func (r *certReloader) reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("tls: [server] tls_cert %s and tls_key %s: %w", r.certFile, r.keyFile, err)
	}
	if c.Leaf != nil && time.Now().After(c.Leaf.NotAfter) {
		return fmt.Errorf("tls: [server] tls_cert %s expired at %s", r.certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	r.cur.Store(&c)
	return nil
}

// config is the server's TLS configuration: TLS 1.2 at least, the
// current pair for every handshake.
func (r *certReloader) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return r.cur.Load(), nil }}
}

// logReload reloads the pair and logs the outcome.
func (r *certReloader) logReload(logger *slog.Logger) {
	if err := r.reload(); err != nil {
		logger.Error("SIGHUP: TLS certificate not reloaded: still serving the previous one", "err", err)
		return
	}
	attrs := []any{"tls_cert", r.certFile}
	if l := r.cur.Load().Leaf; l != nil {
		attrs = append(attrs, "subject", l.Subject.String(), "not_after", l.NotAfter.UTC().Format(time.RFC3339))
	}
	logger.Info("SIGHUP: TLS certificate reloaded", attrs...)
}

// errPlainPublicListen refuses a non-loopback listen without TLS.
var errPlainPublicListen = errors.New("refusing to listen on a non-loopback address without TLS: tokens and decisions would cross the network in clear; set [server] tls_cert and tls_key, or [server] behind_tls_proxy = true if a TLS-terminating proxy sits in front")
