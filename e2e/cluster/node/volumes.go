package node

// volumes.go: materialises a pod's volumes as directories under the pod's
// state dir — configMap, secret, emptyDir, downwardAPI and projected
// (configMap, secret, downwardAPI, serviceAccountToken via TokenRequest).
// hostPath volumes point at the host path itself, persistentVolumeClaim
// volumes at their PV's host directory (claims.go). Other kinds are refused.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	authv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// volumeFile is one file of a materialised volume.
type volumeFile struct {
	path string
	data []byte
	mode os.FileMode
}

func mode(m *int32, def int32) os.FileMode {
	if m != nil {
		return os.FileMode(*m)
	}
	return os.FileMode(def)
}

// keyFiles maps a key/value source (configMap or secret) to files.
func keyFiles(data map[string][]byte, items []v1.KeyToPath, defMode os.FileMode, what string, optional bool) ([]volumeFile, error) {
	var out []volumeFile
	if len(items) == 0 {
		for k, v := range data {
			out = append(out, volumeFile{k, v, defMode})
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out = append(out, volumeFile{it.Path, v, mode(it.Mode, int32(defMode))})
	}
	return out, nil
}

func (w *podWorker) configMapData(ctx context.Context, name string, optional bool) (map[string][]byte, error) {
	cm, err := w.n.client.CoreV1().ConfigMaps(w.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if found, err := fetched("configmap", name, optional, err); !found {
		return nil, err
	}
	out := map[string][]byte{}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out, nil
}

func (w *podWorker) secretData(ctx context.Context, name string, optional bool) (map[string][]byte, error) {
	s, err := w.n.client.CoreV1().Secrets(w.pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if found, err := fetched("secret", name, optional, err); !found {
		return nil, err
	}
	return s.Data, nil
}

// fetched is how getting the ConfigMap or Secret (kind) name ended: found, or
// not found and no error when it is optional (a volume or variable left
// out), or the error, named.
func fetched(kind, name string, optional bool, err error) (found bool, _ error) {
	if apierrors.IsNotFound(err) && optional {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", kind, name, err)
	}
	return true, nil
}

// fieldValue resolves a downward-API fieldPath against the pod.
func (w *podWorker) fieldValue(path string) (string, error) {
	p := w.pod
	kv := func(m map[string]string) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%s\n", k, strconv.Quote(m[k]))
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	switch {
	case path == "metadata.name":
		return p.Name, nil
	case path == "metadata.namespace":
		return p.Namespace, nil
	case path == "metadata.uid":
		return string(p.UID), nil
	case path == "metadata.labels":
		return kv(p.Labels), nil
	case path == "metadata.annotations":
		return kv(p.Annotations), nil
	case strings.HasPrefix(path, "metadata.labels['"):
		return p.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], nil
	case strings.HasPrefix(path, "metadata.annotations['"):
		return p.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], nil
	case path == "spec.nodeName":
		return p.Spec.NodeName, nil
	case path == "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case path == "status.hostIP", path == "status.podIP", path == "status.hostIPs", path == "status.podIPs":
		return "127.0.0.1", nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// resourceValue resolves a resourceFieldRef (limits fall back to node capacity).
func (w *podWorker) resourceValue(containerName string, ref *v1.ResourceFieldSelector) (string, error) {
	var c *v1.Container
	for i := range w.pod.Spec.Containers {
		if w.pod.Spec.Containers[i].Name == containerName {
			c = &w.pod.Spec.Containers[i]
		}
	}
	for i := range w.pod.Spec.InitContainers {
		if w.pod.Spec.InitContainers[i].Name == containerName {
			c = &w.pod.Spec.InitContainers[i]
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", containerName)
	}
	parts := strings.SplitN(ref.Resource, ".", 2)
	if len(parts) != 2 {
		return "", fmt.Errorf("bad resource %q", ref.Resource)
	}
	name := v1.ResourceName(parts[1])
	var list v1.ResourceList = c.Resources.Limits
	if parts[0] == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[name]
	if !ok {
		if parts[0] == "requests" {
			return "0", nil
		}
		q = w.n.resources()[name]
	}
	div := ref.Divisor
	if div.IsZero() {
		return strconv.FormatInt(q.Value(), 10), nil
	}
	if name == v1.ResourceCPU {
		return strconv.FormatInt((q.MilliValue()+div.MilliValue()-1)/div.MilliValue(), 10), nil
	}
	return strconv.FormatInt((q.Value()+div.Value()-1)/div.Value(), 10), nil
}

func (w *podWorker) downwardFiles(items []v1.DownwardAPIVolumeFile, defMode os.FileMode) ([]volumeFile, error) {
	var out []volumeFile
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = w.fieldValue(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = w.resourceValue(it.ResourceFieldRef.ContainerName, it.ResourceFieldRef)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, volumeFile{it.Path, []byte(v), mode(it.Mode, int32(defMode))})
	}
	return out, nil
}

func (w *podWorker) saToken(ctx context.Context, audience string, seconds *int64) ([]byte, error) {
	sa := w.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: seconds,
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: w.pod.Name, UID: w.pod.UID},
	}}
	if audience != "" {
		tr.Spec.Audiences = []string{audience}
	}
	if tr.Spec.ExpirationSeconds == nil {
		tr.Spec.ExpirationSeconds = ptr.To[int64](3600)
	}
	res, err := w.n.client.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for serviceaccount %q: %w", sa, err)
	}
	return []byte(res.Status.Token), nil
}

// volumeSource returns the host directory that stands in for volume v,
// filling it first.
func (w *podWorker) volumeSource(ctx context.Context, v *v1.Volume) (string, error) {
	dir := filepath.Join(w.dir, "volumes", v.Name)
	var files []volumeFile
	var err error
	switch {
	case v.EmptyDir != nil:
		return dir, os.MkdirAll(dir, 0o777)
	case v.PersistentVolumeClaim != nil:
		return w.claimSource(ctx, v.PersistentVolumeClaim)
	case v.HostPath != nil:
		if v.HostPath.Type != nil && (*v.HostPath.Type == v1.HostPathDirectoryOrCreate) {
			_ = os.MkdirAll(v.HostPath.Path, 0o755)
		}
		return v.HostPath.Path, nil
	case v.ConfigMap != nil:
		opt := ptr.Deref(v.ConfigMap.Optional, false)
		var data map[string][]byte
		if data, err = w.configMapData(ctx, v.ConfigMap.Name, opt); err == nil {
			files, err = keyFiles(data, v.ConfigMap.Items, mode(v.ConfigMap.DefaultMode, 0o644), "configmap "+v.ConfigMap.Name, opt)
		}
	case v.Secret != nil:
		opt := ptr.Deref(v.Secret.Optional, false)
		var data map[string][]byte
		if data, err = w.secretData(ctx, v.Secret.SecretName, opt); err == nil {
			files, err = keyFiles(data, v.Secret.Items, mode(v.Secret.DefaultMode, 0o644), "secret "+v.Secret.SecretName, opt)
		}
	case v.DownwardAPI != nil:
		files, err = w.downwardFiles(v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode, 0o644))
	case v.Projected != nil:
		def := mode(v.Projected.DefaultMode, 0o644)
		for _, src := range v.Projected.Sources {
			var f []volumeFile
			switch {
			case src.ConfigMap != nil:
				opt := ptr.Deref(src.ConfigMap.Optional, false)
				var data map[string][]byte
				if data, err = w.configMapData(ctx, src.ConfigMap.Name, opt); err == nil {
					f, err = keyFiles(data, src.ConfigMap.Items, def, "configmap "+src.ConfigMap.Name, opt)
				}
			case src.Secret != nil:
				opt := ptr.Deref(src.Secret.Optional, false)
				var data map[string][]byte
				if data, err = w.secretData(ctx, src.Secret.Name, opt); err == nil {
					f, err = keyFiles(data, src.Secret.Items, def, "secret "+src.Secret.Name, opt)
				}
			case src.DownwardAPI != nil:
				f, err = w.downwardFiles(src.DownwardAPI.Items, def)
			case src.ServiceAccountToken != nil:
				var tok []byte
				if tok, err = w.saToken(ctx, src.ServiceAccountToken.Audience, src.ServiceAccountToken.ExpirationSeconds); err == nil {
					f = []volumeFile{{src.ServiceAccountToken.Path, tok, def}}
				}
			default:
				err = fmt.Errorf("projected volume %q: unsupported source", v.Name)
			}
			if err != nil {
				break
			}
			files = append(files, f...)
		}
	default:
		return "", fmt.Errorf("volume %q: this kind is not supported by the stand-in node", v.Name)
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.Clean("/"+f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return "", err
		}
		_ = os.Chmod(p, f.mode)
	}
	return dir, nil
}
