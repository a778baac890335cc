// apiserver.go: kube-apiserver's flags and its readiness probe. It runs as a
// child process (this binary re-executed as `kube-apiserver`).
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// apiserverArgs returns the flags for a single-node test apiserver.
func apiserverArgs(etcdURL string, port int, c *credentials, certDir string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir, "--tls-cert-file=" + c.servingCert, "--tls-private-key-file=" + c.servingKey,
		"--client-ca-file=" + c.caCert,
		"--token-auth-file=" + c.tokens, "--authorization-mode=RBAC", "--anonymous-auth=true",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.saKey, "--service-account-signing-key-file=" + c.saKey,
		"--api-audiences=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none", "--allow-privileged=true",
		"--kubelet-preferred-address-types=InternalIP",
		// E2E_APISERVER_PROFILING=1 serves /debug/pprof, for finding what
		// a benchmark's writes cost the API server.
		"--profiling=" + strconv.FormatBool(os.Getenv("E2E_APISERVER_PROFILING") != ""), "--v=1",
	}
}

// waitReady polls url with the admin token until it answers 200, the child
// exits (done) or the timeout passes.
func waitReady(url string, caPEM []byte, token string, done <-chan error, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		select {
		case err := <-done:
			return fmt.Errorf("kube-apiserver exited: %v", err)
		default:
		}
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if r, err := hc.Do(req); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return nil
			}
		}
	}
	return fmt.Errorf("timeout waiting for %s", url)
}
