package realnode

// cleanup.go: leaving nothing behind. Stop removes the pods through CRI;
// then, and at every Start before the state is wiped (a SIGKILLed harness
// takes its children along through PDEATHSIG, but containerd's shims are
// re-parented and outlive it), cleanLeftovers kills the shims that name our
// socket with every process below them, unmounts everything under the state
// directory and removes the containers' cgroups, the shims' sockets and the
// kubelet's log symlinks.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeAllSandboxes stops and removes every pod sandbox (and so its
// containers and network namespace) through containerd's CRI service.
func removeAllSandboxes(sock string, timeout time.Duration) error {
	conn, err := criConn(sock)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(list.Items))
	for _, sb := range list.Items {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
				errs <- fmt.Errorf("stopping sandbox %s: %w", id, err)
				return
			}
			if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
				errs <- fmt.Errorf("removing sandbox %s: %w", id, err)
			}
		}(sb.Id)
	}
	wg.Wait()
	close(errs)
	return <-errs // the first error, or nil
}

// cleanLeftovers removes what this node's processes may have left.
func cleanLeftovers(p paths, logf func(string, ...any)) {
	if n := killLeftovers(p); n > 0 {
		logf("killed %d leftover process(es) of a previous real node in %s", n, p.state)
	}
	for _, dir := range []string{p.state, p.runDir} {
		if n, err := unmountUnder(dir); err != nil {
			logf("unmounting under %s: %v", dir, err)
		} else if n > 0 {
			logf("unmounted %d leftover mount(s) under %s", n, dir)
		}
	}
	removeCgroups(p.runcRoot)
	removeShimSockets(p)
	removeLogLinks(p.podLogs)
}

// removeLogLinks removes the kubelet's symlinks in /var/log/containers
// (always there, whatever podLogsDir says) that point into podLogs.
func removeLogLinks(podLogs string) {
	const dir = "/var/log/containers"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		link := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, podLogs+"/") {
			_ = os.Remove(link)
		}
	}
}

// procCmdline reads a process's argv.
func procCmdline(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// procStat reads a process's state letter and parent.
func procStat(pid int) (state byte, ppid int, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+4 > len(data) {
		return 0, 0, false
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	return f[0][0], ppid, true
}

// allPids lists the processes.
func allPids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// isOurs says whether a command line belongs to this node: a shim naming
// our socket, our containerd, our kubelet or our kube-scheduler.
func isOurs(p paths, argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	base := filepath.Base(argv[0])
	has := func(s string) bool {
		for _, a := range argv[1:] {
			if a == s {
				return true
			}
		}
		return false
	}
	switch {
	case strings.HasPrefix(base, "containerd-shim"):
		return has(p.sock)
	case base == "containerd":
		return has(p.config)
	case len(argv) > 1 && argv[1] == "kubelet":
		return has("--root-dir=" + p.kubeletRoot)
	case len(argv) > 1 && argv[1] == "kube-scheduler":
		return has("--kubeconfig=" + filepath.Join(p.state, "kubeconfig"))
	}
	return false
}

// killLeftovers SIGKILLs this node's processes and every process below
// them (the shims' containers), then waits up to 10 s for them to go.
// It returns how many it killed.
func killLeftovers(p paths) int {
	self := os.Getpid()
	children := map[int][]int{}
	var roots []int
	for _, pid := range allPids() {
		if _, ppid, ok := procStat(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
		if pid != self && isOurs(p, procCmdline(pid)) {
			roots = append(roots, pid)
		}
	}
	seen := map[int]bool{}
	var victims []int
	var walk func(int)
	walk = func(pid int) {
		if seen[pid] || pid == self || pid <= 1 {
			return
		}
		seen[pid] = true
		victims = append(victims, pid)
		for _, c := range children[pid] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		alive := 0
		for _, pid := range victims {
			if st, _, ok := procStat(pid); ok && st != 'Z' {
				alive++
			}
		}
		if alive == 0 {
			break
		}
	}
	return len(victims)
}

// unmountUnder detaches every mount at or below dir, deepest first, and
// returns how many it detached.
func unmountUnder(dir string) (int, error) {
	count := 0
	for round := 0; round < 5; round++ {
		points, err := mountsUnder(dir)
		if err != nil {
			return count, err
		}
		if len(points) == 0 {
			return count, nil
		}
		sort.Slice(points, func(i, j int) bool {
			return strings.Count(points[i], "/") > strings.Count(points[j], "/")
		})
		var last error
		for _, m := range points {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
				last = fmt.Errorf("%s: %w", m, err)
			} else if err == nil {
				count++
			}
		}
		if last != nil && round == 4 {
			return count, last
		}
	}
	return count, nil
}

// mountsUnder lists the mount points at or below dir, from
// /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		m := unescapeMount(f[4])
		if m == dir || strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	return out, nil
}

// unescapeMount decodes mountinfo's octal escapes (\040 for a space, …).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the cgroups runc made for containers it still
// records under its root (containers killed rather than deleted); a
// cgroup still holding a process stays.
func removeCgroups(runcRoot string) {
	states, _ := filepath.Glob(filepath.Join(runcRoot, "*", "*", "state.json"))
	for _, f := range states {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var st struct {
			CgroupPaths map[string]string `json:"cgroup_paths"`
		}
		if json.Unmarshal(data, &st) != nil {
			continue
		}
		for _, path := range st.CgroupPaths {
			if strings.HasPrefix(path, "/sys/fs/cgroup/") {
				_ = syscall.Rmdir(path)
			}
		}
	}
}

// removeShimSockets removes the sockets of shims that were killed: a
// shim's socket is /run/containerd/s/<sha256 of "<containerd
// socket>/<namespace>/<id>"> (containerd 1.6, runtime/v2/shim).
func removeShimSockets(p paths) {
	tasks, _ := os.ReadDir(filepath.Join(p.runState, "io.containerd.runtime.v2.task", "k8s.io"))
	for _, t := range tasks {
		sum := sha256.Sum256([]byte(filepath.Join(p.sock, "k8s.io", t.Name())))
		sock := filepath.Join("/run/containerd/s", fmt.Sprintf("%x", sum))
		if fi, err := os.Lstat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(sock)
		}
	}
}
