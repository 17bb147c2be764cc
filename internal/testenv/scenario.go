package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Scenario is one scenario folder: the objects of manifests.yaml in file order and the
// expectations of expected.yaml.
type Scenario struct {
	// Name is the folder's base name, e.g. "seed-ipam-leaked" or "case-23".
	Name string
	// Objects are the manifests' documents in file order; Load never modifies them.
	Objects []*unstructured.Unstructured
	// Clock is the instant the file's timestamps are relative to, from its
	// "# clock: <RFC3339>" comment line; zero if there is none (timestamps load unshifted).
	Clock time.Time
	// Expected is expected.yaml.
	Expected Expected
	// ExpectedYAML is expected.yaml as read, for packages that keep extra fields in it (such
	// as per-node verdicts); Expected ignores fields it does not know.
	ExpectedYAML []byte
}

// Expected is a scenario's expected.yaml.
type Expected struct {
	// Target, when set, is what is asked instead of Pod, the way a user types it after
	// why-pending: "deploy/checkout", "sts/ledger", a bare "checkout" (a pod, else the workload
	// of that name), in Namespace. Pod then names the pod the scheduler must judge first, if any.
	Target string `json:"target,omitempty"`
	// Namespace is the namespace a Target is asked in; a Target written
	// "namespace/type/name" with no Namespace is read as "type/name" in that namespace.
	Namespace string `json:"namespace,omitempty"`
	// Pod is the pod under test as "namespace/name" ("" for a Target with no pod; a
	// "namespace/type/name" here is read as the Target).
	Pod string `json:"pod"`
	// Code is the primary triage code (a slug from triage-codes.md): the pod's Findings[0], or
	// the workload's for a Target.
	Code string `json:"code"`
	// AlsoOK lists other primary codes a careful engineer would accept.
	AlsoOK []string `json:"also_ok,omitempty"`
	// Context lists codes that must also appear among the findings.
	Context []string `json:"context,omitempty"`
	// NeedsScheduler: the diagnosis rests on the real kube-scheduler's verdict.
	NeedsScheduler bool `json:"needs_scheduler,omitempty"`
	// SchedulerMustBeStopped: load (and diagnose) with no kube-scheduler running.
	SchedulerMustBeStopped bool `json:"scheduler_must_be_stopped,omitempty"`
	// ExpectSchedulerMessage is a substring of the real scheduler's FailedScheduling message.
	ExpectSchedulerMessage string `json:"expect_scheduler_message,omitempty"`
	// DeleteAfterLoad lists pods ("namespace/name") that Load deletes, without waiting, after
	// loading, so they stay Terminating.
	DeleteAfterLoad []string `json:"delete_after_load,omitempty"`
	// Notes say how the case was built and what it approximates.
	Notes string `json:"notes,omitempty"`
}

var clockLine = regexp.MustCompile(`(?m)^#\s*clock:\s*(\S+)\s*$`)

// LoadScenarioDir reads the scenario in directory dir (manifests.yaml and expected.yaml).
func LoadScenarioDir(dir string) (*Scenario, error) {
	s, err := ReadScenario(os.DirFS(dir), ".")
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(dir); err == nil {
		s.Name = filepath.Base(abs)
	}
	return s, nil
}

// ReadScenario reads the scenario in directory dir of fsys (manifests.yaml and
// expected.yaml). Name is dir's base name.
func ReadScenario(fsys fs.FS, dir string) (*Scenario, error) {
	s := &Scenario{Name: path.Base(dir)}
	manifests, err := fs.ReadFile(fsys, path.Join(dir, "manifests.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read scenario %s: %w", s.Name, err)
	}
	if m := clockLine.FindSubmatch(manifests); m != nil {
		s.Clock, err = time.Parse(time.RFC3339, string(m[1]))
		if err != nil {
			return nil, fmt.Errorf("read scenario %s: clock line: %w", s.Name, err)
		}
	}
	if s.Objects, err = DecodeObjects(manifests); err != nil {
		return nil, fmt.Errorf("read scenario %s: manifests.yaml: %w", s.Name, err)
	}
	expected, err := fs.ReadFile(fsys, path.Join(dir, "expected.yaml"))
	if err != nil {
		return nil, fmt.Errorf("read scenario %s: %w", s.Name, err)
	}
	s.ExpectedYAML = expected
	if err := yaml.Unmarshal(expected, &s.Expected); err != nil {
		return nil, fmt.Errorf("read scenario %s: expected.yaml: %w", s.Name, err)
	}
	// "namespace/type/name" (as the shared cases write a target, and repeat it as the pod) is
	// Target "type/name" in Namespace, and names no pod.
	if e := &s.Expected; strings.Count(e.Pod, "/") == 2 {
		if e.Target == "" {
			e.Target = e.Pod
		}
		e.Pod = ""
	}
	if e := &s.Expected; e.Namespace == "" {
		if ns, rest, ok := strings.Cut(e.Target, "/"); ok && strings.Contains(rest, "/") {
			e.Namespace, e.Target = ns, rest
		}
	}
	return s, nil
}

// ScenarioDirs returns, sorted, every directory at or below root that holds both
// manifests.yaml and expected.yaml (e.g. testdata/scenarios/* and testdata/cases/* for
// root "testdata").
func ScenarioDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "manifests.yaml" {
			return nil
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "expected.yaml")); err == nil {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list scenarios under %s: %w", root, err)
	}
	sort.Strings(dirs)
	return dirs, nil
}

// FindScenario returns the directory of the scenario called name: name itself if it is an
// existing directory, else <repo>/testdata/scenarios/<name> or <repo>/testdata/cases/<name>.
func FindScenario(name string) (string, error) {
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		return name, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	for _, parent := range []string{"scenarios", "cases"} {
		dir := filepath.Join(root, "testdata", parent, name)
		if _, err := os.Stat(filepath.Join(dir, "manifests.yaml")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("find scenario %q: not a directory and not under testdata/scenarios or testdata/cases", name)
}
