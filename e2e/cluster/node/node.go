// Package node is the stand-in node: it registers a Node, renews its Lease,
// binds pending pods to itself and runs their containers as local processes
// (see pod.go), reporting status as a kubelet does. The host filesystem stands
// in for every container image.
package node

import (
	"context"
	"fmt"
	"log"
	"os"
	"runtime"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// Name is the stand-in node's name.
const Name = "e2e-node"

// Config tells the node where the cluster and its state are.
type Config struct {
	Kubeconfig    string
	StateDir      string // per-pod volumes, logs and termination-message files
	APIServerPort int    // injected as KUBERNETES_SERVICE_PORT into containers
	LogFile       string
}

// Node is the running stand-in node.
type Node struct {
	cfg     Config
	client  kubernetes.Interface
	log     *log.Logger
	mounts  *mountPoints
	port    int // kubelet HTTPS port (containerLogs)
	started time.Time

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	// The pods seen deleted: a UID is never reused, so an event that
	// arrives for one after its delete (a relist's stale copy) must not
	// start a second worker, whose pod directory the first one's clean-up
	// would remove under it.
	gone map[types.UID]struct{}

	// The binder's caches (set in Run) and its lock: a pod is bound or
	// marked unschedulable by one caller at a time.
	bindMu      sync.Mutex
	unscheduled corelisters.PodLister
	claims      claimListers
}

var labelsEverything = labels.Everything()

// New connects to the cluster; nothing is registered until Register.
func New(cfg Config) (*Node, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	rc.UserAgent = "coxswain-e2e-node"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, client: cs, log: log.New(lf, "", log.LstdFlags|log.Lmicroseconds),
		mounts: newMountPoints(), workers: map[types.UID]*podWorker{}, gone: map[types.UID]struct{}{}, started: time.Now()}, nil
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 8 << 30
}

func (n *Node) resources() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory:           *resource.NewQuantity(memTotal(), resource.BinarySI),
		v1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
		v1.ResourceEphemeralStorage: *resource.NewQuantity(100<<30, resource.BinarySI),
	}
}

func (n *Node) nodeStatus() v1.NodeStatus {
	now := metav1.Now()
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) v1.NodeCondition {
		return v1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg,
			LastHeartbeatTime: now, LastTransitionTime: metav1.NewTime(n.started)}
	}
	host, _ := os.Hostname()
	return v1.NodeStatus{
		Capacity: n.resources(), Allocatable: n.resources(), Phase: v1.NodeRunning,
		Conditions: []v1.NodeCondition{
			cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "stand-in node is posting ready status"),
			cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "stand-in node"),
			cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "stand-in node"),
			cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "stand-in node"),
		},
		Addresses:       []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, {Type: v1.NodeHostName, Address: host}},
		DaemonEndpoints: v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: int32(n.port)}},
		NodeInfo: v1.NodeSystemInfo{OperatingSystem: "linux", Architecture: runtime.GOARCH,
			KubeletVersion: "v1.37.2", KubeProxyVersion: "", ContainerRuntimeVersion: "coxswain-stand-in://host-processes",
			OSImage: "host filesystem (no images)", KernelVersion: kernelVersion()},
	}
}

func kernelVersion() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	if len(b) > 0 && b[len(b)-1] == '\n' {
		b = b[:len(b)-1]
	}
	return string(b)
}

// Register starts the kubelet HTTPS endpoint, creates the Node (Ready) and its Lease.
func (n *Node) Register(ctx context.Context) error {
	port, err := n.startServer()
	if err != nil {
		return fmt.Errorf("kubelet server: %w", err)
	}
	n.port = port
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: Name, Labels: map[string]string{
		"kubernetes.io/hostname": Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH,
		"node.coxswain.dev/stand-in": "true"}}}
	created, err := n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = n.client.CoreV1().Nodes().Get(ctx, Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	created.Status = n.nodeStatus()
	if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return n.renewLease(ctx, created)
}

func (n *Node) renewLease(ctx context.Context, node *v1.Node) error {
	leases := n.client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	l, err := leases.Get(ctx, Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: v1.NamespaceNodeLease},
			Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(Name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}
		if node != nil {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	l.Spec.RenewTime = &now
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (n *Node) heartbeat(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.renewLease(ctx, nil); err != nil {
			n.log.Printf("lease renew: %v", err)
		}
		if i%3 == 2 {
			if node, err := n.client.CoreV1().Nodes().Get(ctx, Name, metav1.GetOptions{}); err == nil {
				node.Status = n.nodeStatus()
				if _, err := n.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
					n.log.Printf("node status: %v", err)
				}
			}
		}
	}
}

// Run binds pending pods, runs this node's pods and heartbeats until ctx
// ends; then it kills every container it started.
func (n *Node) Run(ctx context.Context) error {
	go n.heartbeat(ctx)

	// The binder: every unscheduled pod goes to this node once its claims
	// are bound (claims.go); the resync re-checks those still waiting.
	unscheduled := informers.NewSharedInformerFactoryWithOptions(n.client, 10*time.Second,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", "").String()
		}))
	podInformer := unscheduled.Core().V1().Pods()
	n.unscheduled = podInformer.Lister()
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.bind(ctx, obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj any) { n.bind(ctx, obj.(*v1.Pod)) },
	})
	storage := informers.NewSharedInformerFactory(n.client, 0)
	claimInformer := storage.Core().V1().PersistentVolumeClaims()
	n.claims = claimListers{claims: claimInformer.Lister(), classes: storage.Storage().V1().StorageClasses().Lister()}
	_, _ = claimInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.claimChanged(ctx, obj.(*v1.PersistentVolumeClaim)) },
		UpdateFunc: func(_, obj any) { n.claimChanged(ctx, obj.(*v1.PersistentVolumeClaim)) },
	})
	_ = storage.Storage().V1().StorageClasses().Informer()
	storage.Start(ctx.Done())
	storage.WaitForCacheSync(ctx.Done())
	// This node's pods.
	mine := informers.NewSharedInformerFactoryWithOptions(n.client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", Name).String()
		}))
	_, _ = mine.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj.(*v1.Pod)) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj.(*v1.Pod)) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if p, ok := obj.(*v1.Pod); ok {
				n.podGone(p)
			}
		},
	})
	unscheduled.Start(ctx.Done())
	mine.Start(ctx.Done())
	<-ctx.Done()
	unscheduled.Shutdown()
	storage.Shutdown()
	mine.Shutdown()

	n.mu.Lock()
	ws := make([]*podWorker, 0, len(n.workers))
	for _, w := range n.workers {
		ws = append(ws, w)
	}
	n.mu.Unlock()
	for _, w := range ws {
		w.shutdown()
	}
	n.mounts.releaseAll()
	return nil
}

func (n *Node) bind(ctx context.Context, p *v1.Pod) {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || len(p.Spec.SchedulingGates) > 0 ||
		(p.Spec.SchedulerName != "" && p.Spec.SchedulerName != v1.DefaultSchedulerName) {
		return
	}
	n.bindMu.Lock()
	defer n.bindMu.Unlock()
	if reason, wait := n.claimsBlock(ctx, p); reason != "" {
		if !wait {
			n.markUnschedulable(ctx, p, reason)
		}
		return
	}
	b := &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
		Target: v1.ObjectReference{Kind: "Node", Name: Name}}
	err := n.client.CoreV1().Pods(p.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		n.log.Printf("bind %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func (n *Node) podChanged(ctx context.Context, p *v1.Pod) {
	n.mu.Lock()
	if _, deleted := n.gone[p.UID]; deleted {
		n.mu.Unlock()
		return
	}
	w, ok := n.workers[p.UID]
	if !ok {
		w = newPodWorker(n, p)
		n.workers[p.UID] = w
		n.mu.Unlock()
		go w.run(ctx)
		return
	}
	n.mu.Unlock()
	w.update(p)
}

func (n *Node) podGone(p *v1.Pod) {
	n.mu.Lock()
	w := n.workers[p.UID]
	delete(n.workers, p.UID)
	n.gone[p.UID] = struct{}{}
	n.mu.Unlock()
	if w != nil {
		w.gone()
	}
}

// workerFor finds the worker of a pod by namespace and name (for containerLogs).
func (n *Node) workerFor(ns, name string) *podWorker {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, w := range n.workers {
		if w.pod.Namespace == ns && w.pod.Name == name {
			return w
		}
	}
	return nil
}
