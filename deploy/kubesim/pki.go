package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pkiPaths are the files generated under DATA_DIR/pki.
type pkiPaths struct {
	Dir, CACert, CAKey, AdminCert, AdminKey, SAKey string
}

func newPKIPaths(dataDir string) pkiPaths {
	d := filepath.Join(dataDir, "pki")
	return pkiPaths{
		Dir:       d,
		CACert:    filepath.Join(d, "ca.crt"),
		CAKey:     filepath.Join(d, "ca.key"),
		AdminCert: filepath.Join(d, "admin.crt"),
		AdminKey:  filepath.Join(d, "admin.key"),
		SAKey:     filepath.Join(d, "sa.key"),
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ensurePKI creates a CA, one admin certificate (CN=kubesim-admin, O=system:masters) that is
// used both as the apiserver's serving certificate and as the client certificate, and the
// service-account signing key. Existing files are kept so a data dir can be reused.
func ensurePKI(p pkiPaths) error {
	if fileExists(p.CACert) && fileExists(p.CAKey) && fileExists(p.AdminCert) &&
		fileExists(p.AdminKey) && fileExists(p.SAKey) {
		return nil
	}
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubesim-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	adminKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	adminTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kubesim-admin", Organization: []string{"system:masters"}},
		NotBefore:    now,
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.96.0.1")},
	}
	adminDER, err := x509.CreateCertificate(rand.Reader, adminTmpl, caCert, &adminKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	adminKeyDER, err := x509.MarshalECPrivateKey(adminKey)
	if err != nil {
		return err
	}
	writes := []struct {
		path, typ string
		der       []byte
	}{
		{p.CACert, "CERTIFICATE", caDER},
		{p.CAKey, "EC PRIVATE KEY", caKeyDER},
		{p.AdminCert, "CERTIFICATE", adminDER},
		{p.AdminKey, "EC PRIVATE KEY", adminKeyDER},
		{p.SAKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(saKey)},
	}
	for _, w := range writes {
		data := pem.EncodeToMemory(&pem.Block{Type: w.typ, Bytes: w.der})
		if err := os.WriteFile(w.path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// writeKubeconfig writes an admin kubeconfig with embedded certificates.
func writeKubeconfig(path string, p pkiPaths, server string) error {
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(p.AdminCert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.AdminKey)
	if err != nil {
		return err
	}
	if len(ca) == 0 || len(crt) == 0 || len(key) == 0 {
		return errors.New("empty pki file")
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubesim"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["kubesim-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["kubesim"] = &clientcmdapi.Context{Cluster: "kubesim", AuthInfo: "kubesim-admin", Namespace: "default"}
	cfg.CurrentContext = "kubesim"
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return os.Rename(tmp, path)
}
