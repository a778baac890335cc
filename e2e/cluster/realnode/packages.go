package realnode

// packages.go: the host programs the real node runs, from Debian packages
// that `e2e/packages @real-node` installs (containerd, runc, busybox-static,
// iproute2, util-linux).

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// hostTools are the programs the node needs (PATH lookups).
var hostTools = []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc", "nsenter", "ip", "mount"}

// missingTools lists the host programs that are not installed.
func missingTools() []string {
	var out []string
	for _, t := range hostTools {
		if lookTool(t, "/usr/sbin/"+t, "/sbin/"+t) == t {
			out = append(out, t)
		}
	}
	if _, err := os.Stat(busyboxPath); err != nil {
		out = append(out, busyboxPath)
	}
	return out
}

// packagesScript finds e2e/packages: $COXSWAIN_E2E_PACKAGES, or the
// repository the harness binary (target/e2e/harness) or the working
// directory is in.
func packagesScript() string {
	if s := os.Getenv("COXSWAIN_E2E_PACKAGES"); s != "" {
		return s
	}
	var starts []string
	if self, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(self))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, d := range starts {
		for ; ; d = filepath.Dir(d) {
			s := filepath.Join(d, "e2e", "packages")
			if fi, err := os.Stat(s); err == nil && fi.Mode().IsRegular() {
				return s
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return ""
}

// ensurePackages runs `e2e/packages @real-node` (it installs what is
// missing, as root, or says what to install) and then checks the programs
// are there.
func ensurePackages(logf func(string, ...any)) error {
	if script := packagesScript(); script != "" {
		var stderr bytes.Buffer
		cmd := exec.Command(script, "@real-node")
		cmd.Stdout = os.Stderr
		cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s @real-node: %v: %s", script, err, strings.TrimSpace(stderr.String()))
		}
	}
	if m := missingTools(); len(m) > 0 {
		return fmt.Errorf("the real node needs %s: run e2e/packages @real-node (Debian: containerd runc busybox-static iproute2 util-linux)", strings.Join(m, ", "))
	}
	return nil
}
