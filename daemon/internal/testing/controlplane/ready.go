package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"time"
)

// waitReady polls url until it answers 200 OK, p exits, or ctx is done.
// token, if set, is sent as a bearer token; an https url's server must
// present a certificate that caPEM holds.
func waitReady(ctx context.Context, p *process, url, token string, caPEM []byte) error {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		ok, why := probe(ctx, client, url, token)
		if ok {
			return nil
		}
		last = why
		select {
		case <-p.Done():
			return p.exitError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready (%s): %w; end of %s:\n%s", p.name, last, ctx.Err(), p.log, p.tail(30))
		case <-tick.C:
		}
	}
}

// probe makes one request; it reports whether the answer was 200 OK and,
// if not, why.
func probe(ctx context.Context, client *http.Client, url, token string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Sprintf("%s: %s", resp.Status, body)
	}
	return true, ""
}
