package node

// exec.go: running one container. The node re-executes this binary as
// `pod-exec SPEC.json` in a new mount namespace (CLONE_NEWNS) and its own
// process group; PodExecMain makes the namespace private, bind-mounts the
// pod's volumes and the termination-message file at their paths (read-only
// where asked), changes to workingDir and execs the container's command, so
// the container's process is the node's direct child.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// execSpec is what pod-exec needs to start a container.
type execSpec struct {
	Mounts     []bindMount `json:"mounts"`
	WorkingDir string      `json:"workingDir"`
	Argv       []string    `json:"argv"`
	Env        []string    `json:"env"`
}

type bindMount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly"`
}

// PodExecMain is the `pod-exec` entry point; it never returns on success.
func PodExecMain(args []string) {
	fail := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "stand-in node: "+format+"\n", a...)
		os.Exit(128)
	}
	if len(args) != 1 {
		fail("usage: pod-exec SPEC.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		fail("%v", err)
	}
	var s execSpec
	if err := json.Unmarshal(b, &s); err != nil {
		fail("%v", err)
	}
	// Our mounts must not propagate back to the host.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fail("make / private: %v", err)
	}
	for _, m := range s.Mounts {
		if err := syscall.Mount(m.Source, m.Target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			fail("mount %s at %s: %v", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := syscall.Mount("", m.Target, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
				fail("remount %s read-only: %v", m.Target, err)
			}
		}
	}
	if s.WorkingDir != "" {
		if err := os.Chdir(s.WorkingDir); err != nil {
			fail("workingDir: %v", err)
		}
	}
	if len(s.Argv) == 0 {
		fail("container has no command: the stand-in node has no images, so command (or args) must name a host program")
	}
	path := s.Argv[0]
	if !strings.Contains(path, "/") {
		for _, e := range s.Env {
			if strings.HasPrefix(e, "PATH=") {
				os.Setenv("PATH", e[5:])
			}
		}
		p, err := exec.LookPath(path)
		if err != nil {
			fail("exec %q: %v", path, err)
		}
		path = p
	}
	if !filepath.IsAbs(path) {
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
	}
	err = syscall.Exec(path, s.Argv, s.Env)
	fail("exec %q: %v", path, err)
}

// startContainer writes the spec and starts pod-exec with stdout/stderr
// appended to logPath. The returned command has been started.
func startContainer(specPath, logPath string, s *execSpec) (*exec.Cmd, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	cmd := exec.Command(self, "pod-exec", specPath)
	cmd.Env = s.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNS,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// exitCode maps a finished process to a container exit code (128+signal when
// killed by a signal, as container runtimes report it).
func exitCode(ps *os.ProcessState) int32 {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ps.ExitCode())
}
