package node

// env.go: a container's environment as a kubelet builds it — env (value with
// $(VAR) expansion, valueFrom configMapKeyRef/secretKeyRef/fieldRef/
// resourceFieldRef), envFrom (with prefix), plus KUBERNETES_SERVICE_HOST/PORT
// pointing at the real apiserver on 127.0.0.1 and a default PATH/HOME/HOSTNAME
// since there is no image to supply them.

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// expand replaces $(VAR) with vars[VAR] when defined; $$ escapes a $.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// containerEnv returns the environment (as KEY=VALUE) and the map used for
// expanding command and args.
func (w *podWorker) containerEnv(ctx context.Context, c *v1.Container) ([]string, map[string]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	set("PATH", defaultPath)
	set("HOME", "/root")
	set("HOSTNAME", w.pod.Name)
	port := strconv.Itoa(w.n.cfg.APIServerPort)
	set("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	set("KUBERNETES_SERVICE_PORT", port)
	set("KUBERNETES_SERVICE_PORT_HTTPS", port)
	set("KUBERNETES_PORT", "tcp://127.0.0.1:"+port)

	for _, ef := range c.EnvFrom {
		var data map[string][]byte
		var err error
		switch {
		case ef.ConfigMapRef != nil:
			data, err = w.configMapData(ctx, ef.ConfigMapRef.Name, ptr.Deref(ef.ConfigMapRef.Optional, false))
		case ef.SecretRef != nil:
			data, err = w.secretData(ctx, ef.SecretRef.Name, ptr.Deref(ef.SecretRef.Optional, false))
		}
		if err != nil {
			return nil, nil, err
		}
		for k, v := range data {
			set(ef.Prefix+k, string(v))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		vf := e.ValueFrom
		var v string
		var err error
		found := true
		switch {
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			v, found, err = w.keyRef(ctx, "configmap", ref.Name, ref.Key, ref.Optional, w.configMapData)
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			v, found, err = w.keyRef(ctx, "secret", ref.Name, ref.Key, ref.Optional, w.secretData)
		case vf.FieldRef != nil:
			v, err = w.fieldValue(vf.FieldRef.FieldPath)
		case vf.ResourceFieldRef != nil:
			ref := *vf.ResourceFieldRef
			if ref.ContainerName == "" {
				ref.ContainerName = c.Name
			}
			v, err = w.resourceValue(ref.ContainerName, &ref)
		default:
			err = fmt.Errorf("env %q: unsupported valueFrom", e.Name)
		}
		if err != nil {
			return nil, nil, err
		}
		if found {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, vars, nil
}

// keyRef is the value of key in the ConfigMap or Secret (kind) name, read
// with read: a missing key is an error unless optional, when found is false
// and the variable is left unset.
func (w *podWorker) keyRef(ctx context.Context, kind, name, key string, optional *bool,
	read func(context.Context, string, bool) (map[string][]byte, error)) (v string, found bool, err error) {
	opt := ptr.Deref(optional, false)
	data, err := read(ctx, name, opt)
	if err != nil {
		return "", false, err
	}
	b, found := data[key]
	if !found && !opt {
		return "", false, fmt.Errorf("%s %q has no key %q", kind, name, key)
	}
	return string(b), found, nil
}
