package collect

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// This file checks, in TestScenarios, every kubectl write an answer suggests: the command, as
// the user would paste it, runs through bash with the real kubectl (hack/kubectl, the control
// plane's version) against the API server holding the scenario, with --dry-run=server added to
// each kubectl write in it. The API server runs admission and validation but persists nothing,
// so a fix that names an immutable field (`kubectl set image job/…`), a placeholder the shell
// cannot parse (`--requests=<cpu>`), a wrong flag or a missing object fails the scenario.

// dryRunVerbs are the kubectl verbs that write and take --dry-run=server.
var dryRunVerbs = []string{"create", "apply", "patch", "delete", "label", "annotate", "set", "scale", "replace", "taint", "cordon", "uncordon", "drain", "expose", "autoscale"}

// dryRunWrapper is the kubectl the fixes run: reads (get, describe, logs, …) print nothing and
// succeed (they change nothing and need no check, and some would wait: -w), writes run the
// real kubectl with --dry-run=server and are logged, one line each, to $DRYRUN_LOG. kubectl edit
// opens an editor, so for it only the object it would open is read (it must exist); rollout
// restart has no --dry-run and is refused.
const dryRunWrapper = `#!/bin/sh
verb=$1
case "$verb" in
` + "create|apply|patch|delete|label|annotate|set|scale|replace|taint|cordon|uncordon|drain|expose|autoscale" + `) ;;
rollout) if [ "$2" != undo ]; then echo "rollout $2 cannot be dry-run" >&2; exit 3; fi ;;
edit) shift; echo "edit $*" >> "$DRYRUN_LOG"; exec "$KUBECTL_REAL" get "$@" -o name >/dev/null ;;
*) exit 0 ;;
esac
echo "$*" >> "$DRYRUN_LOG"
exec "$KUBECTL_REAL" "$@" --dry-run=server
`

// dryRunTally counts, across the scenarios of one TestScenarios run, the kubectl write fixes
// checked and those whose object the scenario does not model.
var dryRunTally struct {
	mu sync.Mutex
	// checked counts writes the API server accepted with --dry-run=server; edits counts kubectl
	// edit lines whose object exists; notModelled counts writes whose object the scenario's
	// manifests lack; runs counts the scenarios checked.
	checked, edits, notModelled, runs int
}

// fixCommands returns the kubectl command lines of a fix list: a line that is a command, or the
// command a sentence embeds after ": " or in parentheses ("(kubectl apply -n x -f y.yaml)").
func fixCommands(fix []string) []string {
	var out []string
	for _, l := range fix {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "kubectl "):
			out = append(out, l)
		case strings.Contains(l, ": kubectl "):
			out = append(out, strings.TrimSuffix(l[strings.Index(l, ": kubectl ")+2:], "."))
		case strings.Contains(l, "(kubectl "):
			cmd := l[strings.Index(l, "(kubectl ")+1:]
			if i := strings.LastIndex(cmd, ")"); i >= 0 {
				cmd = cmd[:i]
			}
			out = append(out, cmd)
		}
	}
	return out
}

// reKubectlVerb finds each kubectl invocation's verb in a command line.
var reKubectlVerb = regexp.MustCompile(`(?:^|[;&|(]\s*)kubectl\s+([a-z-]+)`)

// writes reports whether the command line runs a kubectl write (edit and rollout included:
// the wrapper refuses those it cannot check).
func writes(cmd string) bool {
	cmd = shellCode(cmd)
	for _, m := range reKubectlVerb.FindAllStringSubmatch(cmd, -1) {
		if slices.Contains(dryRunVerbs, m[1]) || m[1] == "edit" || (m[1] == "rollout" && !strings.Contains(cmd, "rollout status") && !strings.Contains(cmd, "rollout history")) {
			return true
		}
	}
	return false
}

// shellCode is cmd without its trailing shell comment: from the first # that starts a word
// outside quotes.
func shellCode(cmd string) string {
	var quote rune
	for i, r := range cmd {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || cmd[i-1] == ' ' || cmd[i-1] == '\t'):
			return cmd[:i]
		}
	}
	return cmd
}

// reNotFound reads kubectl's NotFound error: `Error from server (NotFound): jobs.batch "x" not found`.
var reNotFound = regexp.MustCompile(`\(NotFound\): (?:[a-z0-9.-]+ )?"([^"]+)" not found`)

// checkFixesDryRun runs every kubectl write among findings' fixes against c with
// --dry-run=server (see the file comment). A write refused because its object is NotFound
// counts as not modelled when the scenario's manifests have no object of that name (the file
// models only what the report showed, so a pod's owner may be absent); any other refusal fails
// the test.
func checkFixesDryRun(t *testing.T, c *testenv.Cluster, sc *testenv.Scenario, findings []triage.Finding) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute) // a cold kubectl build
	defer cancel()
	bin, err := testenv.Kubectl(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(dryRunWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "dry-run.log")
	seen := map[string]bool{}
	for _, f := range findings {
		for _, cmd := range fixCommands(f.Fix) {
			if !writes(cmd) || seen[cmd] {
				continue
			}
			seen[cmd] = true
			before, beforeEdits := logLines(t, log)
			var stdout, stderr bytes.Buffer
			run := exec.CommandContext(ctx, "bash", "-c", cmd)
			run.Env = append(os.Environ(),
				"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"),
				"KUBECONFIG="+c.KubeconfigPath, "KUBECTL_REAL="+bin, "DRYRUN_LOG="+log,
				// Secrets only the operator knows, which the fixes take from the environment.
				"REGISTRY_USER=dry-run-user", "REGISTRY_TOKEN=dry-run-token", "SECRET_VALUE=dry-run-value")
			run.Stdout, run.Stderr = &stdout, &stderr
			err := run.Run()
			after, afterEdits := logLines(t, log)
			ran, edits := after-before, afterEdits-beforeEdits
			out := strings.TrimSpace(stderr.String())
			switch m := reNotFound.FindStringSubmatch(out); {
			case err == nil && ran > 0:
				dryRunTally.mu.Lock()
				dryRunTally.checked += ran - edits
				dryRunTally.edits += edits
				dryRunTally.mu.Unlock()
			case err == nil:
				t.Errorf("%s fix %q: ran no kubectl write (is it a command as pasted?)", f.Code, cmd)
			case m != nil && !modelled(sc, m[1]):
				dryRunTally.mu.Lock()
				dryRunTally.notModelled++
				dryRunTally.mu.Unlock()
				t.Logf("%s fix %q: %s is not in the scenario's manifests, so the write is not checked", f.Code, cmd, m[1])
			default:
				t.Errorf("%s fix %q is refused as pasted (--dry-run=server): %v\n%s", f.Code, cmd, err, out)
			}
		}
	}
	dryRunTally.mu.Lock()
	dryRunTally.runs++
	dryRunTally.mu.Unlock()
}

// logLines counts the lines of the wrapper's log, and of them the edit lines (0 when it does
// not exist yet).
func logLines(t *testing.T, path string) (lines, edits int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			lines++
		}
		if strings.HasPrefix(l, "edit ") {
			edits++
		}
	}
	return lines, edits
}

// modelled reports whether the scenario's manifests hold an object named name.
func modelled(sc *testenv.Scenario, name string) bool {
	return slices.ContainsFunc(sc.Objects, func(o *unstructured.Unstructured) bool { return o.GetName() == name })
}

// answerFindings returns every finding of an answer: a pod's, or a workload's own and those of
// each group's representative.
func answerFindings(a *triage.Answer) []triage.Finding {
	var out []triage.Finding
	if a.Pod != nil {
		out = append(out, a.Pod.Findings...)
	}
	if wd := a.Workload; wd != nil {
		out = append(out, wd.Findings...)
		for _, g := range wd.Groups {
			if g.Diagnosis != nil {
				out = append(out, g.Diagnosis.Findings...)
			}
		}
	}
	return out
}

func TestFixCommands(t *testing.T) {
	fix := []string{
		"kubectl describe pod -n a b",
		"kubectl delete pod -n a b   # stop-gap",
		"Or lower the pods' requests: kubectl set resources deploy/x -n a --requests=cpu=100m.",
		"Or give every container a default: a LimitRange (kubectl apply -n a -f lr.yaml).",
		"On node-1: ip link delete cni0",
	}
	want := []string{"kubectl describe pod -n a b", "kubectl delete pod -n a b   # stop-gap", "kubectl set resources deploy/x -n a --requests=cpu=100m", "kubectl apply -n a -f lr.yaml"}
	if got := fixCommands(fix); !slices.Equal(got, want) {
		t.Errorf("fixCommands = %q, want %q", got, want)
	}
	for cmd, want := range map[string]bool{
		"kubectl describe pod -n a b":                    false,
		"kubectl get pods -A | grep x":                   false,
		"kubectl delete pod -n a b":                      true,
		"kubectl get pvc -n a; kubectl label node n x=":  true,
		"kubectl rollout status deploy/x":                false,
		"kubectl rollout undo deploy/x":                  true,
		"kubectl edit deploy/x":                          true,
		"kubectl get pods -w   # then; kubectl delete x": false,
		`kubectl patch x -p '{"a":"#b"}'  # c`:           true,
	} {
		if got := writes(cmd); got != want {
			t.Errorf("writes(%q) = %t, want %t", cmd, got, want)
		}
	}
}
