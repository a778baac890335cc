package realnode

// pause.go: the pod sandbox ("pause") image. There is no registry, so the
// harness builds it: a docker-archive (what `docker save` writes and `ctr
// images import` reads) whose one layer holds the host's static
// /bin/busybox (Debian's busybox-static) and whose entrypoint sleeps for
// ever, the one thing a sandbox container has to do.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

const (
	// pauseTag is the name the archive carries.
	pauseTag = "coxswain-e2e/pause:1"
	// PauseImageRef is that name once imported (containerd normalises a
	// name without a registry to docker.io): the CRI sandbox_image.
	PauseImageRef = "docker.io/" + pauseTag
	// busyboxPath is the static busybox the image is made of.
	busyboxPath = "/bin/busybox"
)

// pauseArchive returns a docker-archive holding the pause image.
func pauseArchive() ([]byte, error) {
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return nil, fmt.Errorf("pause image: %w (install busybox-static: e2e/packages @real-node)", err)
	}
	if !bytes.HasPrefix(bb, []byte("\x7fELF")) || bytes.Contains(bb, []byte("/lib64/ld-linux")) {
		return nil, fmt.Errorf("pause image: %s is not a static ELF binary (install busybox-static)", busyboxPath)
	}
	epoch := time.Unix(0, 0)
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, h := range []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch},
		{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb)), ModTime: epoch},
	} {
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(bb); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerSum := fmt.Sprintf("%x", sha256.Sum256(layer.Bytes()))
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": []string{"/bin/busybox", "sleep", "2147483647"},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerSum}},
	})
	if err != nil {
		return nil, err
	}
	configName := fmt.Sprintf("%x.json", sha256.Sum256(config))
	manifest, err := json.Marshal([]map[string]any{{
		"Config": configName, "RepoTags": []string{pauseTag}, "Layers": []string{layerSum + "/layer.tar"},
	}})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	tw = tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{layerSum + "/layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// importPause writes the pause image to STATE/pause.tar and imports it
// into containerd's k8s.io namespace, before the kubelet starts.
func (n *Node) importPause(ctx context.Context) error {
	data, err := pauseArchive()
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.p.pause, data, 0o644); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if _, err := ctr(ctx, n.p.sock, "images", "import", n.p.pause); err != nil {
		return fmt.Errorf("importing the pause image: %w", err)
	}
	return nil
}
