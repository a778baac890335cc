package node

// mounts.go: mount points on the host. A container's mount namespace can only
// bind a volume onto a path that exists, and the host filesystem stands in for
// the image, so missing mount points (e.g. /config, /dev/termination-log,
// /var/run/secrets/kubernetes.io/serviceaccount) are created on the host,
// reference-counted across containers, and removed again — only what this
// node created, only when no container still uses it — when the last user
// exits (and at shutdown). Every created path is also appended to a journal
// in journalDir, so a harness that was SIGKILLed has its leftovers removed by
// the next one (empty files and empty directories only).

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// journalDir holds one journal per running harness, named by its pid.
const journalDir = "/run/coxswain-e2e-mountpoints"

type mountPoints struct {
	mu      sync.Mutex
	refs    map[string]int  // path -> users
	created map[string]bool // paths this node created
	journal *os.File
}

func newMountPoints() *mountPoints {
	m := &mountPoints{refs: map[string]int{}, created: map[string]bool{}}
	cleanStaleJournals()
	if err := os.MkdirAll(journalDir, 0o755); err == nil {
		m.journal, _ = os.OpenFile(filepath.Join(journalDir, strconv.Itoa(os.Getpid())),
			os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	}
	return m
}

// removeIfEmpty removes an empty directory or an empty regular file.
func removeIfEmpty(p string) {
	st, err := os.Lstat(p)
	if err != nil || (st.Mode().IsRegular() && st.Size() > 0) || (!st.Mode().IsRegular() && !st.IsDir()) {
		return
	}
	_ = os.Remove(p) // fails on non-empty directories, as it should
}

// cleanStaleJournals removes what harnesses that died without cleaning up
// had created.
func cleanStaleJournals() {
	entries, err := os.ReadDir(journalDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // still running
		}
		j := filepath.Join(journalDir, e.Name())
		b, _ := os.ReadFile(j)
		paths := strings.Split(strings.TrimSpace(string(b)), "\n")
		sort.Slice(paths, func(a, b int) bool { return len(paths[a]) > len(paths[b]) }) // deepest first
		for _, p := range paths {
			if p != "" {
				removeIfEmpty(p)
			}
		}
		_ = os.Remove(j)
	}
}

// acquire makes sure path exists (as a file when file is true), creating
// missing components, and returns the list of paths the caller must release.
func (m *mountPoints) acquire(path string, file bool) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	var chain []string // path first, then its ancestors
	for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
		chain = append(chain, p)
	}
	// Create from the top down.
	for i := len(chain) - 1; i >= 0; i-- {
		p := chain[i]
		if _, err := os.Lstat(p); err == nil {
			continue
		} else if !os.IsNotExist(err) {
			return nil, err
		}
		if i == 0 && file {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, err
			}
			f.Close()
		} else if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
			// e.g. /var/run is a symlink to /run: follow it via MkdirAll.
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, err
			}
		}
		m.created[p] = true
		if m.journal != nil {
			_, _ = m.journal.WriteString(p + "\n")
		}
	}
	for _, p := range chain {
		m.refs[p]++
	}
	return chain, nil
}

// release drops one use of each path; created paths without users are removed
// (deepest first).
func (m *mountPoints) release(chain []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range chain {
		m.refs[p]--
		if m.refs[p] > 0 {
			continue
		}
		delete(m.refs, p)
		if m.created[p] {
			if err := os.Remove(p); err == nil || os.IsNotExist(err) {
				delete(m.created, p)
			}
		}
	}
}

// releaseAll removes whatever this node created (at shutdown).
func (m *mountPoints) releaseAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	paths := make([]string, 0, len(m.created))
	for p := range m.created {
		paths = append(paths, p)
	}
	// Deepest first.
	for changed := true; changed; {
		changed = false
		for _, p := range paths {
			if m.created[p] {
				if err := os.Remove(p); err == nil || os.IsNotExist(err) {
					delete(m.created, p)
					changed = true
				}
			}
		}
	}
	m.refs = map[string]int{}
	if m.journal != nil && len(m.created) == 0 {
		_ = m.journal.Close()
		_ = os.Remove(m.journal.Name())
		m.journal = nil
	}
}
