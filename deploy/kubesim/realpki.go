package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// issueClientCert signs a client certificate with the cluster CA, the way kubeadm gives each
// kubelet its own identity (CN=system:node:<name>, O=system:nodes, which the Node authorizer
// and NodeRestriction admission know) and kube-proxy its own (CN=system:kube-proxy, bound to
// system:node-proxier by the default RBAC).
func issueClientCert(p pkiPaths, cn string, orgs []string) (crtPEM, keyPEM []byte, err error) {
	caPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, nil, err
	}
	caKeyPEM, err := os.ReadFile(p.CAKey)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(caKeyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("pki: the CA certificate or key is not PEM")
	}
	caCert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now().Add(-time.Hour)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    now,
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeClientKubeconfig writes a kubeconfig for one identity. serverName is the name checked
// against the apiserver's certificate when the address dialled is not in it (the nodes reach
// the apiserver through a forwarder at an address of their network namespace).
func writeClientKubeconfig(path string, p pkiPaths, server, serverName, user string, crt, key []byte) error {
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubesim"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca,
		TLSServerName: serverName}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts["kubesim"] = &clientcmdapi.Context{Cluster: "kubesim", AuthInfo: user}
	cfg.CurrentContext = "kubesim"
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return os.Rename(tmp, path)
}
