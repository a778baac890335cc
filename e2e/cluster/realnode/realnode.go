// Package realnode runs a real Kubernetes node for the e2e harness
// (`harness --node real`): Debian's containerd 1.6 with runc, the real
// kubelet v1.37.2 and kube-scheduler v1.37.2 (this binary re-executed as
// `harness kubelet` / `harness kube-scheduler`), a local pause image and a
// tiny CNI plugin (`harness cni`) that gives each pod an address nobody can
// reach. Everything it makes lives under the harness state directory, and
// Stop (or the next Start with the same directory, after a SIGKILL) removes
// every container, shim and mount it left.
//
// Layout under the state directory:
//
//	containerd/{config.toml,root,state,runc,containerd.sock}
//	containerd.sock-path          the socket's path
//	kubelet/                      the kubelet's --root-dir (a shared bind mount)
//
// (when STATE is longer than 65 bytes, containerd.sock and kubelet/ are in
// /run/coxswain-e2e/<hash of STATE>/ instead: unix socket paths are short)
//
//	kubelet.yaml                  its KubeletConfiguration
//	kubelet-sysctls/              the sysctl values the kubelet is shown (see kubelet.go)
//	cni/{bin,conf,state}          the CNI plugin (a symlink to the harness), its conflist, its address counter
//	pod-logs/                     containers' logs (the kubelet's podLogsDir)
//	pause.tar                     the pause image (see pause.go)
//	logs/{containerd,kubelet,kube-scheduler}.log
package realnode

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
)

// NodeName is the node's name: the same as the stand-in node's, so tests
// naming `e2e-node` work with either.
const NodeName = "e2e-node"

// Config says where the cluster and the state are.
type Config struct {
	StateDir   string // the harness's --dir (absolute)
	Kubeconfig string // the admin kubeconfig
	Client     kubernetes.Interface
	// Logf reports progress (the harness's stderr).
	Logf func(format string, args ...any)
}

// Node is a running real node.
type Node struct {
	cfg        Config
	p          paths
	containerd *proc
	kubelet    *proc
	scheduler  *proc
	start      time.Time
}

// paths are the node's files under the state directory.
type paths struct {
	state, runDir, containerdDir, config, root, runState, runcRoot, sock, sockPathFile   string
	kubeletRoot, kubeletConfig, sysctls, cniBin, cniConf, cniState, podLogs, pause, logs string
}

func newPaths(state string) paths {
	p := func(n ...string) string { return filepath.Join(append([]string{state}, n...)...) }
	run := runDir(state)
	sock := filepath.Join(run, "containerd", "containerd.sock")
	if run != state {
		sock = filepath.Join(run, "containerd.sock")
	}
	return paths{
		state: state, runDir: run, containerdDir: p("containerd"), config: p("containerd", "config.toml"),
		root: p("containerd", "root"), runState: p("containerd", "state"), runcRoot: p("containerd", "runc"),
		sock: sock, sockPathFile: p("containerd.sock-path"),
		kubeletRoot: filepath.Join(run, "kubelet"), kubeletConfig: p("kubelet.yaml"), sysctls: p("kubelet-sysctls"),
		cniBin: p("cni", "bin"), cniConf: p("cni", "conf"), cniState: p("cni", "state"),
		podLogs: p("pod-logs"), pause: p("pause.tar"), logs: p("logs"),
	}
}

// Prepare readies the host and the state directory before the cluster
// starts: it makes sure the Debian packages are there (e2e/packages
// @real-node), then removes whatever a previous harness with the same state
// directory left (containers, shims, mounts: see cleanup.go) and wipes the
// node's part of the state.
func Prepare(state string, logf func(string, ...any)) error {
	if err := ensurePackages(logf); err != nil {
		return err
	}
	p := newPaths(state)
	cleanLeftovers(p, logf)
	for _, d := range []string{p.containerdDir, p.kubeletRoot, p.sysctls, filepath.Join(state, "cni"), p.podLogs} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("wiping %s: %w (is something still mounted there?)", d, err)
		}
	}
	for _, f := range []string{p.kubeletConfig, p.pause, p.sockPathFile} {
		_ = os.Remove(f)
	}
	if p.runDir != state {
		_ = os.RemoveAll(p.runDir)
	}
	return nil
}

// Start starts containerd, imports the pause image, starts the kubelet and
// kube-scheduler, and returns once Node e2e-node is Ready with its address
// set to 127.0.0.1. On failure it stops what it started.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	n := &Node{cfg: cfg, p: newPaths(cfg.StateDir), start: time.Now()}
	if err := n.run(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	n.cfg.Logf("node %s Ready (%.1fs)", NodeName, time.Since(n.start).Seconds())
	return n, nil
}

// run starts the node's parts in order.
func (n *Node) run(ctx context.Context) error {
	if err := n.startContainerd(ctx); err != nil {
		return err
	}
	n.cfg.Logf("containerd ready at %s (%.1fs)", n.p.sock, time.Since(n.start).Seconds())
	if err := n.importPause(ctx); err != nil {
		return err
	}
	if err := n.startKubelet(); err != nil {
		return err
	}
	if err := n.startScheduler(); err != nil {
		return err
	}
	return n.waitReady(ctx, 3*time.Minute)
}

// Done receives the name of the first of containerd, the kubelet and
// kube-scheduler to exit (on its own, or when Stop stops them); the
// harness stops when one exits while it runs.
func (n *Node) Done() <-chan string {
	out := make(chan string, 1)
	for _, c := range []*proc{n.containerd, n.kubelet, n.scheduler} {
		go func(c *proc) {
			<-c.exited
			select {
			case out <- c.name:
			default: // another one was first
			}
		}(c)
	}
	return out
}

// Stop stops kube-scheduler, the kubelet, every pod (through CRI) and
// containerd, then removes leftovers: shims, their containers, mounts.
// Safe to call on a partly started node and more than once.
func (n *Node) Stop() {
	t := time.Now()
	n.scheduler.stop(5 * time.Second)
	// The kubelet goes before the pods: once they are removed it would
	// start them again.
	n.kubelet.stop(10 * time.Second)
	if n.containerd.running() {
		if err := removeAllSandboxes(n.p.sock, 30*time.Second); err != nil {
			n.cfg.Logf("removing pod sandboxes: %v", err)
		}
	}
	n.containerd.stop(10 * time.Second)
	cleanLeftovers(n.p, n.cfg.Logf)
	if n.p.runDir != n.p.state {
		_ = os.RemoveAll(n.p.runDir)
	}
	n.cfg.Logf("real node stopped (%.1fs)", time.Since(t).Seconds())
}
