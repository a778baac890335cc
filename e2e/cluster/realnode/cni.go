package realnode

// cni.go: the node's network plugin, `harness cni` (CNI runs plugins by
// name, so STATE/cni/bin/coxswain-e2e-net is a symlink to the harness and
// main dispatches on that name too). Pods may reach nothing but their own
// loopback, yet containerd insists on an IP for every sandbox ("failed to
// find network info for sandbox"). So ADD, inside the pod's network
// namespace, brings `lo` up and makes a veth pair with BOTH ends in that
// namespace: `eth0` with a /32 address and its peer, no routes. Nothing
// leaves the namespace. DEL has nothing to do: the pair goes with the
// namespace. CHECK, STATUS and GC succeed. containerd 1.6 also runs a
// `loopback` plugin for every sandbox: that name is this binary too, and
// only brings `lo` up (no package needed).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	// CNIPluginName is the plugin's name: the conflist's type and the
	// symlink's name in the CNI bin dir.
	CNIPluginName = "coxswain-e2e-net"
	// loopbackName is the plugin containerd adds to every network.
	loopbackName = "loopback"
	cniVersion   = "1.0.0"
	// peerName is the veth peer's name inside the pod (≤ 15 bytes).
	peerName = "e2e-peer"
)

// writeCNI installs the plugin (a symlink to this binary) and the
// conflist that names it.
func writeCNI(p paths) error {
	for _, d := range []string{p.cniBin, p.cniConf, p.cniState} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	for _, name := range []string{CNIPluginName, loopbackName} {
		link := filepath.Join(p.cniBin, name)
		_ = os.Remove(link)
		if err := os.Symlink(self, link); err != nil {
			return err
		}
	}
	conf, err := json.MarshalIndent(map[string]any{
		"cniVersion": cniVersion,
		"name":       "coxswain-e2e",
		"plugins":    []map[string]any{{"type": CNIPluginName, "stateDir": p.cniState}},
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(p.cniConf, "10-coxswain-e2e.conflist"), conf, 0o644)
}

// cniConf is the part of the network configuration the plugin reads.
type cniConf struct {
	CNIVersion string `json:"cniVersion"`
	StateDir   string `json:"stateDir"`
}

// IsCNIPlugin says whether the binary was run under a plugin's name.
func IsCNIPlugin(argv0 string) bool {
	b := filepath.Base(argv0)
	return b == CNIPluginName || b == loopbackName
}

// CNIMain runs the plugin: the command in CNI_COMMAND, the configuration
// on stdin, the result or error as JSON on stdout.
func CNIMain() {
	cmd := os.Getenv("CNI_COMMAND")
	var conf cniConf
	if cmd == "ADD" || cmd == "CHECK" {
		data, err := io.ReadAll(os.Stdin)
		if err == nil {
			err = json.Unmarshal(data, &conf)
		}
		if err != nil {
			cniFail(cniVersion, 6, "decoding the network configuration", err)
		}
	}
	if conf.CNIVersion == "" {
		conf.CNIVersion = cniVersion
	}
	switch cmd {
	case "VERSION":
		writeJSON(map[string]any{"cniVersion": cniVersion, "supportedVersions": []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0"}})
	case "ADD":
		if filepath.Base(os.Args[0]) == loopbackName {
			loopbackAdd(conf)
		} else {
			cniAdd(conf)
		}
	case "DEL", "CHECK", "STATUS", "GC":
		// Nothing to undo or check: the pair lives and dies with the namespace.
	default:
		cniFail(conf.CNIVersion, 4, "unsupported CNI_COMMAND "+strconv.Quote(cmd), nil)
	}
}

// cniAdd sets up the pod's namespace and prints the result.
func cniAdd(conf cniConf) {
	netns, ifname := os.Getenv("CNI_NETNS"), os.Getenv("CNI_IFNAME")
	if netns == "" || ifname == "" {
		cniFail(conf.CNIVersion, 4, "CNI_NETNS and CNI_IFNAME are required", nil)
	}
	ip, err := nextAddress(conf.StateDir)
	if err != nil {
		cniFail(conf.CNIVersion, 11, "allocating an address", err)
	}
	batch := strings.Join([]string{
		"link set lo up",
		"link add " + ifname + " type veth peer name " + peerName,
		"addr add " + ip + "/32 dev " + ifname,
		"link set " + ifname + " up",
		"link set " + peerName + " up",
	}, "\n") + "\n"
	if out, err := inNetns(netns, batch, "-batch", "-"); err != nil {
		cniFail(conf.CNIVersion, 11, "setting up "+ifname+": "+strings.TrimSpace(out), err)
	}
	mac := ""
	if out, err := inNetns(netns, "", "-j", "link", "show", "dev", ifname); err == nil {
		var links []struct {
			Address string `json:"address"`
		}
		if json.Unmarshal([]byte(out), &links) == nil && len(links) == 1 {
			mac = links[0].Address
		}
	}
	ipEntry := map[string]any{"address": ip + "/32", "interface": 0}
	if !strings.HasPrefix(conf.CNIVersion, "1.") {
		ipEntry["version"] = "4"
	}
	writeJSON(map[string]any{
		"cniVersion": conf.CNIVersion,
		"interfaces": []map[string]any{{"name": ifname, "mac": mac, "sandbox": netns}},
		"ips":        []map[string]any{ipEntry},
	})
}

// loopbackAdd brings `lo` up in the pod's namespace.
func loopbackAdd(conf cniConf) {
	netns := os.Getenv("CNI_NETNS")
	if netns == "" {
		cniFail(conf.CNIVersion, 4, "CNI_NETNS is required", nil)
	}
	if out, err := inNetns(netns, "", "link", "set", "lo", "up"); err != nil {
		cniFail(conf.CNIVersion, 11, "bringing lo up: "+strings.TrimSpace(out), err)
	}
	ipEntry := map[string]any{"address": "127.0.0.1/8", "interface": 0}
	if !strings.HasPrefix(conf.CNIVersion, "1.") {
		ipEntry["version"] = "4"
	}
	writeJSON(map[string]any{
		"cniVersion": conf.CNIVersion,
		"interfaces": []map[string]any{{"name": "lo", "sandbox": netns}},
		"ips":        []map[string]any{ipEntry},
	})
}

// inNetns runs `ip ARGS…` inside the network namespace at path, with
// stdin as its input.
func inNetns(netns, stdin string, args ...string) (string, error) {
	cmd := exec.Command(lookTool("nsenter", "/usr/bin/nsenter"), append([]string{"--net=" + netns, "--", lookTool("ip", "/usr/sbin/ip", "/sbin/ip", "/bin/ip")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lookTool finds a program on PATH or at one of its usual places.
func lookTool(name string, places ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range places {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return name
}

// nextAddress hands out 10.244.0.1, 10.244.0.2, … from a counter in
// stateDir (under a lock: containerd sets up sandboxes in parallel). The
// addresses only label pods: no packet ever leaves a pod's namespace.
func nextAddress(stateDir string) (string, error) {
	if stateDir == "" {
		stateDir = os.TempDir()
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "next-address"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	n %= 254 * 256
	if err := f.Truncate(0); err != nil {
		return "", err
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(n+1)+"\n"), 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("10.244.%d.%d", n/254, n%254+1), nil
}

func writeJSON(v any) {
	data, _ := json.Marshal(v)
	os.Stdout.Write(append(data, '\n'))
}

// cniFail prints a CNI error and exits 1.
func cniFail(version string, code int, msg string, err error) {
	details := ""
	if err != nil {
		details = err.Error()
	}
	writeJSON(map[string]any{"cniVersion": version, "code": code, "msg": msg, "details": details})
	os.Exit(1)
}
