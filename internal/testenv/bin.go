package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// BinEnv names the environment variable that, when set, points at a directory holding
// prebuilt etcd, kube-apiserver and kube-scheduler binaries; BinDir then skips
// hack/controlplane/build.sh.
const BinEnv = "WHYPENDING_CONTROLPLANE_BIN"

// binaries lists the executables BinDir guarantees to exist in the directory it returns.
var binaries = []string{"etcd", "kube-apiserver", "kube-scheduler"}

// RepoRoot returns the absolute path of the whypending repository: the nearest directory at
// or above this package's source directory (found with runtime.Caller) that holds a go.mod
// declaring module github.com/whypending/whypending, falling back to the working directory
// and its parents when the source tree is not available (a binary moved elsewhere).
func RepoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			data, err := os.ReadFile(filepath.Join(d, "go.mod"))
			if err == nil && bytes.Contains(data, []byte("module github.com/whypending/whypending\n")) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("locate repository root: no go.mod for github.com/whypending/whypending above the testenv source or the working directory")
}

var binMu sync.Mutex // serialises build script runs within the process

// BinDir returns the absolute directory holding the etcd, kube-apiserver and kube-scheduler
// binaries. If $WHYPENDING_CONTROLPLANE_BIN is set it must name such a directory; otherwise
// BinDir runs <repo>/hack/controlplane/build.sh, which builds them from the Go module proxy
// into <repo>/.cache/controlplane/<version key>/bin on first use (about 5 minutes on 2 cores)
// and returns at once when the cache is warm. The build's progress lines are copied to
// progress (may be nil).
func BinDir(ctx context.Context, progress io.Writer) (string, error) {
	if dir := os.Getenv(BinEnv); dir != "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("%s: %w", BinEnv, err)
		}
		if err := checkBinaries(abs); err != nil {
			return "", fmt.Errorf("%s: %w", BinEnv, err)
		}
		return abs, nil
	}
	dir, err := runBuildScript(ctx, "hack/controlplane/build.sh", progress)
	if err != nil {
		return "", fmt.Errorf("build control plane: %w", err)
	}
	if err := checkBinaries(dir); err != nil {
		return "", fmt.Errorf("build control plane: %w", err)
	}
	return dir, nil
}

// HelmEnv names the environment variable that, when set, is the path of a helm binary; Helm
// then skips hack/helm/build.sh.
const HelmEnv = "WHYPENDING_HELM"

// Helm returns the absolute path of the pinned helm binary (helm.sh/helm/v3, version in
// hack/helm/go.mod). If $WHYPENDING_HELM is set it must name an executable; otherwise Helm
// runs <repo>/hack/helm/build.sh, which builds helm from the Go module proxy into
// <repo>/.cache/helm/<version key>/helm on first use (about 4 minutes on 2 idle cores) and
// returns at once when the cache is warm. Progress lines go to progress (may be nil).
func Helm(ctx context.Context, progress io.Writer) (string, error) {
	return builtBinary(ctx, HelmEnv, "hack/helm/build.sh", "helm", progress)
}

// KubectlEnv names the environment variable that, when set, is the path of a kubectl binary;
// Kubectl then skips hack/kubectl/build.sh.
const KubectlEnv = "WHYPENDING_KUBECTL"

// Kubectl returns the absolute path of a kubectl binary of the local control plane's Kubernetes
// version. If $WHYPENDING_KUBECTL is set it must name an executable; otherwise Kubectl runs
// <repo>/hack/kubectl/build.sh, which builds k8s.io/kubernetes/cmd/kubectl from the Go module
// proxy into <repo>/.cache/kubectl/<version key>/kubectl on first use (about 3 minutes on 2
// idle cores) and returns at once when the cache is warm. Progress lines go to progress (may
// be nil). Tests use it to run the kubectl commands a diagnosis suggests, as a user pastes them.
func Kubectl(ctx context.Context, progress io.Writer) (string, error) {
	return builtBinary(ctx, KubectlEnv, "hack/kubectl/build.sh", "kubectl", progress)
}

// builtBinary returns the absolute path of the executable $env names, else of the one the
// repository script builds (and caches), checked to be executable.
func builtBinary(ctx context.Context, env, script, name string, progress io.Writer) (string, error) {
	path := os.Getenv(env)
	if path == "" {
		var err error
		if path, err = runBuildScript(ctx, script, progress); err != nil {
			return "", fmt.Errorf("build %s: %w", name, err)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if err := checkExecutable(abs); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return abs, nil
}

// runBuildScript runs the repository script rel (a build.sh that prints one path as its last
// line of stdout) from the repository root and returns that path. Its stderr progress lines are
// copied to progress (may be nil); the tail of them is in the error when it fails.
func runBuildScript(ctx context.Context, rel string, progress io.Writer) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	binMu.Lock()
	defer binMu.Unlock()
	if progress == nil {
		progress = io.Discard
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, filepath.FromSlash(rel)))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(progress, &tailBuffer{buf: &stderr, max: 8 << 10})
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %s: %w", rel, strings.TrimSpace(stderr.String()), err)
	}
	out := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[i+1:]
	}
	return out, nil
}

func checkBinaries(dir string) error {
	for _, b := range binaries {
		if err := checkExecutable(filepath.Join(dir, b)); err != nil {
			return err
		}
	}
	return nil
}

func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("missing binary: %w", err)
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf *bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

// AlertmanagerEnv names the environment variable that, when set, is the path of an
// alertmanager binary; Alertmanager then skips hack/alertmanager/build.sh.
const AlertmanagerEnv = "WHYPENDING_ALERTMANAGER"

// Alertmanager returns the absolute path of the pinned Alertmanager binary
// (github.com/prometheus/alertmanager v0.31.1, hack/alertmanager/go.mod), built into the
// cache by hack/alertmanager/build.sh on first use, as Helm does for helm.
func Alertmanager(ctx context.Context, progress io.Writer) (string, error) {
	path := os.Getenv(AlertmanagerEnv)
	if path == "" {
		var err error
		if path, err = runBuildScript(ctx, "hack/alertmanager/build.sh", progress); err != nil {
			return "", fmt.Errorf("build alertmanager: %w", err)
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("alertmanager: %w", err)
	}
	if err := checkExecutable(abs); err != nil {
		return "", fmt.Errorf("alertmanager: %w", err)
	}
	return abs, nil
}
