package realnode

// proc.go: the node's child processes (containerd, kubelet, kube-scheduler).
// Like the harness's other children they die with it (PDEATHSIG) and run in
// their own process group, which stop signals.

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// proc is one child process; a nil *proc is a process never started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited
	err    error         // its exit status, once exited is closed
}

// startProc starts path with args, its output appended to logPath. env
// entries are added to the harness's environment (a later entry wins);
// cloneflags are extra clone(2) flags (CLONE_NEWNS for the kubelet).
func startProc(name, path string, args []string, logPath string, env []string, cloneflags uintptr) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	// Die with the supervisor even if it is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Cloneflags: cloneflags}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// running says whether the process was started and has not exited.
func (p *proc) running() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, waits up to grace, then
// SIGKILLs the group and waits.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
}
