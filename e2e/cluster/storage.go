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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
	for i := range pvs.Items {
		if dir, ok := provisionedDir(&pvs.Items[i]); ok {
			_ = os.RemoveAll(dir)
		}
	}
}

// provisionedDir returns the host directory of a PV the in-tree hostPath
// provisioner made (under /tmp/hostpath_pv/).
func provisionedDir(pv *v1.PersistentVolume) (string, bool) {
	if hp := pv.Spec.HostPath; hp != nil && strings.HasPrefix(hp.Path, hostPathProvisionDir) &&
		!strings.Contains(hp.Path[len(hostPathProvisionDir):], "..") &&
		pv.Annotations["pv.kubernetes.io/provisioned-by"] == "kubernetes.io/host-path" {
		return hp.Path, true
	}
	return "", false
}

// makeProvisionedDirsWritable makes the directory of every PV the hostPath
// provisioner makes in this cluster world-writable (0777) as soon as the PV
// appears, until ctx ends. With the real node the harness plays a storage
// driver that makes writable folders: the provisioner creates them 0750
// root, a pod running as another user (65532) could not write them, and
// hostPath volumes ignore fsGroup. The PV exists before its claim is bound,
// so before any pod using it is scheduled, let alone started.
func makeProvisionedDirsWritable(ctx context.Context, cs kubernetes.Interface, logf func(string, ...any)) {
	f := informers.NewSharedInformerFactory(cs, 0)
	chmod := func(obj any) {
		pv, ok := obj.(*v1.PersistentVolume)
		if !ok {
			return
		}
		if dir, ok := provisionedDir(pv); ok {
			if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm() != 0o777 {
				if err := os.Chmod(dir, 0o777); err != nil {
					logf("making %s writable: %v", dir, err)
				}
			}
		}
	}
	_, _ = f.Core().V1().PersistentVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    chmod,
		UpdateFunc: func(_, obj any) { chmod(obj) },
	})
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}
