package collect

import (
	"regexp"
	"strings"
	"testing"

	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

// TestFixStepsOfEveryRule reads every fix entry of every finding over the scenario folders
// (testdata/scenarios and testdata/cases, the shared cases) that ask about a pod, evaluated
// offline, the scheduler-judged ones too (from the rules' own node judgement): see
// checkFixSteps. TestScenarios runs the same check on the real control plane's answers, the
// workloads' too.
func TestFixStepsOfEveryRule(t *testing.T) {
	commands, prose := 0, 0
	eachOfflinePodScenario(t, func(name string, findings []triage.Finding) {
		c, p := checkFixSteps(t, name, findings)
		commands, prose = commands+c, prose+p
	})
	t.Logf("%d command steps, %d prose steps", commands, prose)
	if commands == 0 || prose == 0 {
		t.Fatalf("%d command and %d prose steps over every scenario: the scenarios no longer reach both", commands, prose)
	}
}

// eachOfflinePodScenario calls f with the findings of every scenario folder that asks about a
// pod, evaluated offline (offlineSnapshot).
func eachOfflinePodScenario(t *testing.T, f func(name string, findings []triage.Finding)) {
	t.Helper()
	for _, dir := range scenarioDirs(t) {
		sc, err := testenv.LoadScenarioDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Expected.Target != "" {
			continue
		}
		f(sc.Name, triage.Evaluate(offlineSnapshot(t, sc)).Findings)
	}
}

// checkFixSteps checks each fix entry of findings: a command (triage.ParseFixStep), or one line
// of prose that runs no command into a sentence (": kubectl …", "(kubectl …)", "then kubectl
// …"), which would be neither pasteable nor readable: such an entry is split into its prose and
// its command. It returns how many entries were commands and how many prose.
func checkFixSteps(t *testing.T, name string, findings []triage.Finding) (commands, prose int) {
	t.Helper()
	for _, f := range findings {
		for _, e := range f.Fix {
			if triage.ParseFixStep(e).Command != "" {
				commands++
				continue
			}
			prose++
			if m := reEmbeddedCommand.FindString(e); m != "" {
				t.Errorf("%s: %s fix %q runs a command into prose (%q): split it into the prose and the command", name, f.Code, e, m)
			}
			if strings.Contains(e, "\n") {
				t.Errorf("%s: %s fix %q spans lines", name, f.Code, e)
			}
		}
	}
	return commands, prose
}

// reEmbeddedCommand finds a command run into a prose step: after a colon, an opening
// parenthesis or "then", a program a fix entry may start with.
var reEmbeddedCommand = regexp.MustCompile(`(?:: |\(|\bthen:? )(?:kubectl|oc|calicoctl|whypending|crane|docker|kind|minikube|k3d|crictl|ctr|systemctl|journalctl) `)
