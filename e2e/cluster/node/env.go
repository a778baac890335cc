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
		switch {
		case vf.ConfigMapKeyRef != nil:
			opt := ptr.Deref(vf.ConfigMapKeyRef.Optional, false)
			var data map[string][]byte
			if data, err = w.configMapData(ctx, vf.ConfigMapKeyRef.Name, opt); err == nil {
				b, ok := data[vf.ConfigMapKeyRef.Key]
				if !ok && !opt {
					err = fmt.Errorf("configmap %q has no key %q", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key)
				} else if !ok {
					continue
				}
				v = string(b)
			}
		case vf.SecretKeyRef != nil:
			opt := ptr.Deref(vf.SecretKeyRef.Optional, false)
			var data map[string][]byte
			if data, err = w.secretData(ctx, vf.SecretKeyRef.Name, opt); err == nil {
				b, ok := data[vf.SecretKeyRef.Key]
				if !ok && !opt {
					err = fmt.Errorf("secret %q has no key %q", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key)
				} else if !ok {
					continue
				}
				v = string(b)
			}
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
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, vars, nil
}
