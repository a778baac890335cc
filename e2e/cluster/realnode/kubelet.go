package realnode

// kubelet.go: the kubelet (`harness kubelet`, the real v1.37.2 command) and
// its KubeletConfiguration, for a loopback-only test node on this host:
// cgroup v1 (failCgroupV1: false), no systemd (cgroupfs), no QoS cgroups or
// allocatable enforcement, no eviction and no image GC (imported images
// cannot be pulled again), its API anonymous and allow-all on 127.0.0.1.
//
// Two host-wide things a kubelet does are kept from the host:
//   - kernel sysctls: by default it rewrites vm.overcommit_memory,
//     kernel.panic, kernel.panic_on_oops, …; with protectKernelDefaults it
//     refuses to start unless they already hold its values. So it runs in a
//     mount namespace of its own where those /proc/sys files are bind
//     mounts of files holding its values (KubeletNamespaceSetup). Its root
//     dir is a shared mount, so the volume mounts it makes there are seen by
//     the host and containerd.
//   - iptables: it creates KUBE-IPTABLES-HINT/KUBE-KUBELET-CANARY chains;
//     its PATH leaves out the sbin directories, so it finds no iptables and
//     says so.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// sysctlsEnv names the directory of sysctl values the kubelet is shown.
const sysctlsEnv = "COXSWAIN_E2E_KUBELET_SYSCTLS"

// kubeletSysctls are the values the kubelet wants (pkg/kubelet/cm:
// setupKernelTunables).
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// kubeletConfiguration is the KubeletConfiguration file's content.
func kubeletConfiguration(p paths, port int) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// This host: cgroup v1, no systemd, no swap accounting wanted.
		"failCgroupV1":                  false,
		"cgroupDriver":                  "cgroupfs",
		"failSwapOn":                    false,
		"cgroupsPerQOS":                 false,
		"enforceNodeAllocatable":        []string{},
		"localStorageCapacityIsolation": false,
		// Never evict, never delete an image (they cannot be pulled again).
		"evictionHard":                map[string]string{},
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		// Read the host's sysctls, never write them (see the file comment).
		"protectKernelDefaults": true,
		// This VM's root may not lower its own oom_score_adj.
		"oomScoreAdj":     0,
		"podLogsDir":      p.podLogs,
		"volumePluginDir": filepath.Join(p.kubeletRoot, "volume-plugins"),
		// Its API: loopback only, anonymous, allow-all (the API server has no
		// kubelet client certificate).
		"address":      "127.0.0.1",
		"port":         port,
		"readOnlyPort": 0,
		"healthzPort":  0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization":            map[string]any{"mode": "AlwaysAllow"},
		"containerRuntimeEndpoint": "unix://" + p.sock,
		"staticPodPath":            "",
		"serializeImagePulls":      false,
		"registerNode":             true,
		"hairpinMode":              "none",
		// No cluster DNS runs; pods get the pod's own loopback as their
		// name server (nothing answers, nothing leaves) and no
		// MissingClusterDNS warning event each.
		"clusterDNS":    []string{"127.0.0.1"},
		"clusterDomain": "cluster.local",
		"resolvConf":    "",
	}, "", "  ")
}

// startKubelet writes the configuration and the sysctl values, makes the
// root dir a shared mount and starts `harness kubelet` in a mount
// namespace of its own.
func (n *Node) startKubelet() error {
	p := n.p
	port, err := freePort()
	if err != nil {
		return err
	}
	conf, err := kubeletConfiguration(p, port)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.kubeletConfig, conf, 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(p.sysctls, 0o755); err != nil {
		return err
	}
	for name, v := range kubeletSysctls {
		if err := os.WriteFile(filepath.Join(p.sysctls, strings.ReplaceAll(name, "/", ".")), []byte(v+"\n"), 0o444); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(p.kubeletRoot, 0o750); err != nil {
		return err
	}
	// A shared mount: in the kubelet's namespace its copy is a peer, so
	// mounts the kubelet makes below it appear on the host too.
	if err := syscall.Mount(p.kubeletRoot, p.kubeletRoot, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", p.kubeletRoot, err)
	}
	if err := syscall.Mount("", p.kubeletRoot, "", syscall.MS_SHARED, ""); err != nil {
		return fmt.Errorf("making %s shared: %w", p.kubeletRoot, err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"kubelet",
		"--config=" + p.kubeletConfig,
		"--kubeconfig=" + n.cfg.Kubeconfig,
		"--root-dir=" + p.kubeletRoot,
		"--cert-dir=" + filepath.Join(p.kubeletRoot, "pki"),
		"--hostname-override=" + NodeName,
		// Refused as a node IP ("nodeIP can't be loopback address"), so
		// the kubelet never sets the Node's addresses: waitReady sets them
		// to 127.0.0.1 once and they stay. Without it the kubelet would put
		// this VM's address there (where it does not listen) at every
		// status update, after a DNS lookup of the node name.
		"--node-ip=127.0.0.1",
		"--v=1",
	}
	env := []string{sysctlsEnv + "=" + p.sysctls, "PATH=/usr/local/bin:/usr/bin:/bin"}
	n.kubelet, err = startProc("kubelet", self, args, filepath.Join(p.logs, "kubelet.log"), env, syscall.CLONE_NEWNS)
	if err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	n.cfg.Logf("kubelet started, port %d (%.1fs)", port, time.Since(n.start).Seconds())
	return nil
}

// KubeletNamespaceSetup runs first in `harness kubelet`: when started by
// the real node (in a new mount namespace, sysctlsEnv set) it makes /proc
// private to this namespace and bind-mounts each value file over its
// /proc/sys file, so the kubelet reads its own values and the host's stay.
func KubeletNamespaceSetup() error {
	dir := os.Getenv(sysctlsEnv)
	if dir == "" {
		return nil
	}
	os.Unsetenv(sysctlsEnv)
	if err := syscall.Mount("", "/proc", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making /proc private: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		target := filepath.Join("/proc/sys", strings.ReplaceAll(e.Name(), ".", "/"))
		if cur, err := os.ReadFile(target); err == nil {
			want, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			if strings.TrimSpace(string(cur)) == strings.TrimSpace(string(want)) {
				continue
			}
		}
		if err := syscall.Mount(filepath.Join(dir, e.Name()), target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("showing the kubelet %s: %w", target, err)
		}
	}
	return nil
}

// startScheduler starts `harness kube-scheduler`: without the stand-in
// node nothing else binds pods.
func (n *Node) startScheduler() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"kube-scheduler",
		"--kubeconfig=" + n.cfg.Kubeconfig,
		"--authentication-kubeconfig=" + n.cfg.Kubeconfig, "--authorization-kubeconfig=" + n.cfg.Kubeconfig,
		"--leader-elect=false", "--secure-port=0", "--bind-address=127.0.0.1", "--v=1",
	}
	n.scheduler, err = startProc("kube-scheduler", self, args, filepath.Join(n.p.logs, "kube-scheduler.log"), nil, 0)
	if err != nil {
		return fmt.Errorf("kube-scheduler: %w", err)
	}
	return nil
}

// loopbackAddresses are the Node's addresses: the API server reaches the
// kubelet (logs, exec) at its InternalIP.
var loopbackAddresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, {Type: v1.NodeHostName, Address: NodeName}}

// waitReady waits for Node e2e-node, sets its addresses and waits until it
// is Ready; it fails at once if the kubelet, containerd or the scheduler
// exits.
func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	cs := n.cfg.Client
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": loopbackAddresses}})
	end := time.Now().Add(timeout)
	patched := false
	for {
		for _, c := range []*proc{n.containerd, n.kubelet, n.scheduler} {
			if !c.running() {
				return fmt.Errorf("%s exited: %v (see %s)", c.name, c.err, filepath.Join(n.p.logs, c.name+".log"))
			}
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		node, err := cs.CoreV1().Nodes().Get(rctx, NodeName, metav1.GetOptions{})
		if err == nil && !addressesAreLoopback(node) {
			// A JSON merge patch replaces the whole list.
			_, err = cs.CoreV1().Nodes().Patch(rctx, NodeName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			if err == nil && !patched {
				patched = true
				n.cfg.Logf("node %s registered, address set to 127.0.0.1 (%.1fs)", NodeName, time.Since(n.start).Seconds())
			}
		} else if err == nil && isReady(node) {
			cancel()
			return nil
		}
		cancel()
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			n.cfg.Logf("waiting for node %s: %v", NodeName, err)
		}
		if time.Now().After(end) {
			return fmt.Errorf("node %s not Ready after %s (see %s)", NodeName, timeout, filepath.Join(n.p.logs, "kubelet.log"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func addressesAreLoopback(node *v1.Node) bool {
	a := node.Status.Addresses
	return len(a) == len(loopbackAddresses) && a[0] == loopbackAddresses[0] && a[1] == loopbackAddresses[1]
}

func isReady(node *v1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
