package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/whypending/whypending"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
	"github.com/whypending/whypending/triage"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// runCLI runs the CLI in-process and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestWhyPendingAgainstRealCluster(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{Scheduler: true})
	s := testcluster.Load(t, c, "seed-frontend-cpu")
	ns, name, _ := strings.Cut(s.Expected.Pod, "/")
	if err := c.WaitForScheduler(t.Context(), ns, name); err != nil {
		t.Fatal(err)
	}

	t.Run("json output names the primary cause and the node table", func(t *testing.T) {
		code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", c.KubeconfigPath, "-n", ns, name, "-o", "json")
		if code != 0 {
			t.Fatalf("exit code = %d, want 0; stderr: %s", code, errOut)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode -o json: %v\n%s", err, out)
		}
		if got, want := d.Findings[0].Code, triage.Code(s.Expected.Code); got != want {
			t.Errorf("findings[0].code = %q, want %q", got, want)
		}
		if got, want := len(d.Findings[0].Nodes), 3; got != want {
			t.Errorf("node verdicts = %d, want %d", got, want)
		}
		for _, v := range d.Findings[0].Nodes {
			if v.Fits {
				t.Errorf("node %s fits, want every node rejected (the scheduler says 0/3)", v.Node)
			}
		}
	})

	t.Run("text output leads with the cause and carries the scheduler's message", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", c.KubeconfigPath, ns+"/"+name)
		if code != 0 {
			t.Fatalf("exit code = %d, want 0", code)
		}
		first := strings.SplitN(out, "\n", 2)[0]
		if !strings.Contains(first, "insufficient-cpu") {
			t.Errorf("first line = %q, want the primary code in it", first)
		}
		if !strings.Contains(out, s.Expected.ExpectSchedulerMessage) {
			t.Errorf("output lacks the scheduler's message %q:\n%s", s.Expected.ExpectSchedulerMessage, out)
		}
	})

	t.Run("unknown pod exits 2 and suggests the closest names", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", c.KubeconfigPath, "-n", ns, "frontnd", "-o", "json")
		if code != exitPodNotFound {
			t.Fatalf("exit code = %d, want %d", code, exitPodNotFound)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if got := d.Findings[0].Code; got != triage.CodePodNotFound {
			t.Errorf("code = %q, want pod-not-found", got)
		}
		if !strings.Contains(d.Summary, ns+"/frontend") {
			t.Errorf("summary = %q, want it to suggest %s/frontend", d.Summary, ns)
		}
	})

	t.Run("a name close to nothing gets no suggestion, and the fix quotes it", func(t *testing.T) {
		code, out, _ := runCLI(t, "why-pending", "--kubeconfig", c.KubeconfigPath, "-n", ns, "zz-nothing-like-it", "-o", "json")
		if code != exitPodNotFound {
			t.Fatalf("exit code = %d, want %d", code, exitPodNotFound)
		}
		var d triage.Diagnosis
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if strings.Contains(d.Summary, "Did you mean") {
			t.Errorf("summary = %q, want no suggestion for an unrelated name", d.Summary)
		}
	})

	// Names no pod can have are refused before any request, with exit 1 and one line that
	// says which part is wrong; nothing is printed as a command to paste.
	for _, args := range [][]string{
		{"-n", "BAD NS", "x"},
		{"<!channel>"},
		{"shop/web;rm -rf ~"},
		{"-n", "shop", "Web-Upper"},
	} {
		t.Run("invalid input "+strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(t, append([]string{"why-pending", "--kubeconfig", c.KubeconfigPath}, args...)...)
			if code != 1 {
				t.Errorf("exit code = %d, want 1", code)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing (no suggested command)", out)
			}
			if !strings.Contains(errOut, "is not a valid") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("stderr = %q, want one line saying the name is not valid", errOut)
			}
		})
	}
}

func TestWhyPendingUnreachableServerIsOneLine(t *testing.T) {
	kubeconfig := t.TempDir() + "/config"
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: nowhere, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: nowhere, context: {cluster: nowhere, user: u}}]
current-context: nowhere
users: [{name: u, user: {token: not-a-secret}}]
`)
	code, out, errOut := runCLI(t, "why-pending", "--kubeconfig", kubeconfig, "web")
	if code != 1 {
		t.Errorf("exit code = %d, want 1", code)
	}
	if out != "" {
		t.Errorf("stdout = %q, want nothing", out)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "https://127.0.0.1:1") {
		t.Errorf("stderr = %q, want one line naming https://127.0.0.1:1", errOut)
	}
	if strings.Contains(errOut, "not-a-secret") {
		t.Errorf("stderr leaks the token: %q", errOut)
	}
}

func TestWhyPendingWithoutKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", t.TempDir()+"/missing")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	code, _, errOut := runCLI(t, "why-pending", "web")
	if code != 1 || !strings.Contains(errOut, "no kubeconfig found") {
		t.Errorf("exit %d, stderr %q; want 1 and 'no kubeconfig found'", code, errOut)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDemoWithoutTerminal runs README command 1 the way CI and a pipe run it: every scenario
// answered, then the approval flow on the leaked-IP scenario, then the piped commands.
func TestDemoWithoutTerminal(t *testing.T) {
	var out, progress bytes.Buffer
	stdin := strings.NewReader("/why-pending seed-frontend-cpu/nosuchpod\n/why-pending nosuchns/frontend\n/ipam check --cluster seed-ipam-leaked\n/kubeconfig seed-ipam-leaked\n")
	err := runDemo(t.Context(), whypending.Scenarios, "testdata/scenarios", []string{"seed-frontend-cpu", "seed-ipam-leaked", "workload-quota"}, 2, nil, stdin, &out, &progress)
	if err != nil {
		t.Fatalf("runDemo: %v\nprogress:\n%s", err, progress.String())
	}
	got := out.String()
	for _, want := range []string{
		"seed-frontend-cpu/frontend is Pending: insufficient-cpu",
		"0/3 nodes are available: 3 Insufficient cpu.",
		"seed-ipam-leaked/shop-7frd7stjbt-2kq8r is ContainerCreating: calico-ipam-exhausted",
		"another approver must approve it (two-person rule). Nothing was changed.",
		"released 181 of 181 leaked IPs on seed-ipam-leaked",
		"0 leaked IPs remain",
		"seed-frontend-cpu/nosuchpod: pod not found",
		`no demo cluster has namespace "nosuchns"`,
		"Deployment workload-quota/checkout: resource-quota-exceeded",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// Each scenario's kubeconfig is printed when its cluster is ready, and /kubeconfig gives it.
	m := regexp.MustCompile(`demo: seed-ipam-leaked +ready \([^)]*\)  KUBECONFIG=(\S+)`).FindStringSubmatch(progress.String())
	if m == nil {
		t.Errorf("progress does not give seed-ipam-leaked's kubeconfig:\n%s", progress.String())
	} else if !strings.Contains(got, "KUBECONFIG="+m[1]) {
		t.Errorf("/kubeconfig seed-ipam-leaked does not answer %s", m[1])
	}
	if n := strings.Count(got, "Calico IPAM on seed-ipam-leaked: no problems found"); n != 2 {
		t.Errorf("clean checks after the repair = %d, want 2 (scripted and piped)\n%s", n, got)
	}
}

// TestDemoRendersForDiscord shows an answer the way Discord receives it: the request bodies
// as JSON, with the embed, the node table in a code block and no mentions allowed.
func TestDemoRendersForDiscord(t *testing.T) {
	var out, progress bytes.Buffer
	err := runDemo(t.Context(), whypending.Scenarios, "testdata/scenarios", []string{"seed-frontend-cpu"}, 1,
		demoRenderers["discord"], strings.NewReader(""), &out, &progress)
	if err != nil {
		t.Fatalf("runDemo: %v\nprogress:\n%s", err, progress.String())
	}
	got := out.String()
	start := strings.Index(got, "alice> /why-pending seed-frontend-cpu/frontend\n")
	if start < 0 {
		t.Fatalf("demo output lacks the scripted question:\n%s", got)
	}
	var bodies []struct {
		Embeds []struct {
			Title  string
			Color  int
			Fields []struct{ Name, Value string }
		}
		AllowedMentions struct{ Parse []string } `json:"allowed_mentions"`
	}
	dec := json.NewDecoder(strings.NewReader(got[start+len("alice> /why-pending seed-frontend-cpu/frontend\n"):]))
	if err := dec.Decode(&bodies); err != nil || len(bodies) == 0 || len(bodies[0].Embeds) != 1 {
		t.Fatalf("answer is not Discord JSON (%v):\n%s", err, got)
	}
	e := bodies[0].Embeds[0]
	if e.Title != "seed-frontend-cpu/frontend is Pending: insufficient-cpu" || e.Color == 0 || bodies[0].AllowedMentions.Parse == nil {
		t.Errorf("first embed = %q colour %#x, allowed_mentions %+v", e.Title, e.Color, bodies[0].AllowedMentions)
	}
	table := false
	for _, f := range e.Fields {
		table = table || (f.Name == "Why not here (per node)" && strings.HasPrefix(f.Value, "```\nNODE"))
	}
	if !table {
		t.Errorf("no per-node table in a code block: %+v", e.Fields)
	}
}
