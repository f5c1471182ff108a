// Package adaptercfg holds the configuration pieces every adapter shares:
// duration fields written as strings ("30s") and TLS settings from files.
package adaptercfg

import (
	"crypto/tls"
	"crypto/x509"
	"os"
)

// TLS is the `tls { ... }` block of the adapters.
type TLS struct {
	CAFile             string `hcl:"ca_file,optional"`
	CertFile           string `hcl:"cert_file,optional"`
	KeyFile            string `hcl:"key_file,optional"`
	ServerName         string `hcl:"server_name,optional"`
	InsecureSkipVerify bool   `hcl:"insecure_skip_verify,optional"`
}

// Config builds the tls.Config: TLS 1.2 at least, the CA file as the only
// roots when set, and a client certificate when both files are set.
func (t *TLS) Config() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in, off by default
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, Errorf("tls.ca_file", "%w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, Errorf("tls.ca_file", "%s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	switch {
	case t.CertFile != "" && t.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, Fields("tls.cert_file", "tls.cert_file/key_file", "%w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case t.CertFile != "":
		return nil, Errorf("tls.key_file", "required with tls.cert_file")
	case t.KeyFile != "":
		return nil, Errorf("tls.cert_file", "required with tls.key_file")
	}
	return tc, nil
}
