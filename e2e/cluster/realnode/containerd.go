package realnode

// containerd.go: Debian's containerd (1.6) with its own config, root, state
// and socket under the harness state directory, the CRI plugin running pods
// with runc (crun refuses this host's hybrid cgroups), the harness's CNI
// plugin and a local pause image. It never pulls: the harness has no
// registry and may not talk to the network, so its proxy is a closed
// loopback port and every image must be imported (load-image, pause.go).

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxStateForSockets is the longest state directory whose sockets fit in
// sun_path (108 bytes): containerd's "containerd/containerd.sock.ttrpc" and
// the kubelet's "kubelet/pod-resources/kubelet.sock" below it.
const maxStateForSockets = 65

// runDir is where the node's sockets and the kubelet's root dir live: the
// state directory, or, when that is too long for unix sockets below it,
// /run/coxswain-e2e/<hash of STATE>. Either way STATE/containerd.sock-path
// names containerd's socket.
func runDir(state string) string {
	if len(state) <= maxStateForSockets {
		return state
	}
	h := sha256.Sum256([]byte(state))
	return filepath.Join("/run/coxswain-e2e", fmt.Sprintf("%x", h[:8]))
}

// containerdConfig is containerd's config.toml (version 2).
func containerdConfig(p paths) string {
	return fmt.Sprintf(`# Written by the e2e harness (e2e/cluster/realnode/containerd.go).
version = 2
root = %[1]q
state = %[2]q
# Plugins this node does not use (1.6 tasks-service needs runtime.v1.linux loaded).
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[timeouts]
  # Another containerd holding our database must not hang this one forever.
  "io.containerd.timeout.bolt.open" = "10s"

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # This VM's root may not lower oom_score_adj; without this runc fails
  # with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pods' network namespaces are mounted under our state, not /run/netns.
  netns_mounts_under_state_dir = true
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %[6]q
        Root = %[7]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[8]q
    conf_dir = %[9]q
    max_conf_num = 1
`, p.root, p.runState, p.sock, filepath.Join(p.containerdDir, "opt"), PauseImageRef, runcPath(),
		p.runcRoot, p.cniBin, p.cniConf)
}

// runcPath is runc's path (Debian: /usr/sbin/runc).
func runcPath() string {
	if path, err := exec.LookPath("runc"); err == nil {
		return path
	}
	return "/usr/sbin/runc"
}

// startContainerd writes the CNI set-up and the config, starts containerd
// and waits until its CRI service answers.
func (n *Node) startContainerd(ctx context.Context) error {
	p := n.p
	for _, d := range []string{p.containerdDir, p.runDir, filepath.Dir(p.sock), p.runcRoot, p.podLogs, p.logs} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
	}
	if err := os.WriteFile(p.sockPathFile, []byte(p.sock+"\n"), 0o644); err != nil {
		return err
	}
	if err := writeCNI(p); err != nil {
		return fmt.Errorf("cni: %w", err)
	}
	if err := os.WriteFile(p.config, []byte(containerdConfig(p)), 0o644); err != nil {
		return err
	}
	// Pulls fail at once against a closed loopback port instead of
	// reaching a registry (Go's proxy settings skip loopback addresses).
	env := []string{"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "NO_PROXY=", "no_proxy="}
	var err error
	n.containerd, err = startProc("containerd", "containerd", []string{"--config", p.config},
		filepath.Join(p.logs, "containerd.log"), env, 0)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	end := time.Now().Add(60 * time.Second)
	for {
		if _, statErr := os.Stat(p.sock); statErr == nil {
			if err = criVersion(ctx, p.sock); err == nil {
				return nil
			}
		}
		select {
		case <-n.containerd.exited:
			return fmt.Errorf("containerd exited: %v (see %s)", n.containerd.err, filepath.Join(p.logs, "containerd.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(end) {
			return fmt.Errorf("containerd: CRI not serving on %s after 60s: %v", p.sock, err)
		}
	}
}

// criConn dials containerd's CRI service over its socket.
func criConn(sock string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// criVersion asks the CRI runtime service its version: it answers once
// the CRI plugin has started.
func criVersion(ctx context.Context, sock string) error {
	conn, err := criConn(sock)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	return err
}

// ctr runs `ctr --address SOCK -n k8s.io ARGS…` and returns its output.
func ctr(ctx context.Context, sock string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "-n", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
