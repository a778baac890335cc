// main.go: the harness entry point. One multi-call binary:
//
//	harness [flags]                     supervisor: etcd (embedded), kube-apiserver and
//	                                    kube-controller-manager (children), the stand-in node
//	                                    (or, with --node real, containerd + kubelet + kube-scheduler)
//	harness kube-apiserver ARGS…        the real kube-apiserver command
//	harness kube-controller-manager …   the real kube-controller-manager command
//	harness kubelet ARGS…               the real kubelet command (the real node)
//	harness kube-scheduler ARGS…        the real kube-scheduler command (the real node)
//	harness cni                         the real node's CNI plugin (also run as coxswain-e2e-net)
//	harness load-image FILE --state DIR imports an image archive into the real node's containerd
//	harness pod-exec SPEC.json          runs one container inside its mount namespace
//
// The supervisor prints `KUBECONFIG=/path` on stdout once the cluster serves,
// and on SIGTERM/SIGINT (or stdin EOF with --exit-on-stdin-eof) stops
// everything it started. On SIGUSR1 it restarts kube-apiserver (same etcd,
// port and certificates) and prints `APISERVER_RESTARTED=N` once the new one
// is ready, so tests can prove clients survive an API server restart.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/coxswain/coxswain/e2e/cluster/node"
	"github.com/coxswain/coxswain/e2e/cluster/realnode"
)

// components are the Kubernetes commands this binary also is, by the name
// the supervisor runs them with (`harness kube-apiserver ARGS…`): each is
// started the same way, with the arguments after its name.
var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": kcm.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kubelet": func() *cobra.Command {
		if err := realnode.KubeletNamespaceSetup(); err != nil {
			fmt.Fprintln(os.Stderr, "harness kubelet:", err)
			os.Exit(1)
		}
		return kubelet.NewKubeletCommand(context.Background())
	},
}

func main() {
	// CNI runs plugins by name: STATE/cni/bin/{coxswain-e2e-net,loopback} are this binary.
	if realnode.IsCNIPlugin(os.Args[0]) {
		realnode.CNIMain()
		return
	}
	if len(os.Args) > 1 {
		if command, ok := components[os.Args[1]]; ok {
			c := command()
			c.SetArgs(os.Args[2:])
			os.Exit(cli.Run(c))
		}
		switch os.Args[1] {
		case "cni":
			realnode.CNIMain()
			return
		case "load-image":
			realnode.LoadImageMain(os.Args[2:])
			return
		case "pod-exec":
			node.PodExecMain(os.Args[2:])
			return
		}
	}
	if err := supervise(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// child is a component process started by the supervisor.
type child struct {
	name string
	cmd  *exec.Cmd
	done chan error
}

func startChild(name, logPath string, args []string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the supervisor even if it is SIGKILLed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	c := &child{name: name, cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait(); logf.Close() }()
	return c, nil
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs the child's group.
func (c *child) stop(grace time.Duration) {
	if c == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM)
	var err error
	select {
	case err = <-c.done:
	case <-time.After(grace):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		err = <-c.done
	}
	c.done <- err // stopping twice returns at once
}

func supervise() error {
	fs := flag.NewFlagSet("harness", flag.ExitOnError)
	dir := fs.String("dir", "", "state directory (default: a new temporary directory)")
	port := fs.Int("port", 0, "kube-apiserver port on 127.0.0.1 (default: a free port)")
	stdinEOF := fs.Bool("exit-on-stdin-eof", false, "stop the cluster when stdin reaches EOF")
	noKCM := fs.Bool("no-controller-manager", false, "do not run kube-controller-manager")
	noNode := fs.Bool("no-node", false, "do not run any node")
	nodeKind := fs.String("node", "standin", "the node: standin (pods as host processes) or real (containerd + kubelet + kube-scheduler)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if *nodeKind != "standin" && *nodeKind != "real" {
		return fmt.Errorf("--node must be standin or real, not %q", *nodeKind)
	}
	realNode := *nodeKind == "real" && !*noNode
	if *dir == "" {
		d, err := os.MkdirTemp("", "coxswain-e2e-")
		if err != nil {
			return err
		}
		*dir = d
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	*dir = abs
	p := func(n string) string { return filepath.Join(*dir, n) }
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "harness: "+format+"\n", args...) }
	if realNode {
		// Before anything starts: packages, and a previous real node's leftovers.
		if err := realnode.Prepare(*dir, logf); err != nil {
			return err
		}
	}
	// A fresh cluster every start: old etcd data would hold stale tokens.
	for _, n := range []string{"etcd", "kubeconfig", "pods"} {
		_ = os.RemoveAll(p(n))
	}
	if err := os.MkdirAll(p("logs"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p("harness.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(p("harness.pid"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		s := <-sigs
		fmt.Fprintln(os.Stderr, "harness: got", s, "- stopping")
		cancel()
	}()
	if *stdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "harness: stdin closed - stopping")
			cancel()
		}()
	}

	start := time.Now()
	creds, err := makeCredentials(p)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	etcd, etcdURL, err := startEtcd(p("etcd"), p("logs/etcd.log"))
	if err != nil {
		return err
	}
	defer etcd.Close()
	fmt.Fprintf(os.Stderr, "harness: etcd at %s (%.1fs)\n", etcdURL, time.Since(start).Seconds())

	var api *child
	apiPort := *port
	for attempt := 0; ; attempt++ {
		if *port == 0 {
			apiPort = freePort()
		}
		api, err = startChild("kube-apiserver", p("logs/kube-apiserver.log"), apiserverArgs(etcdURL, apiPort, creds, p("certs")))
		if err != nil {
			return err
		}
		err = waitReady(fmt.Sprintf("https://127.0.0.1:%d/readyz", apiPort), creds.caPEM, creds.token, api.done, 3*time.Minute)
		if err == nil || attempt >= 2 || *port != 0 || ctx.Err() != nil {
			break
		}
		api.stop(5 * time.Second) // a lost port race: try another port
	}
	// A closure: api changes when kube-apiserver is restarted.
	defer func() { api.stop(15 * time.Second) }()
	if err != nil {
		return fmt.Errorf("%w (see %s)", err, p("logs/kube-apiserver.log"))
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	kubeconfig := p("kubeconfig")
	if err := writeKubeconfig(kubeconfig, server, creds); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "harness: kube-apiserver at %s (%.1fs)\n", server, time.Since(start).Seconds())
	if err := createDefaultStorageClass(ctx, kubeconfig); err != nil {
		return err
	}

	if !*noKCM {
		kc, err := startChild("kube-controller-manager", p("logs/kube-controller-manager.log"), kcmArgs(kubeconfig, creds))
		if err != nil {
			return err
		}
		defer kc.stop(10 * time.Second)
		go func() {
			err := <-kc.done
			kc.done <- err // for kc.stop
			if ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "harness: kube-controller-manager exited:", err)
				cancel()
			}
		}()
	}
	// Runs after the node has stopped its pods, before KCM and the apiserver stop.
	defer removeProvisionedDirs(kubeconfig)
	nodeDone := make(chan error, 1)
	nodeCtx, stopNode := context.WithCancel(context.Background())
	defer func() { stopNode(); <-nodeDone }()
	var realExited <-chan string // a real node's process that exited
	if *noNode {
		nodeDone <- nil
	} else if realNode {
		nodeDone <- nil
		cs, err := adminClient(kubeconfig)
		if err != nil {
			return err
		}
		// The harness plays a storage driver that makes writable folders:
		// pods here run as their own users, and hostPath ignores fsGroup.
		go makeProvisionedDirsWritable(nodeCtx, cs, logf)
		rn, err := realnode.Start(ctx, realnode.Config{StateDir: *dir, Kubeconfig: kubeconfig, Client: cs, Logf: logf})
		if err != nil {
			return fmt.Errorf("real node: %w", err)
		}
		defer rn.Stop()
		realExited = rn.Done()
	} else {
		n, err := node.New(node.Config{Kubeconfig: kubeconfig, StateDir: p("pods"), APIServerPort: apiPort,
			LogFile: p("logs/node.log")})
		if err != nil {
			nodeDone <- nil
			return err
		}
		if err := n.Register(ctx); err != nil {
			nodeDone <- nil
			return fmt.Errorf("node: %w", err)
		}
		go func() { nodeDone <- n.Run(nodeCtx) }()
	}
	fmt.Fprintf(os.Stderr, "harness: ready (%.1fs); state in %s\n", time.Since(start).Seconds(), *dir)
	fmt.Println("KUBECONFIG=" + kubeconfig)

	restart := make(chan os.Signal, 1)
	signal.Notify(restart, syscall.SIGUSR1)
	for restarts := 1; ; restarts++ {
		select {
		case <-ctx.Done():
			return nil
		case name := <-realExited:
			return fmt.Errorf("real node: %s exited (see %s)", name, p("logs/"+name+".log"))
		case err := <-api.done:
			api.done <- err
			return fmt.Errorf("kube-apiserver exited: %v (see %s)", err, p("logs/kube-apiserver.log"))
		case <-restart:
			if api, err = restartAPIServer(api, p("logs/kube-apiserver.log"), apiserverArgs(etcdURL, apiPort, creds, p("certs")), apiPort, creds); err != nil {
				return err
			}
			fmt.Printf("APISERVER_RESTARTED=%d\n", restarts)
		}
	}
}

// restartAPIServer stops kube-apiserver as an upgrade or a crash-looping
// node would (SIGTERM, then SIGKILL after the grace period) and starts it
// again on the same port with the same flags, so the same etcd, serving
// certificate and tokens: clients see connections drop and refused for a
// few seconds, then the same server back.
func restartAPIServer(old *child, logPath string, args []string, port int, creds *credentials) (*child, error) {
	start := time.Now()
	fmt.Fprintln(os.Stderr, "harness: restarting kube-apiserver")
	old.stop(15 * time.Second)
	api, err := startChild("kube-apiserver", logPath, args)
	if err != nil {
		return old, err
	}
	if err := waitReady(fmt.Sprintf("https://127.0.0.1:%d/readyz", port), creds.caPEM, creds.token, api.done, 3*time.Minute); err != nil {
		return api, fmt.Errorf("restarting kube-apiserver: %w (see %s)", err, logPath)
	}
	fmt.Fprintf(os.Stderr, "harness: kube-apiserver restarted (%.1fs)\n", time.Since(start).Seconds())
	return api, nil
}
