package triage

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestParseFixStep(t *testing.T) {
	for _, tt := range []struct {
		name, entry string
		want        FixStep
	}{
		{"a kubectl line", "kubectl describe node a   # see Allocated resources", FixStep{Command: "kubectl describe node a   # see Allocated resources"}},
		{"a whypending line", "whypending ipam check", FixStep{Command: "whypending ipam check"}},
		{"an image tool's line", "crane ls exampleorg/app  # or: docker manifest inspect exampleorg/app:1", FixStep{Command: "crane ls exampleorg/app  # or: docker manifest inspect exampleorg/app:1"}},
		{"a command for a node's shell", "On node-1: crictl pull kind-registry:5000/shop/checkout:1.8.2",
			FixStep{Command: "crictl pull kind-registry:5000/shop/checkout:1.8.2", Node: "node-1"}},
		{"prose on a node is prose", "On node-1: install the client tools (nfs-common or nfs-utils for NFS), then the kubelet's next retry mounts it.",
			FixStep{Text: "On node-1: install the client tools (nfs-common or nfs-utils for NFS), then the kubelet's next retry mounts it."}},
		{"a sentence", "Or add a node with at least 500m allocatable cpu (or let the cluster autoscaler add one).",
			FixStep{Text: "Or add a node with at least 500m allocatable cpu (or let the cluster autoscaler add one)."}},
		{"a sentence that names kubectl later", "Create Secret s in namespace shop with the keys the container reads, with kubectl create secret generic s -n shop and --from-literal=KEY=VALUE",
			FixStep{Text: "Create Secret s in namespace shop with the keys the container reads, with kubectl create secret generic s -n shop and --from-literal=KEY=VALUE"}},
		{"a word that only begins like a command", "kubectlx get pods", FixStep{Text: "kubectlx get pods"}},
		{"On without a node", "On : ls /", FixStep{Text: "On : ls /"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseFixStep(tt.entry); got != tt.want {
				t.Errorf("ParseFixStep(%q) = %+v, want %+v", tt.entry, got, tt.want)
			}
		})
	}
}

// reNodeStep finds the first word after "On %s: " in a rule's format string.
var reNodeStep = regexp.MustCompile(`"On %s: ([a-z][a-z0-9-]*) `)

// TestNodeStepsStartWithAKnownCommand reads the rules' sources for fix entries "On NODE: …":
// the word after the colon is a command ParseFixStep knows (commandWords), or one of the verbs
// of the node steps that are prose. A new program there is added to commandWords, else its
// line would be shown as prose instead of in a code block.
func TestNodeStepsStartWithAKnownCommand(t *testing.T) {
	prose := map[string]bool{"check": true, "install": true}
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".go") || strings.HasSuffix(f.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reNodeStep.FindAllStringSubmatch(string(b), -1) {
			seen++
			if !commandWords[m[1]] && !prose[m[1]] {
				t.Errorf("%s: a fix entry \"On NODE: %s …\": %s is neither in commandWords nor a prose verb", f.Name(), m[1], m[1])
			}
		}
	}
	if seen == 0 {
		t.Fatal(`no fix entry "On NODE: …" in the rules' sources: the pattern no longer matches them`)
	}
}
