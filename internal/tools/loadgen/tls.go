package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// tlsConfig is the client side of an https run: TLS 1.2 or 1.3, ALPN
// http/1.1 (the generator speaks HTTP/1.1 only), no session cache, so that
// with DisableKeepAlive every connection pays a full handshake — the worst
// case a server sees from new clients, and what wrk measures by default.
func tlsConfig(host string, insecure bool) *tls.Config {
	return &tls.Config{
		ServerName:         host,
		InsecureSkipVerify: insecure,
		MinVersion:         tls.VersionTLS12,
		NextProtos:         []string{"http/1.1"},
	}
}

// handshake runs the TLS handshake on c within the run's timeout; on error
// c is closed. A certificate the client cannot verify names --insecure.
func (r *Runner) handshake(ctx context.Context, c net.Conn) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	tc := tls.Client(c, r.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		var ve *tls.CertificateVerificationError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("%w (a self-signed certificate? use --insecure)", err)
		}
		return nil, err
	}
	return tc, nil
}
