// kcm.go: kube-controller-manager's flags. It runs as a child process (this
// binary re-executed as `kube-controller-manager`), because only one
// Kubernetes component command may install signal handlers per process.
package main

// kcmArgs returns the flags for kube-controller-manager: every default
// controller (job, garbage-collector, namespace, serviceaccount,
// serviceaccount-token, ttl-after-finished, root-ca-cert-publisher, …),
// including the volume ones — persistentvolume-binder, pvc-protection,
// pv-protection, persistentvolume-expander, attachdetach — with the in-tree
// hostPath provisioner enabled (see storage.go).
func kcmArgs(kubeconfig string, c *credentials) []string {
	return []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--controllers=*", "--secure-port=0",
		"--service-account-private-key-file=" + c.saKey, "--root-ca-file=" + c.caCert,
		"--use-service-account-credentials=false",
		"--enable-hostpath-provisioner=true",
		"--concurrent-gc-syncs=5", "--v=1",
	}
}
