// certs.go: the cluster's credentials — a CA, an apiserver serving
// certificate with IP SAN 127.0.0.1 signed by it, the service-account signing
// key, the static admin token and the admin kubeconfig.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	api "k8s.io/client-go/tools/clientcmd/api"
)

// credentials holds the paths of every credential file the components use.
type credentials struct {
	caCert, servingCert, servingKey, saKey, tokens string
	caPEM                                          []byte
	token                                          string
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(k)
	return k, der, err
}

// makeCredentials writes all credential files into dir (via p).
func makeCredentials(p func(string) string) (*credentials, error) {
	c := &credentials{caCert: p("ca.crt"), servingCert: p("serving.crt"), servingKey: p("serving.key"),
		saKey: p("sa.key"), tokens: p("tokens.csv")}
	now := time.Now()
	caKey, _, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coxswain-e2e-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.caCert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	c.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	srvKey, srvKeyDER, err := newKey()
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.servingCert, "CERTIFICATE", srvDER); err != nil {
		return nil, err
	}
	if err := writePEM(c.servingKey, "EC PRIVATE KEY", srvKeyDER); err != nil {
		return nil, err
	}

	_, saDER, err := newKey()
	if err != nil {
		return nil, err
	}
	if err := writePEM(c.saKey, "EC PRIVATE KEY", saDER); err != nil {
		return nil, err
	}

	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	c.token = hex.EncodeToString(tok)
	line := fmt.Sprintf("%s,admin,admin-uid,system:masters\n", c.token)
	return c, os.WriteFile(c.tokens, []byte(line), 0o600)
}

// writeKubeconfig writes an admin kubeconfig (CA data + bearer token) atomically.
func writeKubeconfig(path, server string, c *credentials) error {
	kc := api.NewConfig()
	kc.Clusters["e2e"] = &api.Cluster{Server: server, CertificateAuthorityData: c.caPEM}
	kc.AuthInfos["admin"] = &api.AuthInfo{Token: c.token}
	kc.Contexts["e2e"] = &api.Context{Cluster: "e2e", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, path+".tmp"); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
