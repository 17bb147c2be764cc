package collect

import (
	"strings"
	"testing"

	"github.com/whypending/whypending/triage"
)

// An on-call engineer pastes a Fix top to bottom. Its steps must come in the order look (the
// read-only commands that confirm the cause), decide (prose that says which case applies),
// change, verify: a change pasted before the read that would show it is wrong cannot be taken
// back, and a step that says what to change before anything was read states a cause nobody
// checked. This file checks the first half of that order, the part a program can tell: in a fix
// that has a read-only command (triage.FixStep.ReadOnly), the first step is one.

// actsFirstAllowed lists the steps a rule may put before its fix's first read-only command,
// each with why that is right for it. A step matches when its command (for an "On NODE: "
// entry, the command after it) or its prose starts with step.
var actsFirstAllowed = []struct {
	code triage.Code
	step string
	why  string
}{
	{triage.CodeImagePullFailed, "crictl pull ", "no rule reads the runtime's error, so the pull on the node is the look: it repeats the pull the kubelet keeps retrying, only to show that error"},
	{triage.CodeRegistryQuotaExceeded, "Ask the owner of ", "the registry's refusal, quoted in the summary, is the only place a registry's quota shows; the describe at the end shows the next pull"},
	{triage.CodeInvalidImageName, "Use a reference of the form", "the evidence quotes the reference the kubelet cannot parse, from the spec: there is nothing more to read before fixing it"},
	{triage.CodeCSIDriverNotRegistered, "Ask the cluster's admins", "the node plugin's namespace is one the asker cannot read, so there is nothing for them to look at: the step hands the question over"},
	{triage.CodeVolumeMountFailed, "Grant the CSI driver's controller identity", "the cloud API's refusal, quoted in the summary, names the permission and the identity; nothing in the cluster shows more"},
}

// actsBeforeLooking returns 0 and the first step of fix when that step is not a read-only
// command (a change, or prose) although the fix has one; -1 when the fix starts with a
// read-only command or has none (a fix of prose or changes only has nothing to look with).
func actsBeforeLooking(fix []string) (int, triage.FixStep) {
	if len(fix) == 0 || !hasReadOnlyStep(fix) {
		return -1, triage.FixStep{}
	}
	if first := triage.ParseFixStep(fix[0]); !first.ReadOnly() {
		return 0, first
	}
	return -1, triage.FixStep{}
}

// actsFirstReason is why code's fix may start with step (actsFirstAllowed), or "".
func actsFirstReason(code triage.Code, step triage.FixStep) string {
	what := step.Command + step.Text
	for _, a := range actsFirstAllowed {
		if a.code == code && strings.HasPrefix(what, a.step) {
			return a.why
		}
	}
	return ""
}

// checkFixOrder reports each finding whose fix acts or concludes before its first read-only
// command (actsBeforeLooking) without a reason in actsFirstAllowed; it returns how many of
// the findings' fixes have a read-only command, so were checked.
func checkFixOrder(t *testing.T, name string, findings []triage.Finding) (checked int) {
	t.Helper()
	for _, f := range findings {
		if !hasReadOnlyStep(f.Fix) {
			continue
		}
		checked++
		i, step := actsBeforeLooking(f.Fix)
		if i < 0 || actsFirstReason(f.Code, step) != "" {
			continue
		}
		what := "prose that changes something or concludes"
		if step.Command != "" {
			what = "a command that changes something"
		}
		t.Errorf("%s: %s fix starts with %s before its first read-only command: %q\nfix:\n  %s\nput the look first, or say in actsFirstAllowed why this rule may not",
			name, f.Code, what, step.Command+step.Text, strings.Join(f.Fix, "\n  "))
	}
	return checked
}

// hasReadOnlyStep reports whether fix has a command that only reads.
func hasReadOnlyStep(fix []string) bool {
	for _, e := range fix {
		if triage.ParseFixStep(e).ReadOnly() {
			return true
		}
	}
	return false
}

// TestFixLooksBeforeItActs checks every finding's fix over the scenario folders that ask about
// a pod, evaluated offline (checkFixOrder); TestScenarios checks the real control plane's
// answers the same way, the workloads' too. Its first subtest pins the check to fixes the
// last review found in that wrong order.
func TestFixLooksBeforeItActs(t *testing.T) {
	t.Run("the check", func(t *testing.T) {
		tests := []struct {
			name string
			fix  []string
			want int // index actsBeforeLooking returns
		}{
			{"container-exits-immediately as it was: the changes before the log that shows what the container did", []string{
				`Give the container a command that keeps running (the server, not a one-shot script); a shell image needs e.g. command: ["sleep", "infinity"] to stay up.`,
				"If it is meant to run once, run it as a Job (restartPolicy OnFailure/Never) instead of a Deployment or bare pod.",
				"kubectl logs -n shop app -c app --previous",
			}, 0},
			{"registry-unreachable as it was: set image before the name is checked", []string{
				"kubectl set image deployment/checkout checkout=kind-registry:5000/shop/checkout:1.8.2 -n shop",
				"On node-1: getent hosts kind-registry   # it resolves, unlike kind-regsitry",
			}, 0},
			{"look, decide, change, verify", []string{
				"kubectl logs -n shop app -c app --previous",
				"If it is meant to run once, run it as a Job.",
				"kubectl delete pod -n shop app",
				"kubectl get pods -n shop -w",
			}, -1},
			{"changes only: nothing to look with", []string{"Set command: in the container spec.", "kubectl delete pod -n shop app"}, -1},
		}
		for _, tt := range tests {
			if got, _ := actsBeforeLooking(tt.fix); got != tt.want {
				t.Errorf("%s: actsBeforeLooking = %d, want %d", tt.name, got, tt.want)
			}
		}
	})
	checked := 0
	eachOfflinePodScenario(t, func(name string, findings []triage.Finding) {
		checked += checkFixOrder(t, name, findings)
	})
	t.Logf("%d fixes with a read-only command checked", checked)
	if checked == 0 {
		t.Fatal("no scenario's fix has a read-only command: the test checks nothing")
	}
}
