package node

// server.go: the node's "kubelet" HTTPS endpoint on 127.0.0.1, enough for the
// apiserver's pods/log proxy: GET /containerLogs/{ns}/{pod}/{container} with
// tailLines, limitBytes and follow. It has a self-signed certificate (the
// apiserver does not verify kubelet certificates unless told to) and no
// authentication, so it listens on loopback only.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func selfSigned() (tls.Certificate, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, nil
}

func (n *Node) startServer() (int, error) {
	cert, err := selfSigned()
	if err != nil {
		return 0, err
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		return 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/containerLogs/", n.containerLogs)
	go func() { _ = http.Serve(l, mux) }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *Node) containerLogs(rw http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
	if len(parts) != 3 {
		http.Error(rw, "want /containerLogs/{namespace}/{pod}/{container}", http.StatusBadRequest)
		return
	}
	w := n.workerFor(parts[0], parts[1])
	if w == nil {
		http.Error(rw, "pod not found on this node", http.StatusNotFound)
		return
	}
	path := w.logPath(parts[2])
	q := r.URL.Query()
	b, err := os.ReadFile(path)
	if err != nil {
		http.Error(rw, "container "+parts[2]+" has no logs yet", http.StatusNotFound)
		return
	}
	if t := q.Get("tailLines"); t != "" {
		if k, err := strconv.Atoi(t); err == nil && k >= 0 {
			lines := bytes.SplitAfter(b, []byte("\n"))
			if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
			if len(lines) > k {
				lines = lines[len(lines)-k:]
			}
			b = bytes.Join(lines, nil)
		}
	}
	limit := -1
	if l := q.Get("limitBytes"); l != "" {
		limit, _ = strconv.Atoi(l)
	}
	if limit >= 0 && len(b) > limit {
		b = b[:limit]
	}
	rw.Header().Set("Content-Type", "text/plain")
	_, _ = rw.Write(b)
	if q.Get("follow") != "true" || (limit >= 0 && len(b) >= limit) {
		return
	}
	// follow: stream what is appended until the container is no longer running.
	fl, _ := rw.(http.Flusher)
	off := int64(len(b))
	if q.Get("tailLines") != "" {
		if st, err := os.Stat(path); err == nil {
			off = st.Size()
		}
	}
	for {
		if fl != nil {
			fl.Flush()
		}
		running := w.running(parts[2])
		if f, err := os.Open(path); err == nil {
			st, _ := f.Stat()
			if st != nil && st.Size() > off {
				buf := make([]byte, st.Size()-off)
				k, _ := f.ReadAt(buf, off)
				off += int64(k)
				_, _ = rw.Write(buf[:k])
			}
			f.Close()
		}
		if !running {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// running tells whether a container of the worker's pod is running now.
func (w *podWorker) running(container string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.procs[container]
	return ok
}
