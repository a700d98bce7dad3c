//go:build unix

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/connhost/connhost/cli"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 with serial
// into certFile and its key into keyFile.
func selfSigned(t *testing.T, serial int64, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "connhost test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedSerial is the serial of the certificate the server at addr
// presents.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestServeTLS runs connhost serve as a real process with tls_cert and
// tls_key: the discovery file names an https URL, connhost ls reaches it
// trusting $CONNHOST_CA_FILE (and refuses it without), a SIGHUP after the
// files changed serves the new certificate, and one with a broken pair
// keeps the previous one and says so.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds connhost and runs it")
	}
	tmp := t.TempDir()
	bin := buildConnhost(t, tmp)
	d := testDirs(t)
	mdir := pinnedManifests(t, tmp, filepath.Join(d.modules, "noop.wasm"))
	global := []string{"--data", d.data, "--manifests", mdir, "--modules", d.modules}
	certFile, keyFile := filepath.Join(tmp, "cert.pem"), filepath.Join(tmp, "key.pem")
	selfSigned(t, 1, certFile, keyFile)
	ca1 := filepath.Join(tmp, "ca1.pem")
	if b, err := os.ReadFile(certFile); err != nil || os.WriteFile(ca1, b, 0o644) != nil {
		t.Fatal(err)
	}
	const runtimeTok = "tok-runtime-0123456789"
	cfg := writeFile(t, tmp, "connhost.toml", "[server]\ntoken_env = \"T_RUNTIME\"\ntls_cert = \""+certFile+"\"\ntls_key = \""+keyFile+"\"\n")
	srv := startServer(t, bin, cliEnv("T_RUNTIME="+runtimeTok), "serving the HTTP API",
		append([]string{"--json", "serve", "--config", cfg, "--listen", "127.0.0.1:0"}, global...)...)
	si, err := readServerInfo(d.data)
	if err != nil || !strings.HasPrefix(si.URL, "https://127.0.0.1:") {
		t.Fatalf("discovery file %+v: %v", si, err)
	}
	u, _ := url.Parse(si.URL)

	code, out, errOut := runBin(t, bin, cliEnv(DefaultTokenEnv+"="+runtimeTok, CAFileEnv+"="+ca1), append([]string{"ls"}, global...)...)
	if code != cli.ExitOK || !strings.Contains(out, "no executions") {
		t.Fatalf("ls over https with $%s: exit %d %q %q", CAFileEnv, code, out, errOut)
	}
	code, _, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+runtimeTok), append([]string{"ls"}, global...)...)
	if code == cli.ExitOK || !strings.Contains(errOut, "certificate") {
		t.Fatalf("ls over https, the certificate not trusted: exit %d %q", code, errOut)
	}
	code, out, errOut = runBin(t, bin, cliEnv(DefaultTokenEnv+"="+runtimeTok, CAFileEnv+"="+ca1), append([]string{"ls", "--server", si.URL}, global...)...)
	if code != cli.ExitOK || !strings.Contains(out, "no executions") {
		t.Fatalf("ls --server https://…: exit %d %q %q", code, out, errOut)
	}

	if s := servedSerial(t, u.Host); s != 1 {
		t.Fatalf("serial %d before the reload", s)
	}
	selfSigned(t, 2, certFile, keyFile)
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	srv.nextLog(t, "SIGHUP: TLS certificate reloaded", nil)
	if s := servedSerial(t, u.Host); s != 2 {
		t.Fatalf("serial %d after the reload, want 2", s)
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if l := srv.nextLog(t, "SIGHUP: TLS certificate not reloaded: still serving the previous one", nil); l["level"] != "ERROR" || !strings.Contains(l["err"].(string), "tls_key") {
		t.Errorf("bad reload line: %v", l)
	}
	if s := servedSerial(t, u.Host); s != 2 {
		t.Fatalf("serial %d after a broken reload, want 2 still", s)
	}
	srv.stop(t)
}

// TestServeRefusesPublicWithoutTLS: a non-loopback listen without TLS is
// refused, naming the keys that allow it; behind_tls_proxy lets it past
// that check (here to the next one, the missing manifests).
func TestServeRefusesPublicWithoutTLS(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "connhost.toml", "[server]\nlisten = \"0.0.0.0:0\"\ntoken = \"tok-runtime-0123456789\"\n")
	code, _, errOut := runCLI(t, nil, "serve", "--config", cfg, "--data", filepath.Join(dir, "data"))
	if code != cli.ExitFailure || !strings.Contains(errOut, "without TLS") || !strings.Contains(errOut, "[server] tls_cert") ||
		!strings.Contains(errOut, "behind_tls_proxy = true") || !strings.Contains(errOut, "0.0.0.0:0") {
		t.Fatalf("exit %d stderr %q", code, errOut)
	}
	proxied := writeFile(t, dir, "proxied.toml", "[server]\nlisten = \"0.0.0.0:0\"\ntoken = \"tok-runtime-0123456789abcdef0123456\"\nbehind_tls_proxy = true\n")
	code, _, errOut = runCLI(t, nil, "serve", "--config", proxied, "--data", filepath.Join(dir, "data"), "--manifests", filepath.Join(dir, "none"))
	if code == cli.ExitOK || strings.Contains(errOut, "without TLS") || !strings.Contains(errOut, "--manifests") {
		t.Fatalf("behind_tls_proxy: exit %d stderr %q", code, errOut)
	}
}
