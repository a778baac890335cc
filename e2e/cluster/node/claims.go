package node

// claims.go: persistentVolumeClaim volumes. Like the scheduler's
// VolumeBinding plugin, the binder leaves a pod Pending until every claim it
// uses is bound (spec.volumeName set and pv.kubernetes.io/bind-completed),
// marking it PodScheduled=False, reason Unschedulable, with the scheduler's
// message and a FailedScheduling event; it tries again when a claim changes
// and at every resync. A WaitForFirstConsumer claim gets the
// volume.kubernetes.io/selected-node annotation, as the scheduler gives it,
// so the PV controller provisions it. Once the pod is here, the claim's PV's
// hostPath (or local) directory is bind-mounted into its containers.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
)

const (
	annBindCompleted = "pv.kubernetes.io/bind-completed"
	annSelectedNode  = "volume.kubernetes.io/selected-node"
)

// claimListers are the caches the binder reads claims and classes from.
type claimListers struct {
	claims  corelisters.PersistentVolumeClaimLister
	classes storagelisters.StorageClassLister
}

// podClaims lists the names of the claims a pod's volumes use.
func podClaims(p *v1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return out
}

// claimsBlock says why the pod's claims keep it from this node ("" when
// they are all bound) and, when the binder should only wait (a delayed
// claim being provisioned for this node), wait is true.
func (n *Node) claimsBlock(ctx context.Context, p *v1.Pod) (reason string, wait bool) {
	var delayed []*v1.PersistentVolumeClaim
	for _, name := range podClaims(p) {
		pvc, err := n.claims.claims.PersistentVolumeClaims(p.Namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("persistentvolumeclaim %q not found", name), false
		}
		if err != nil {
			return err.Error(), false
		}
		if pvc.Status.Phase == v1.ClaimLost {
			return fmt.Sprintf("persistentvolumeclaim %q bound to non-existent persistentvolume %q", name, pvc.Spec.VolumeName), false
		}
		if pvc.DeletionTimestamp != nil {
			return fmt.Sprintf("persistentvolumeclaim %q is being deleted", name), false
		}
		if pvc.Spec.VolumeName != "" && metav1.HasAnnotation(pvc.ObjectMeta, annBindCompleted) {
			continue // bound
		}
		if pvc.Spec.VolumeName == "" && n.delayedBinding(pvc) {
			delayed = append(delayed, pvc)
			continue
		}
		return "pod has unbound immediate PersistentVolumeClaims", false
	}
	if len(delayed) == 0 {
		return "", false
	}
	// The scheduler picks a node for the delayed claims and lets the PV
	// controller provision them for it; there is one node.
	for _, pvc := range delayed {
		if pvc.Annotations[annSelectedNode] == Name {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"annotations": map[string]string{annSelectedNode: Name}}})
		if _, err := n.client.CoreV1().PersistentVolumeClaims(p.Namespace).Patch(ctx, pvc.Name,
			types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			n.log.Printf("pvc %s/%s: select node: %v", p.Namespace, pvc.Name, err)
		}
	}
	return "waiting for the volumes of delayed-binding claims to be provisioned", true
}

// delayedBinding: the claim's class binds WaitForFirstConsumer.
func (n *Node) delayedBinding(pvc *v1.PersistentVolumeClaim) bool {
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	if class == "" {
		return false
	}
	sc, err := n.claims.classes.Get(class)
	return err == nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// markUnschedulable sets PodScheduled=False (reason Unschedulable) with the
// scheduler's wording and records a FailedScheduling event, once per message.
func (n *Node) markUnschedulable(ctx context.Context, p *v1.Pod, reason string) {
	msg := fmt.Sprintf("0/1 nodes are available: %s.", reason)
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && c.Reason == v1.PodReasonUnschedulable && c.Message == msg {
			return
		}
	}
	now := metav1.Now()
	// With the resourceVersion the patch applies only to the pod as read
	// (a cached copy may be stale: the pod just bound); a conflict means a
	// newer pod, which the binder will see.
	patch, _ := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": p.ResourceVersion},
		"status": map[string]any{"conditions": []v1.PodCondition{{
			Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: v1.PodReasonUnschedulable, Message: msg,
			LastTransitionTime: now}}}})
	if _, err := n.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil {
		if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			n.log.Printf("pod %s/%s: unschedulable: %v", p.Namespace, p.Name, err)
		}
		return
	}
	n.log.Printf("pod %s/%s: not bound: %s", p.Namespace, p.Name, msg)
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.Name, time.Now().UnixNano()), Namespace: p.Namespace},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name,
			UID: p.UID, ResourceVersion: p.ResourceVersion},
		Reason: "FailedScheduling", Message: msg, Type: v1.EventTypeWarning, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		// The binder plays the scheduler's part; the event says who it is.
		Source:              v1.EventSource{Component: "coxswain-e2e-node", Host: Name},
		ReportingController: "coxswain-e2e-node", ReportingInstance: Name,
	}
	if _, err := n.client.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		n.log.Printf("pod %s/%s: event: %v", p.Namespace, p.Name, err)
	}
}

// claimChanged re-tries the binding of the unscheduled pods that use pvc.
func (n *Node) claimChanged(ctx context.Context, pvc *v1.PersistentVolumeClaim) {
	pods, err := n.unscheduled.Pods(pvc.Namespace).List(labelsEverything)
	if err != nil {
		return
	}
	for _, p := range pods {
		for _, c := range podClaims(p) {
			if c == pvc.Name {
				n.bind(ctx, p)
				break
			}
		}
	}
}

// claimSource resolves a persistentVolumeClaim volume to its PV's host
// directory, as a kubelet's volume manager does: the claim must be bound to
// a PV whose claimRef is this claim.
func (w *podWorker) claimSource(ctx context.Context, src *v1.PersistentVolumeClaimVolumeSource) (string, error) {
	ns := w.pod.Namespace
	pvc, err := w.n.client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, src.ClaimName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error processing PVC %s/%s: failed to fetch PVC from API server: %w", ns, src.ClaimName, err)
	}
	if pvc.DeletionTimestamp != nil {
		return "", fmt.Errorf("can't start pod because PVC %s/%s is being deleted", ns, src.ClaimName)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("error processing PVC %s/%s: PVC is not bound", ns, src.ClaimName)
	}
	pv, err := w.n.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: %w", ns, src.ClaimName, pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Namespace != ns || ref.Name != pvc.Name || (ref.UID != "" && ref.UID != pvc.UID) {
		return "", fmt.Errorf("error processing PVC %s/%s: PV %s is not bound to it", ns, src.ClaimName, pv.Name)
	}
	var path string
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
		if t := pv.Spec.HostPath.Type; t != nil && *t == v1.HostPathDirectoryOrCreate {
			_ = os.MkdirAll(path, 0o755)
		}
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	default:
		return "", fmt.Errorf("PVC %s/%s: PV %s is neither hostPath nor local: the stand-in node mounts only host directories", ns, src.ClaimName, pv.Name)
	}
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("PV %s: path %q is not absolute", pv.Name, path)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("PVC %s/%s: PV %s: %w", ns, src.ClaimName, pv.Name, err)
	}
	return path, nil
}

// volumeReadOnly: the pod's volume is a claim marked readOnly (then every
// mount of it is read-only, as a kubelet mounts it).
func (w *podWorker) volumeReadOnly(name string) bool {
	for _, v := range w.pod.Spec.Volumes {
		if v.Name == name && v.PersistentVolumeClaim != nil {
			return v.PersistentVolumeClaim.ReadOnly
		}
	}
	return false
}
