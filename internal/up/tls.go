package up

import (
	"fmt"
	"path/filepath"
	"strings"

	"shoal/internal/cluster/front"
)

// selfSigned is the front's certificate set when Config.TLS asks for
// HTTPS (nil otherwise): a self-signed certificate for localhost and
// 127.0.0.1 (and ::1) kept in DataDir/tls (made on first use, key mode
// 0600). It sets URL to https. Clients must skip verification: curl -k,
// shoal bench http --insecure.
func (c *Cluster) selfSigned() (*front.Certs, error) {
	if !c.Config.TLS {
		return nil, nil
	}
	dir := filepath.Join(c.Config.DataDir, "tls")
	f := front.CertFiles{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	if err := front.WriteSelfSigned(f.Cert, f.Key, front.SelfSigned{}); err != nil {
		return nil, fmt.Errorf("--tls: %w", err)
	}
	certs, err := front.LoadCerts([]front.CertFiles{f})
	if err != nil {
		return nil, fmt.Errorf("--tls: %w", err)
	}
	c.Certs, c.TLSCert = certs, f.Cert
	c.URL = "https://" + strings.TrimPrefix(c.URL, "http://")
	return certs, nil
}
