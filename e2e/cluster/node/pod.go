package node

// pod.go: one goroutine per pod on this node. It fills the volumes, runs init
// containers in order and then the containers (restarting per restartPolicy),
// enforces activeDeadlineSeconds, kills everything when the pod is deleted
// (then finishes the delete with grace 0, as a kubelet does), and reports
// phase, conditions and container statuses through pods/status.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	maxTerminationMessage = 4096
	fallbackLogLines      = 80
	fallbackLogBytes      = 2048
)

type abortReason int

const (
	notAborted    abortReason = iota
	abortDeleted              // deletionTimestamp set: kill, report, delete with grace 0
	abortDeadline             // activeDeadlineSeconds passed: kill, phase Failed
	abortGone                 // the pod object is gone: kill quietly
	abortShutdown             // the node stops: kill quietly
)

type podWorker struct {
	n   *Node
	pod *v1.Pod // spec snapshot taken when the worker started
	dir string

	mu        sync.Mutex
	latest    *v1.Pod
	status    v1.PodStatus
	condSince map[v1.PodConditionType]metav1.Time
	procs     map[string]*exec.Cmd
	reason    abortReason
	// volumeDirs maps each volume to the host directory standing in for it
	// (nil until the volumes are ready).
	volumeDirs map[string]string

	deleting, goneCh, stopCh chan struct{}
	delOnce, goneOnce        sync.Once
	stopOnce                 sync.Once
	abortCh                  chan struct{} // closed once reason != notAborted
	abortOnce                sync.Once
	done                     chan struct{}
	pushMu                   sync.Mutex
}

func newPodWorker(n *Node, p *v1.Pod) *podWorker {
	w := &podWorker{n: n, pod: p.DeepCopy(), latest: p,
		dir:       filepath.Join(n.cfg.StateDir, p.Namespace+"_"+p.Name+"_"+string(p.UID)),
		condSince: map[v1.PodConditionType]metav1.Time{}, procs: map[string]*exec.Cmd{},
		deleting: make(chan struct{}), goneCh: make(chan struct{}), stopCh: make(chan struct{}),
		abortCh: make(chan struct{}), done: make(chan struct{})}
	if p.DeletionTimestamp != nil {
		close(w.deleting)
		w.delOnce.Do(func() {})
	}
	return w
}

func (w *podWorker) update(p *v1.Pod) {
	w.mu.Lock()
	w.latest = p
	w.mu.Unlock()
	if p.DeletionTimestamp != nil {
		w.delOnce.Do(func() { close(w.deleting) })
	}
}

func (w *podWorker) gone() { w.goneOnce.Do(func() { close(w.goneCh) }) }

func (w *podWorker) shutdown() {
	w.stopOnce.Do(func() { close(w.stopCh) })
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
	}
}

// logPath is where a container's stdout and stderr are appended.
func (w *podWorker) logPath(container string) string {
	return filepath.Join(w.dir, container+".log")
}

func (w *podWorker) logf(format string, a ...any) {
	w.n.log.Printf("pod %s/%s: "+format, append([]any{w.pod.Namespace, w.pod.Name}, a...)...)
}

func (w *podWorker) aborted() abortReason {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// watchAbort turns deletion, deadline, disappearance or shutdown into a kill.
func (w *podWorker) watchAbort(deadline <-chan time.Time) {
	var r abortReason
	select {
	case <-w.deleting:
		r = abortDeleted
	case <-deadline:
		r = abortDeadline
	case <-w.goneCh:
		r = abortGone
	case <-w.stopCh:
		r = abortShutdown
	case <-w.done:
		return
	}
	w.mu.Lock()
	if w.reason == notAborted {
		w.reason = r
	}
	grace := int64(30)
	if w.pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *w.pod.Spec.TerminationGracePeriodSeconds
	}
	if r == abortDeleted && w.latest.DeletionGracePeriodSeconds != nil {
		grace = *w.latest.DeletionGracePeriodSeconds
	}
	if r == abortGone || r == abortShutdown {
		grace = 0
	}
	w.mu.Unlock()
	w.abortOnce.Do(func() { close(w.abortCh) })
	w.killAll(time.Duration(grace) * time.Second)
}

// killAll sends SIGTERM to every container's process group, then SIGKILL
// after grace to those still running.
func (w *podWorker) killAll(grace time.Duration) {
	sig := syscall.SIGTERM
	if grace <= 0 {
		sig = syscall.SIGKILL
	}
	w.signalAll(sig)
	if grace <= 0 {
		return
	}
	end := time.Now().Add(min(grace, 30*time.Second))
	for time.Now().Before(end) {
		w.mu.Lock()
		n := len(w.procs)
		w.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.signalAll(syscall.SIGKILL)
}

func (w *podWorker) signalAll(sig syscall.Signal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.procs {
		_ = syscall.Kill(-c.Process.Pid, sig)
	}
}

func (w *podWorker) run(ctx context.Context) {
	defer close(w.done)
	// As a kubelet removes a pod's emptyDirs once the pod is gone: step
	// pods copy the coxswain executable into one, and a test binary's
	// hundreds of pods would otherwise fill the disk. Logs stay.
	defer func() { _ = os.RemoveAll(filepath.Join(w.dir, "volumes")) }()
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		w.logf("%v", err)
		return
	}
	if w.pod.Status.Phase == v1.PodSucceeded || w.pod.Status.Phase == v1.PodFailed {
		w.status = *w.pod.Status.DeepCopy()
		w.awaitDelete(ctx)
		return
	}
	now := metav1.Now()
	w.mu.Lock()
	w.status = v1.PodStatus{Phase: v1.PodPending, StartTime: &now,
		HostIP: "127.0.0.1", HostIPs: []v1.HostIP{{IP: "127.0.0.1"}},
		PodIP: "127.0.0.1", PodIPs: []v1.PodIP{{IP: "127.0.0.1"}}}
	for _, c := range w.pod.Spec.InitContainers {
		w.status.InitContainerStatuses = append(w.status.InitContainerStatuses, waitingStatus(&c, "PodInitializing", ""))
	}
	reason := "ContainerCreating"
	if len(w.pod.Spec.InitContainers) > 0 {
		reason = "PodInitializing"
	}
	for _, c := range w.pod.Spec.Containers {
		w.status.ContainerStatuses = append(w.status.ContainerStatuses, waitingStatus(&c, reason, ""))
	}
	w.mu.Unlock()
	w.push(ctx)

	var deadline <-chan time.Time
	if s := w.pod.Spec.ActiveDeadlineSeconds; s != nil {
		t := time.NewTimer(time.Until(now.Add(time.Duration(*s) * time.Second)))
		defer t.Stop()
		deadline = t.C
	}
	go w.watchAbort(deadline)

	ok := w.prepareVolumes(ctx)
	if ok {
		ok = w.runInitContainers(ctx)
	}
	if ok {
		w.runContainers(ctx)
	}
	w.finish(ctx)
}

func waitingStatus(c *v1.Container, reason, msg string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: "", Started: ptr.To(false),
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func (w *podWorker) prepareVolumes(ctx context.Context) bool {
	srcs := map[string]string{}
	for attempt := 0; ; attempt++ {
		var err error
		for i := range w.pod.Spec.Volumes {
			v := &w.pod.Spec.Volumes[i]
			var dir string
			if dir, err = w.volumeSource(ctx, v); err != nil {
				break
			}
			srcs[v.Name] = dir
		}
		if err == nil {
			break
		}
		w.logf("volumes: %v", err)
		w.setAllWaiting("ContainerCreating", err.Error())
		w.push(ctx)
		select {
		case <-w.abortCh:
			return false
		case <-time.After(time.Duration(min(1<<attempt, 5)) * time.Second):
		}
	}
	w.mu.Lock()
	w.volumeDirs = srcs
	w.status.Conditions = nil
	w.mu.Unlock()
	return true
}

func (w *podWorker) setAllWaiting(reason, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.status.ContainerStatuses {
		if s := &w.status.ContainerStatuses[i]; s.State.Waiting != nil {
			s.State.Waiting.Reason, s.State.Waiting.Message = reason, msg
		}
	}
}

func (w *podWorker) restartPolicy() v1.RestartPolicy {
	if w.pod.Spec.RestartPolicy == "" {
		return v1.RestartPolicyAlways
	}
	return w.pod.Spec.RestartPolicy
}

func backoff(restarts int32) time.Duration {
	return time.Duration(min(1<<min(restarts, 4), 10)) * time.Second
}

// runInitContainers runs them in order; false means the pod is over.
func (w *podWorker) runInitContainers(ctx context.Context) bool {
	for i := range w.pod.Spec.InitContainers {
		c := &w.pod.Spec.InitContainers[i]
		for restarts := int32(0); ; restarts++ {
			code, ran := w.runContainer(ctx, c, true, i, restarts)
			if w.aborted() != notAborted {
				return false
			}
			if ran && code == 0 {
				break
			}
			if w.restartPolicy() == v1.RestartPolicyNever {
				w.mu.Lock()
				w.status.Phase = v1.PodFailed
				w.mu.Unlock()
				return false
			}
			select {
			case <-w.abortCh:
				return false
			case <-time.After(backoff(restarts)):
			}
		}
	}
	return true
}

// runContainers runs all containers concurrently until each is done per the
// restart policy, then sets the terminal phase.
func (w *podWorker) runContainers(ctx context.Context) {
	w.mu.Lock()
	w.status.Phase = v1.PodRunning
	w.mu.Unlock()
	codes := make([]int32, len(w.pod.Spec.Containers))
	var wg sync.WaitGroup
	for i := range w.pod.Spec.Containers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := &w.pod.Spec.Containers[i]
			for restarts := int32(0); ; restarts++ {
				code, ran := w.runContainer(ctx, c, false, i, restarts)
				if !ran && code == 0 {
					code = 128
				}
				codes[i] = code
				if w.aborted() != notAborted {
					return
				}
				rp := w.restartPolicy()
				if rp == v1.RestartPolicyNever || (rp == v1.RestartPolicyOnFailure && code == 0) {
					return
				}
				select {
				case <-w.abortCh:
					return
				case <-time.After(backoff(restarts)):
				}
			}
		}(i)
	}
	wg.Wait()
	if w.aborted() != notAborted {
		return
	}
	phase := v1.PodSucceeded
	for _, c := range codes {
		if c != 0 {
			phase = v1.PodFailed
		}
	}
	w.mu.Lock()
	w.status.Phase = phase
	w.mu.Unlock()
}

// finish reports the final status and waits for the pod's deletion.
func (w *podWorker) finish(ctx context.Context) {
	r := w.aborted()
	switch r {
	case abortGone, abortShutdown:
		return
	case abortDeadline:
		w.mu.Lock()
		w.status.Phase = v1.PodFailed
		w.status.Reason = "DeadlineExceeded"
		w.status.Message = "Pod was active on the node longer than the specified deadline"
		w.mu.Unlock()
	case abortDeleted:
		w.mu.Lock()
		if w.status.Phase != v1.PodSucceeded {
			w.status.Phase = v1.PodFailed
		}
		w.mu.Unlock()
	}
	w.markUnstartedTerminated(r)
	w.push(ctx)
	w.awaitDelete(ctx)
}

// markUnstartedTerminated gives containers that never ran a terminal state
// once the pod is over (as a kubelet does).
func (w *podWorker) markUnstartedTerminated(r abortReason) {
	if r == notAborted {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := metav1.Now()
	for _, list := range [][]v1.ContainerStatus{w.status.InitContainerStatuses, w.status.ContainerStatuses} {
		for i := range list {
			if list[i].State.Waiting != nil {
				list[i].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					ExitCode: 137, Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated",
					StartedAt: now, FinishedAt: now}}
			}
		}
	}
}

// awaitDelete waits until the pod is deleted, then completes the deletion
// with grace period 0 (the kubelet's final step).
func (w *podWorker) awaitDelete(ctx context.Context) {
	select {
	case <-w.deleting:
	case <-w.goneCh:
		return
	case <-w.stopCh:
		return
	case <-ctx.Done():
		return
	}
	err := w.n.client.CoreV1().Pods(w.pod.Namespace).Delete(ctx, w.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(w.pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.logf("delete: %v", err)
	}
}

// runContainer runs one container once and returns its exit code and whether
// it started.
func (w *podWorker) runContainer(ctx context.Context, c *v1.Container, init bool, idx int, restarts int32) (int32, bool) {
	cs := func(f func(*v1.ContainerStatus)) {
		w.mu.Lock()
		if init {
			f(&w.status.InitContainerStatuses[idx])
		} else {
			f(&w.status.ContainerStatuses[idx])
		}
		w.mu.Unlock()
	}
	failStart := func(reason string, err error) (int32, bool) {
		w.logf("container %s: %v", c.Name, err)
		cs(func(s *v1.ContainerStatus) {
			s.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
		})
		w.push(ctx)
		return 0, false
	}
	env, vars, err := w.containerEnv(ctx, c)
	if err != nil {
		return failStart("CreateContainerConfigError", err)
	}
	var argv []string
	for _, a := range c.Command {
		argv = append(argv, expand(a, vars))
	}
	for _, a := range c.Args {
		argv = append(argv, expand(a, vars))
	}

	cdir := filepath.Join(w.dir, "containers", c.Name)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return failStart("CreateContainerError", err)
	}
	termFile := filepath.Join(cdir, "termination-log")
	if err := os.WriteFile(termFile, nil, 0o666); err != nil {
		return failStart("CreateContainerError", err)
	}
	_ = os.Chmod(termFile, 0o666)
	spec := &execSpec{Argv: argv, Env: env, WorkingDir: c.WorkingDir}
	var held [][]string
	release := func() {
		for _, h := range held {
			w.n.mounts.release(h)
		}
	}
	hold := func(path string, file bool) error {
		chain, err := w.n.mounts.acquire(path, file)
		if err == nil {
			held = append(held, chain)
		}
		return err
	}
	w.mu.Lock()
	dirs := w.volumeDirs
	w.mu.Unlock()
	for _, m := range c.VolumeMounts {
		src, ok := dirs[m.Name]
		if !ok {
			release()
			return failStart("CreateContainerConfigError", fmt.Errorf("no volume %q", m.Name))
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, vars)
		}
		if sub != "" {
			src = filepath.Join(src, filepath.Clean("/"+sub))
			if _, err := os.Stat(src); os.IsNotExist(err) {
				_ = os.MkdirAll(src, 0o777)
			}
		}
		st, err := os.Stat(src)
		if err != nil {
			release()
			return failStart("CreateContainerConfigError", err)
		}
		if err := hold(m.MountPath, !st.IsDir()); err != nil {
			release()
			return failStart("CreateContainerError", fmt.Errorf("mount point %s: %w", m.MountPath, err))
		}
		spec.Mounts = append(spec.Mounts, bindMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly || w.volumeReadOnly(m.Name)})
	}
	tmp := c.TerminationMessagePath
	if tmp == "" {
		tmp = v1.TerminationMessagePathDefault
	}
	if err := hold(tmp, true); err != nil {
		release()
		return failStart("CreateContainerError", fmt.Errorf("termination message path %s: %w", tmp, err))
	}
	spec.Mounts = append(spec.Mounts, bindMount{Source: termFile, Target: tmp})
	if c.WorkingDir != "" {
		if err := hold(c.WorkingDir, false); err != nil {
			release()
			return failStart("CreateContainerError", fmt.Errorf("workingDir %s: %w", c.WorkingDir, err))
		}
	}
	defer release()

	logPath := w.logPath(c.Name)
	logStart := int64(0)
	if st, err := os.Stat(logPath); err == nil {
		logStart = st.Size()
	}
	w.mu.Lock()
	if w.reason != notAborted {
		w.mu.Unlock()
		return 0, false
	}
	cmd, err := startContainer(filepath.Join(cdir, "spec.json"), logPath, spec)
	if err == nil {
		w.procs[c.Name] = cmd
	}
	w.mu.Unlock()
	if err != nil {
		return failStart("StartError", err)
	}
	started := metav1.Now()
	cs(func(s *v1.ContainerStatus) {
		if s.State.Terminated != nil {
			s.LastTerminationState = s.State
		}
		s.RestartCount = restarts
		s.ContainerID = "stand-in://" + strconv.Itoa(cmd.Process.Pid)
		s.ImageID = "stand-in://host-filesystem"
		s.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}}
		s.Started = ptr.To(true)
		s.Ready = !init
	})
	w.push(ctx)

	_ = cmd.Wait()
	code := exitCode(cmd.ProcessState)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // what the container left behind
	finished := metav1.Now()
	w.mu.Lock()
	delete(w.procs, c.Name)
	w.mu.Unlock()

	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	msg := readTerminationMessage(termFile)
	if msg == "" && code != 0 && c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		msg = tailLog(logPath, logStart)
	}
	cs(func(s *v1.ContainerStatus) {
		s.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason,
			Message: msg, StartedAt: started, FinishedAt: finished, ContainerID: s.ContainerID}}
		s.Ready = false
	})
	w.logf("container %s exited %d", c.Name, code)
	if w.aborted() == notAborted || !init {
		w.push(ctx)
	}
	return code, true
}

func readTerminationMessage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, maxTerminationMessage)
	n, _ := f.Read(b)
	return string(b[:n])
}

// tailLog returns the last lines of what this run of the container wrote.
func tailLog(path string, from int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < from {
		return ""
	}
	b = b[from:]
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) > fallbackLogLines {
		lines = lines[len(lines)-fallbackLogLines:]
	}
	out := bytes.Join(lines, []byte("\n"))
	if len(out) > fallbackLogBytes {
		out = out[len(out)-fallbackLogBytes:]
	}
	return string(out)
}

// conditions derives the pod conditions from the container statuses.
func (w *podWorker) conditions(now metav1.Time) []v1.PodCondition {
	b := func(ok bool) v1.ConditionStatus {
		if ok {
			return v1.ConditionTrue
		}
		return v1.ConditionFalse
	}
	initDone := true
	for _, s := range w.status.InitContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			initDone = false
		}
	}
	ready := w.status.Phase == v1.PodRunning
	for _, s := range w.status.ContainerStatuses {
		if !s.Ready {
			ready = false
		}
	}
	sandbox := w.volumeDirs != nil && w.status.Phase != v1.PodSucceeded && w.status.Phase != v1.PodFailed
	conds := []v1.PodCondition{
		{Type: v1.PodReadyToStartContainers, Status: b(sandbox)},
		{Type: v1.PodInitialized, Status: b(initDone)},
		{Type: v1.ContainersReady, Status: b(ready)},
		{Type: v1.PodReady, Status: b(ready)},
	}
	for i := range conds {
		c := &conds[i]
		if !ready && (c.Type == v1.PodReady || c.Type == v1.ContainersReady) {
			c.Reason = "ContainersNotReady"
			if w.status.Phase == v1.PodSucceeded || w.status.Phase == v1.PodFailed {
				c.Reason = "PodCompleted"
			}
		}
		if !initDone && c.Type == v1.PodInitialized {
			c.Reason = "ContainersNotInitialized"
		}
		key := v1.PodConditionType(string(c.Type) + "=" + string(c.Status))
		since, ok := w.condSince[key]
		if !ok {
			since = now
			delete(w.condSince, v1.PodConditionType(string(c.Type)+"="+string(b(c.Status != v1.ConditionTrue))))
			w.condSince[key] = since
		}
		c.LastTransitionTime = since
		c.ObservedGeneration = w.pod.Generation
	}
	return conds
}

// push writes the worker's status to pods/status, keeping the fields it does
// not own (QoS class, PodScheduled, DisruptionTarget, …).
func (w *podWorker) push(ctx context.Context) {
	w.pushMu.Lock()
	defer w.pushMu.Unlock()
	pods := w.n.client.CoreV1().Pods(w.pod.Namespace)
	// Like a kubelet's status manager, keep trying until the API server
	// takes the status (it may be restarting), backing off to 5 s: a
	// status given up on would leave the pod Running for ever.
	delay := 200 * time.Millisecond
	wait := func() {
		time.Sleep(delay)
		delay = min(2*delay, 5*time.Second)
	}
	for ctx.Err() == nil {
		p, err := pods.Get(ctx, w.pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && p.UID != w.pod.UID) {
			return
		}
		if err != nil {
			w.logf("get for status: %v", err)
			wait()
			continue
		}
		w.mu.Lock()
		st := w.status.DeepCopy()
		mine := w.conditions(metav1.Now())
		w.mu.Unlock()
		if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			return // terminal phases are final
		}
		keep := []v1.PodCondition{}
		for _, c := range p.Status.Conditions {
			ours := false
			for _, m := range mine {
				ours = ours || m.Type == c.Type
			}
			if !ours {
				keep = append(keep, c)
			}
		}
		p.Status.Phase, p.Status.Reason, p.Status.Message = st.Phase, st.Reason, st.Message
		p.Status.HostIP, p.Status.HostIPs, p.Status.PodIP, p.Status.PodIPs = st.HostIP, st.HostIPs, st.PodIP, st.PodIPs
		p.Status.StartTime = st.StartTime
		p.Status.InitContainerStatuses, p.Status.ContainerStatuses = st.InitContainerStatuses, st.ContainerStatuses
		p.Status.Conditions = append(keep, mine...)
		p.Status.ObservedGeneration = p.Generation
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsConflict(err) {
			w.logf("status: %v", err)
			wait()
		}
	}
}
