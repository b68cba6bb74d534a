package main

import (
	"flag"
	"fmt"

	"shoal/internal/cluster/front"
	"shoal/internal/config"
)

// Flags and wiring of HTTPS at the front: `shoal front
// --tls-cert A.crt,B.crt --tls-key A.key,B.key` or [[tls]] tables in the
// configuration file.

type tlsFlags struct {
	cert, key *string
}

func addTLSFlags(fs *flag.FlagSet) *tlsFlags {
	return &tlsFlags{
		cert: fs.String("tls-cert", "", "serve HTTPS with these certificate chains (PEM, comma-separated; picked by the client's server name, the first by default)"),
		key:  fs.String("tls-key", "", "the private keys of --tls-cert, in the same order"),
	}
}

// apply puts the flags into fc when given (or when there is no file).
func (t *tlsFlags) apply(fc *config.Front, set map[string]bool, fromFile bool) error {
	if !set["tls-cert"] && !set["tls-key"] && fromFile {
		return nil
	}
	certs, keys := splitList(*t.cert), splitList(*t.key)
	if len(certs) != len(keys) {
		return fmt.Errorf("--tls-cert names %d files, --tls-key %d: give one key per certificate, in the same order", len(certs), len(keys))
	}
	fc.TLS = nil
	for i := range certs {
		fc.TLS = append(fc.TLS, config.TLSCert{Cert: certs[i], Key: keys[i]})
	}
	return nil
}

// frontCerts loads fc's certificates: the set to serve HTTPS with (its
// Reload is the SIGHUP hook), or nil for plain HTTP.
func frontCerts(fc config.Front) (*front.Certs, error) {
	if len(fc.TLS) == 0 {
		return nil, nil
	}
	files := make([]front.CertFiles, len(fc.TLS))
	for i, c := range fc.TLS {
		files[i] = front.CertFiles{Cert: c.Cert, Key: c.Key}
	}
	return front.LoadCerts(files)
}
