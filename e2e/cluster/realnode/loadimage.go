package realnode

// loadimage.go: `harness load-image FILE.tar [--state DIR]` (what
// e2e/cluster/load-image runs): imports a docker-archive or an OCI archive
// into the running real node's containerd, under the name the archive
// carries, and prints each imported name. The node never pulls, so this is
// how a test's image gets there.

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distribution/reference"
)

// archiveNames reads the image names an archive carries: a docker-archive's
// manifest.json RepoTags, or an OCI archive's index.json ref name
// annotations. An archive naming no image is an error: the node could
// never refer to it.
func archiveNames(file string) (kind string, names []string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var manifest, index []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s is not a tar archive: %w", file, err)
		}
		switch strings.TrimPrefix(h.Name, "./") {
		case "manifest.json":
			manifest, err = io.ReadAll(tr)
		case "index.json":
			index, err = io.ReadAll(tr)
		}
		if err != nil {
			return "", nil, err
		}
	}
	switch {
	case manifest != nil:
		var m []struct{ RepoTags []string }
		if err := json.Unmarshal(manifest, &m); err != nil {
			return "", nil, fmt.Errorf("%s: manifest.json: %w", file, err)
		}
		for _, e := range m {
			names = append(names, e.RepoTags...)
		}
		if len(names) == 0 {
			return "", nil, fmt.Errorf("%s: docker-archive without a name (no RepoTags): push it as docker-archive:FILE:NAME:TAG", file)
		}
		return "docker-archive", names, nil
	case index != nil:
		var idx struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.Unmarshal(index, &idx); err != nil {
			return "", nil, fmt.Errorf("%s: index.json: %w", file, err)
		}
		for _, m := range idx.Manifests {
			if n := m.Annotations["io.containerd.image.name"]; n != "" {
				names = append(names, n)
			} else if n := m.Annotations["org.opencontainers.image.ref.name"]; n != "" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return "", nil, fmt.Errorf("%s: OCI archive whose index.json names no image (no org.opencontainers.image.ref.name annotation): push it as oci-archive:FILE:NAME:TAG or docker-archive:FILE:NAME:TAG", file)
		}
		return "oci-archive", names, nil
	}
	return "", nil, fmt.Errorf("%s: neither a docker-archive (manifest.json) nor an OCI archive (index.json)", file)
}

// LoadImageMain is `harness load-image FILE.tar [--state DIR]`.
func LoadImageMain(args []string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "load-image:", err)
		os.Exit(1)
	}
	fs := flag.NewFlagSet("load-image", flag.ExitOnError)
	state := fs.String("state", "", "the harness state directory (required)")
	var files []string
	for len(args) > 0 { // files and flags in any order
		if err := fs.Parse(args); err != nil {
			fail(err)
		}
		args = fs.Args()
		if len(args) > 0 {
			files = append(files, args[0])
			args = args[1:]
		}
	}
	if len(files) != 1 || *state == "" {
		fail(errors.New("usage: harness load-image FILE.tar --state DIR"))
	}
	file, err := filepath.Abs(files[0])
	if err != nil {
		fail(err)
	}
	kind, names, err := archiveNames(file)
	if err != nil {
		fail(err)
	}
	data, err := os.ReadFile(filepath.Join(*state, "containerd.sock-path"))
	if err != nil {
		fail(fmt.Errorf("no real node in %s (start one with e2e/cluster/up --real-node): %w", *state, err))
	}
	sock := strings.TrimSpace(string(data))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := criVersion(ctx, sock); err != nil {
		fail(fmt.Errorf("the real node's containerd (%s) does not answer: %w", sock, err))
	}
	out, err := ctr(ctx, sock, "images", "import", file)
	if err != nil {
		fail(err)
	}
	// ctr prints "unpacking NAME (sha256:…)...done" for each image.
	var imported []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "unpacking" {
			imported = append(imported, f[1])
		}
	}
	if len(imported) == 0 {
		fail(fmt.Errorf("ctr imported no image from %s (%s naming %s): %s", file, kind, strings.Join(names, ", "), strings.TrimSpace(out)))
	}
	for _, n := range imported {
		full, err := normalise(ctx, sock, n)
		if err != nil {
			fail(err)
		}
		fmt.Println(full)
	}
}

// normalise gives an imported image the name a pod's `image` resolves to:
// ctr names a docker-archive's images docker.io/…, but an OCI archive's
// exactly as its annotation says ("coxswain-e2e/busybox:1"), which the CRI
// plugin would never find. Such an image is re-tagged under its
// normalised name and the other name removed.
func normalise(ctx context.Context, sock, name string) (string, error) {
	ref, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", fmt.Errorf("imported image %q: %w", name, err)
	}
	full := reference.TagNameOnly(ref).String()
	if full == name {
		return name, nil
	}
	if _, err := ctr(ctx, sock, "images", "tag", "--force", name, full); err != nil {
		return "", err
	}
	if _, err := ctr(ctx, sock, "images", "rm", name); err != nil {
		return "", err
	}
	return full, nil
}
