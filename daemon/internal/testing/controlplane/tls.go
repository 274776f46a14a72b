package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Files of the API server's serving certificate, in the control plane's
// directory.
const (
	servingCertFile = "serving.crt"
	servingKeyFile  = "serving.key"
)

// kubernetesServiceIP is the `kubernetes` Service's cluster IP: the
// first address of ServiceCIDR.
func kubernetesServiceIP() net.IP {
	ip, _, _ := net.ParseCIDR(ServiceCIDR)
	ip = ip.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1)
}

// writeServingCert writes a self-signed certificate and key for the API
// server, valid for every address its clients use: 127.0.0.1 and localhost
// on the host, ClusterHostAddr and ClusterHostName for a cluster's node,
// and GuestForwardAddr,
// where a VM guest reaches it through
// daemon/internal/testing/vmtest's forward. Clients trust this certificate alone, so they
// verify that they reached this API server. It returns the certificate in
// PEM.
func writeServingCert(dir string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("control plane: serving key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("control plane: serving certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ipvsplane test kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		// Its own issuer: clients hold it as their only root.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		// In a cluster, pods reach it as the `kubernetes` Service too.
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", ClusterHostName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(GuestForwardAddr), net.ParseIP(ClusterHostAddr), kubernetesServiceIP()},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("control plane: serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("control plane: serving key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if err := os.WriteFile(filepath.Join(dir, servingCertFile), certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("control plane: serving certificate: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, servingKeyFile), keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("control plane: serving key: %w", err)
	}
	return certPEM, nil
}
