// storage.go: dynamic provisioning. kube-controller-manager runs with
// --enable-hostpath-provisioner, so its persistentvolume-binder controller
// provisions claims of the class `standard` (provisioner
// kubernetes.io/host-path) as hostPath PVs at /tmp/hostpath_pv/<uuid>
// (created 0750 by the KCM process, root), and its deleter removes the
// directory once a released PV with reclaimPolicy Delete goes (it only
// deletes under /tmp/). The harness creates that StorageClass, marked as
// the default, so a claim without storageClassName is provisioned.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

const (
	// defaultStorageClass is the name of the default StorageClass.
	defaultStorageClass = "standard"
	// hostPathProvisionDir is where the in-tree hostpath provisioner puts
	// its volumes (pkg/volume/hostpath: "/tmp/%s/%s" with basePath
	// "hostpath_pv").
	hostPathProvisionDir = "/tmp/hostpath_pv/"
)

func adminClient(kubeconfig string) (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "coxswain-e2e-harness"
	return kubernetes.NewForConfig(rc)
}

// createDefaultStorageClass creates the default StorageClass `standard`
// (kubernetes.io/host-path, reclaimPolicy Delete, volumeBindingMode
// Immediate).
func createDefaultStorageClass(ctx context.Context, kubeconfig string) error {
	cs, err := adminClient(kubeconfig)
	if err != nil {
		return err
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: defaultStorageClass, Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "kubernetes.io/host-path",
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	for attempt := 0; ; attempt++ {
		_, err = cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if attempt == 20 || ctx.Err() != nil {
			return fmt.Errorf("storageclass %s: %w", defaultStorageClass, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// removeProvisionedDirs removes the host directories of the hostPath PVs
// this cluster still has (claims never deleted, namespaces whose deletion
// had not finished): every start is a fresh cluster, so nothing would ever
// delete them. Called once the node has stopped its pods and while
// kube-apiserver still serves; directories of other harnesses' clusters
// (tests run several at once) are left alone.
func removeProvisionedDirs(kubeconfig string) {
	cs, err := adminClient(kubeconfig)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness: listing PVs to remove their directories:", err)
		return
	}
	for _, pv := range pvs.Items {
		if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(hp.Path, hostPathProvisionDir) &&
			!strings.Contains(hp.Path[len(hostPathProvisionDir):], "..") &&
			pv.Annotations["pv.kubernetes.io/provisioned-by"] == "kubernetes.io/host-path" {
			_ = os.RemoveAll(hp.Path)
		}
	}
}
