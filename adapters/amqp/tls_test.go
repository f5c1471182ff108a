package amqp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qbridge/qbridge/mapping"
)

type testPKI struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	pool                      *x509.CertPool
}

// newPKI makes a CA, a server certificate for "broker.test" and a client
// certificate, written as PEM files.
func newPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey := key()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qbridge test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	issue := func(cn string, usage x509.ExtKeyUsage, dns []string) ([]byte, *ecdsa.PrivateKey) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dns,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return der, k
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvDER, srvKey := issue("broker.test", x509.ExtKeyUsageServerAuth, []string{"broker.test"})
	cliDER, cliKey := issue("qbridge", x509.ExtKeyUsageClientAuth, nil)
	cliKeyDER, _ := x509.MarshalECPrivateKey(cliKey)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &testPKI{
		caFile:   write("ca.pem", "CERTIFICATE", caDER),
		certFile: write("client.pem", "CERTIFICATE", cliDER),
		keyFile:  write("client-key.pem", "EC PRIVATE KEY", cliKeyDER),
		server:   tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
		pool:     pool,
	}
}

// tlsProxy terminates TLS (requiring a client certificate of the test CA)
// in front of the plain broker port.
func tlsProxy(t *testing.T, pki *testPKI, target string) string {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pki.server}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				u, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return ln.Addr().String()
}

// TLS with a private CA, a server name other than the dialled host, a
// client certificate, and SASL from the sasl block.
func TestTLSAndSASL(t *testing.T) {
	raw := brokerURL(t)
	u, _ := url.Parse(raw)
	pass, _ := u.User.Password()
	pki := newPKI(t)
	addr := tlsProxy(t, pki, u.Host)
	q := queue(t)
	tlsCfg := &TLSConfig{CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile, ServerName: "broker.test"}
	snk, _ := newTestSink(t, SinkConfig{ConnConfig: ConnConfig{URL: "amqps://" + addr, TLS: tlsCfg, SASL: &SASLConfig{Mechanism: "PLAIN", Username: u.User.Username(), Password: pass}}, Address: q})
	// ANONYMOUS over plain TCP (RabbitMQ maps it to its default user)
	src, _ := newTestSource(t, SourceConfig{ConnConfig: ConnConfig{URL: "amqp://" + u.Host, SASL: &SASLConfig{Mechanism: "ANONYMOUS"}}, Address: q})
	sendAll(t, snk, []*mapping.Message{textMsg("over-tls")})
	d := receiveN(t, src, 1, 10*time.Second)[0]
	if d.Message().ID != "over-tls" {
		t.Fatal(d.Message().ID)
	}
	_ = d.Ack(ctxT(t, 5*time.Second))

	// wrong server name: the handshake fails, naming TLS
	bad := SinkConfig{ConnConfig: ConnConfig{URL: "amqps://" + addr, TLS: &TLSConfig{CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile}}, Address: q}
	if _, err := NewSink(ctxT(t, 10*time.Second), bad, nil, nil); err == nil || !strings.Contains(err.Error(), "tls:") {
		t.Fatalf("want a TLS error, got %v", err)
	}
	// no client certificate: refused by the server
	noCert := SinkConfig{ConnConfig: ConnConfig{URL: "amqps://" + addr, TLS: &TLSConfig{CAFile: pki.caFile, ServerName: "broker.test"}}, Address: q}
	if _, err := NewSink(ctxT(t, 10*time.Second), noCert, nil, nil); err == nil {
		t.Fatal("connected without a client certificate")
	}
	// wrong password: SASL fails
	wrong := SourceConfig{ConnConfig: ConnConfig{URL: "amqp://guest:wrong@" + u.Host}, Address: q}
	if _, err := NewSource(ctxT(t, 10*time.Second), wrong, nil); err == nil {
		t.Fatal("connected with a wrong password")
	}
}
