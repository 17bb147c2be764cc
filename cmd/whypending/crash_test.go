package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// The crash test runs the release in a child process (this test binary, running
// TestCrashChild) and kills it with SIGKILL after its first block write.
const (
	crashChildKubeconfig = "WHYPENDING_CRASH_CHILD_KUBECONFIG"
	crashChildPlan       = "WHYPENDING_CRASH_CHILD_PLAN"
	crashStoreNS         = "whypending"
	crashPlanRef         = "slack:C0OPS/1700000000.000100"
)

var (
	crashAlice  = chat.Principal{Platform: "slack", Team: "T1", ID: "U0ALICE", Name: "alice"}
	crashBob    = chat.Principal{Platform: "slack", Team: "T1", ID: "U0BOB", Name: "bob"}
	crashPolicy = approval.Policy{Approvers: map[string]approval.Approvers{"slack": {Users: []string{"U0BOB"}}}, TwoPersonRule: true, Expiry: 15 * time.Minute}
)

// crashRunner is the runner serve builds for cluster "test" with the store namespace
// crashStoreNS: the same lock owner, so serve recognises the lock.
func crashRunner(ipam *calico.Client) *actions.Runner {
	return &actions.Runner{Cluster: "test", IPAM: ipam, LockPolicy: actions.LockAlways, LockTTL: 2 * time.Minute,
		LockOwner: "whypending-bot:" + crashStoreNS}
}

// TestCrashChild approves and executes the plan named by $WHYPENDING_CRASH_CHILD_PLAN, as the
// bot would, through a slow client (2 requests per second) so that the parent can kill it
// mid-release. It is skipped unless TestCrashMidReleaseIsRecovered started it.
func TestCrashChild(t *testing.T) {
	kubeconfig := os.Getenv(crashChildKubeconfig)
	if kubeconfig == "" {
		t.Skip("the helper process of TestCrashMidReleaseIsRecovered")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	slow := rest.CopyConfig(cfg)
	slow.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(2, 1)
	ipam, err := calico.NewClient(t.Context(), slow)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ap := approval.New(approval.Options{Store: approval.NewCRDStore(dyn, crashStoreNS), Policy: crashPolicy,
		Executors: map[string]approval.Executor{"test": crashRunner(ipam)}, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	out := ap.Decide(t.Context(), approval.Decision{PlanID: os.Getenv(crashChildPlan), Verdict: approval.VerdictApprove, Principal: crashBob}, nil)
	t.Errorf("the release finished before it was killed: %+v", out)
}

// TestCrashMidReleaseIsRecovered kills the bot process executing a release of leaked IPs
// (SIGKILL after its first IPAMBlock write, datastore locked, RemediationRequest Running) on
// the real control plane. The next start of serve marks the plan Interrupted with what it
// had done, the datastore is unlocked, the plan message says to re-plan, no address in use
// was released, and a fresh plan, approved in Slack, finishes the job.
func TestCrashMidReleaseIsRecovered(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	installStore(t, c, crashStoreNS)
	ctx := t.Context()
	ipam, err := calico.NewClient(ctx, c.Config)
	if err != nil {
		t.Fatal(err)
	}
	store := approval.NewCRDStore(c.Dynamic, crashStoreNS)
	plan, err := crashRunner(ipam).Plan(ctx, actions.KindReleaseLeakedIPs, actions.PlanOptions{})
	if err != nil || len(plan.Items) != 181 {
		t.Fatalf("plan = %d items, %v; want 181", len(plan.Items), err)
	}
	ap := approval.New(approval.Options{Store: store, Policy: crashPolicy, Log: slog.New(slog.DiscardHandler)})
	req, err := ap.Request(ctx, plan, crashAlice, "C0OPS")
	if err != nil {
		t.Fatal(err)
	}
	if err := ap.Attach(ctx, req.Plan.ID, crashPlanRef); err != nil {
		t.Fatal(err)
	}

	child := killAfterFirstBlockWrite(t, c, req.Plan.ID)

	t.Run("the kill left the plan Running and the datastore locked part way", func(t *testing.T) {
		rr, err := store.Get(ctx, req.Plan.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rr.State != approval.StateRunning || rr.Heartbeat == nil || rr.Heartbeat.Process.PID != child {
			t.Errorf("plan state %s, heartbeat %+v; want Running, claimed by pid %d", rr.State, rr.Heartbeat, child)
		}
		s, err := ipam.LockStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Ready || s.Marker == nil || s.Marker.PID != child || !strings.HasSuffix(s.Marker.Operation, req.Plan.ID) {
			t.Errorf("datastore lock = %+v (marker %+v); want locked by pid %d for the plan", s, s.Marker, child)
		}
	})
	leaked := leakedIPs(t, ipam)
	if leaked == 0 || leaked == 181 {
		t.Fatalf("leaked IPs after the kill = %d, want some released and some left", leaked)
	}
	t.Logf("the kill came after %d of 181 planned IPs were released", 181-leaked)

	s := startServe(t, fmt.Sprintf(`listen: 127.0.0.1:0
clusters: [{name: test, kubeconfig: %s}]
approvals: {approvers: {users: [U0BOB]}}
store: {namespace: %s}
`, c.KubeconfigPath, crashStoreNS))

	t.Run("the next start marks the plan Interrupted with what it had done", func(t *testing.T) {
		var rr *approval.Record
		waitUntil(t, 60*time.Second, "the plan to be marked Interrupted", func() bool {
			rr, err = store.Get(ctx, req.Plan.ID)
			return err == nil && rr.State == approval.StateInterrupted
		})
		want := actions.Recovery{Planned: 181, Remaining: leaked}
		if rr.Recovery == nil || *rr.Recovery != want {
			t.Errorf("recovery = %+v, want %+v", rr.Recovery, want)
		}
		last := rr.History[len(rr.History)-1]
		wantDetail := fmt.Sprintf("bot process %d on ", child)
		if last.Event != approval.AuditInterrupted || !strings.Contains(last.Detail, wantDetail) || !strings.Contains(last.Detail, "is gone") {
			t.Errorf("last history record = %+v, want interrupted naming pid %d", last, child)
		}
	})
	t.Run("the datastore is unlocked", func(t *testing.T) {
		st, err := ipam.LockStatus(ctx)
		if err != nil || !st.Ready || st.Marker != nil {
			t.Errorf("datastore = %+v, %v; want unlocked with no marker", st, err)
		}
	})
	t.Run("the plan message is updated and says to re-plan", func(t *testing.T) {
		const channel, ts = "C0OPS", "1700000000.000100" // crashPlanRef
		waitUntil(t, 30*time.Second, "chat.update of the plan message", func() bool { return s.slack.lastUpdate(ts) != "" })
		u := s.slack.updates(ts)[0]
		if u.Channel != channel || !strings.Contains(u.Text, "Interrupted") {
			t.Errorf("chat.update of %s/%s = %q, want the plan message, Interrupted", u.Channel, ts, u.Text)
		}
		blocks, _ := json.Marshal(u.Blocks)
		for _, want := range []string{"Re-plan to finish the job: /ipam release-ips --cluster test", fmt.Sprintf("%d are still to do", leaked), "Make a fresh plan"} {
			if !strings.Contains(string(blocks), want) {
				t.Errorf("updated message lacks %q:\n%s", want, blocks)
			}
		}
	})
	t.Run("no address in use was released", func(t *testing.T) {
		assertInUseAllocated(t, c, ipam)
	})
	t.Run("a fresh plan, approved in Slack, finishes the job", func(t *testing.T) {
		s.client.command(t, "U0ALICE", "/ipam", "release-ips")
		msg, approve := s.slack.plan(t, map[string]bool{})
		id := approve.Value
		fresh, err := store.Get(ctx, id)
		if err != nil || len(fresh.Plan.Items) != leaked {
			t.Fatalf("fresh plan %s = %v, %v; want one of the %d IPs left", id, fresh, err, leaked)
		}
		s.client.click(t, "U0BOB", msg.TS, approve)
		var rr *approval.Record
		waitUntil(t, 120*time.Second, "the fresh plan to finish", func() bool {
			rr, err = store.Get(ctx, id)
			return err == nil && rr.State.Final()
		})
		if rr.State != approval.StateSucceeded || rr.Result.Done != leaked || rr.Result.Remaining != 0 {
			t.Errorf("fresh plan = %s, result %+v; want Succeeded, %d released, 0 remaining", rr.State, rr.Result, leaked)
		}
		if n := leakedIPs(t, ipam); n != 0 {
			t.Errorf("leaked IPs = %d, want 0", n)
		}
		assertInUseAllocated(t, c, ipam)
	})
	t.Run("the handles the kill left behind can be deleted with a plan", func(t *testing.T) {
		// The killed run wrote blocks but never got to their handles: exactly those are leaked.
		r := crashRunner(ipam)
		r.HandleGracePeriod = -1
		p, err := r.Plan(ctx, actions.KindReleaseLeakedHandles, actions.PlanOptions{})
		if err != nil || len(p.Items) != 181-leaked {
			t.Fatalf("leaked-handle plan = %d items, %v; want %d", len(p.Items), err, 181-leaked)
		}
		p.ExpiresAt = time.Now().Add(time.Minute)
		if res, err := r.Execute(ctx, actions.Approved{Plan: p, By: crashBob.String(), At: time.Now()}); err != nil || res.Done != len(p.Items) || res.Remaining != 0 {
			t.Errorf("delete leaked handles = done %d remaining %d, %v; want %d, 0", res.Done, res.Remaining, err, len(p.Items))
		}
		check, err := ipam.Check(ctx, calico.CheckOptions{})
		if err != nil || check.Problems != 0 {
			t.Errorf("check afterwards = %d problems, %v; want none", check.Problems, err)
		}
	})
}

// killAfterFirstBlockWrite starts TestCrashChild on the plan and kills it (SIGKILL) as soon
// as a watch sees its first IPAMBlock write. It returns the child's PID, reaped.
func killAfterFirstBlockWrite(t *testing.T, c *testenv.Cluster, planID string) int {
	t.Helper()
	ctx := t.Context()
	blocks := c.Dynamic.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamblocks"})
	list, err := blocks.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := blocks.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
	cmd.Env = append(os.Environ(), crashChildKubeconfig+"="+c.KubeconfigPath, crashChildPlan+"="+planID)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	timeout := time.After(2 * time.Minute)
	for killed := false; !killed; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified || ev.Type == watch.Deleted {
				_ = cmd.Process.Kill()
				killed = true
			}
		case err := <-exited:
			t.Fatalf("the child exited (%v) before its first block write:\n%s", err, out.String())
		case <-timeout:
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("no block write within 2 minutes:\n%s", out.String())
		}
	}
	<-exited
	if strings.Contains(out.String(), "the release finished") {
		t.Fatalf("the child finished the release before the kill:\n%s", out.String())
	}
	return cmd.Process.Pid
}

// updates returns the chat.update calls of the message at ts.
func (f *fakeSlack) updates(ts string) []slackMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []slackMessage
	for _, m := range f.messages {
		if m.Method == "chat.update" && m.TS == ts {
			out = append(out, m)
		}
	}
	return out
}

// leakedIPs counts the leaked IPs a fresh check finds.
func leakedIPs(t *testing.T, ipam *calico.Client) int {
	t.Helper()
	res, err := ipam.Check(t.Context(), calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.LeakedIPs)
}

// assertInUseAllocated checks against the live pods that every address a pod uses is still
// allocated (no release freed an address in use), and that the check finds no address in use
// without an allocation (pods, node tunnels).
func assertInUseAllocated(t *testing.T, c *testenv.Cluster, ipam *calico.Client) {
	t.Helper()
	res, err := ipam.Check(t.Context(), calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocated := map[string]bool{}
	for _, a := range res.Allocations {
		allocated[a.IP] = true
	}
	pods, err := c.Client.CoreV1().Pods("").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inUse := 0
	for _, p := range pods.Items {
		if p.Spec.HostNetwork {
			continue // the node's address, not Calico's
		}
		for _, ip := range p.Status.PodIPs {
			inUse++
			if !allocated[ip.IP] {
				t.Errorf("pod %s/%s uses %s, which is no longer allocated", p.Namespace, p.Name, ip.IP)
			}
		}
	}
	if inUse < 74 || len(res.InUseNotAllocated) != 0 {
		t.Errorf("pod addresses checked = %d (want at least the scenario's 74), in use but not allocated = %v", inUse, res.InUseNotAllocated)
	}
}
