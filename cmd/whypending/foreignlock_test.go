package main

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/adapters/console"
	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/fleet"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

// lockAsCalicoctl sets ClusterInformation default spec.datastoreReady=false with no
// whypending marker, under the field manager "calicoctl", as `calicoctl datastore migrate
// lock` leaves it.
func lockAsCalicoctl(t *testing.T, c *testenv.Cluster) {
	t.Helper()
	res := c.Dynamic.Resource(schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "clusterinformations"})
	obj, err := res.Get(t.Context(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(obj.Object, false, "spec", "datastoreReady"); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(t.Context(), obj, metav1.UpdateOptions{FieldManager: "calicoctl"}); err != nil {
		t.Fatal(err)
	}
}

// TestForeignLockIsNeverLiftedSilently is issue 22 item 4 for the bot: a datastore lock that
// carries no whypending marker (calicoctl's) gets an /ipam unlock plan that says who set it,
// since when, and that it may belong to calicoctl or an upgrade; with the two-person rule off,
// the requester still cannot approve it alone; a second approver can. Before, the plan showed
// only "ClusterInformation default" and one approval unlocked it.
func TestForeignLockIsNeverLiftedSilently(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	lockAsCalicoctl(t, c)
	ipam := calicoClient(t, c)

	fc := fleet.New(fleet.Options{Name: "test", Config: func() (*rest.Config, error) { return rest.CopyConfig(c.Config), nil },
		Timing: fleet.DefaultTiming, Lock: fleet.Lock{Policy: actions.LockAlways, Owner: "whypending-bot:test"}, Log: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	fl := fleet.Start(ctx, []*fleet.Cluster{fc})
	t.Cleanup(func() { cancel(); fl.Wait() })
	waitUntil(t, 2*time.Minute, "the cluster to connect", func() bool { return fc.Ready(ctx) == nil })
	core := bot.New(bot.Options{Clusters: []*bot.Cluster{botCluster(fc, "default")},
		Policy: approval.Policy{Approvers: map[string]approval.Approvers{"console": {Users: []string{"alice", "bob"}}}}, Log: slog.New(slog.DiscardHandler)})
	session := console.NewSession(core, "alice")

	plan := session.Handle(ctx, "/ipam unlock")
	text := renderText(t, plan)
	t.Logf("the unlock plan:\n%s", text)
	for _, want := range []string{"Held by", "no whypending marker", `datastoreReady set to false by "calicoctl" at `,
		"may belong to calicoctl", "Calico upgrade in progress", "Another approver must approve", "The requester cannot approve their own plan"} {
		if !strings.Contains(text, want) {
			t.Errorf("the unlock plan does not say %q:\n%s", want, text)
		}
	}

	approve := func() string {
		for i, b := range plan[0].Buttons {
			if b.ActionID == chat.ActionApprove {
				return renderText(t, session.Handle(ctx, "/click "+strconv.Itoa(i+1)+" confirm"))
			}
		}
		t.Fatalf("the plan has no Approve button:\n%s", text)
		return ""
	}
	if out := approve(); !strings.Contains(out, "another approver must approve it") {
		t.Errorf("alice approving her own unlock of a foreign lock: %s", out)
	}
	if s, err := ipam.LockStatus(ctx); err != nil || s.Ready {
		t.Fatalf("after the requester's own approval, lock status = %+v, %v; want still locked", s, err)
	}
	session.Handle(ctx, "/as bob")
	if out := approve(); !strings.Contains(out, "Done") {
		t.Errorf("bob approving: %s", out)
	}
	if s, err := ipam.LockStatus(ctx); err != nil || !s.Ready {
		t.Errorf("after a second approver's approval, lock status = %+v, %v; want unlocked", s, err)
	}
}

// renderText is the console rendering of messages.
func renderText(t *testing.T, ms []chat.Message) string {
	t.Helper()
	var b strings.Builder
	for _, m := range ms {
		if err := console.Render(&b, m); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestCLIMentionsAHeldLock is issue 22 item 4 for the CLI: ipam check, ipam show and
// why-pending say that the datastore is locked and by whom, and ipam lock warns that no pod
// can get an address while it is held.
func TestCLIMentionsAHeldLock(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	kc := c.KubeconfigPath
	if out := mustRunIPAM(t, kc, "lock", "--owner", "alice", "--ttl", "5m"); !strings.Contains(out, "No pod can get or release an IP address until it is unlocked") {
		t.Errorf("ipam lock does not warn:\n%s", out)
	}
	const want = "The Calico datastore is locked (ClusterInformation default datastoreReady=false; alice (manual, since "
	for _, args := range [][]string{{"ipam", "check"}, {"ipam", "show"}, {"why-pending", "-n", "seed-ipam-leaked", "--all"}} {
		_, out, errOut := runCLI(t, append(args, "--kubeconfig", kc)...)
		if !strings.Contains(out+errOut, want) {
			t.Errorf("%s does not mention the lock:\n%s%s", strings.Join(args, " "), out, errOut)
		}
	}
	mustRunIPAM(t, kc, "unlock", "--owner", "alice")
	lockAsCalicoctl(t, c)
	_, out, errOut := runCLI(t, "ipam", "check", "--kubeconfig", kc)
	if !strings.Contains(out+errOut, `no whypending marker; datastoreReady set to false by "calicoctl"`) {
		t.Errorf("ipam check does not say a marker-less lock is held:\n%s%s", out, errOut)
	}
}

// TestRepairWithoutLockRefusesAHeldLock: `ipam release-ips --yes` without --lock (lock policy
// never) wrote to Calico IPAM while someone else held the datastore lock, calicoctl's (no
// marker) or another owner's. The plan now says the datastore is locked by whom and that the
// repair cannot run; the execution refuses with the holder and changes nothing.
func TestRepairWithoutLockRefusesAHeldLock(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	kc := c.KubeconfigPath
	ipam := calicoClient(t, c)
	before, err := ipam.Check(t.Context(), calico.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.LeakedIPs) == 0 {
		t.Fatal("the scenario has no leaked IP to release")
	}
	for _, tc := range []struct {
		name  string
		lock  func(t *testing.T)
		holds []string
	}{
		{"calicoctl", func(t *testing.T) { lockAsCalicoctl(t, c) }, []string{"no whypending marker", `set by "calicoctl" at `, "may be calicoctl or a Calico upgrade"}},
		{"another owner", func(t *testing.T) { mustRunIPAM(t, kc, "lock", "--owner", "someone-else", "--ttl", "5m") }, []string{"someone-else (manual, since "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.lock(t)
			defer mustRunIPAM(t, kc, "unlock", "--force")
			dry := mustRunIPAM(t, kc, "release-ips")
			for _, want := range append([]string{"The Calico datastore is locked by ", "this repair cannot run until it is unlocked"}, tc.holds...) {
				if !strings.Contains(dry, want) {
					t.Errorf("the plan does not say %q:\n%s", want, dry)
				}
			}
			out, err := runIPAM(t, kc, "release-ips", "--yes")
			if !errors.Is(err, actions.ErrDatastoreLocked) {
				t.Fatalf("release-ips --yes under a held lock: err = %v, want ErrDatastoreLocked\n%s", err, out)
			}
			msg := err.Error()
			for _, want := range append([]string{"nothing was changed", "whypending ipam check"}, tc.holds...) {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal does not say %q: %s", want, msg)
				}
			}
			if strings.Contains(out, "Released") || strings.Contains(out, "could not run") {
				t.Errorf("the refused repair printed a result:\n%s", out)
			}
			after, err := ipam.Check(t.Context(), calico.CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(after.LeakedIPs) != len(before.LeakedIPs) || len(after.LeakedHandles) != len(before.LeakedHandles) {
				t.Errorf("leaked IPs %d -> %d, handles %d -> %d: the refused repair wrote", len(before.LeakedIPs), len(after.LeakedIPs), len(before.LeakedHandles), len(after.LeakedHandles))
			}
			if s, err := ipam.LockStatus(t.Context()); err != nil || s.Ready {
				t.Errorf("lock status = %+v, %v; want still locked", s, err)
			}
		})
	}
}

// TestLockTwiceSaysItIsYours: `ipam lock` while this owner's lock is held said "locked by
// someone else … (pid 0 …)". It now says the datastore is already locked by this owner,
// since when, and how to unlock it.
func TestLockTwiceSaysItIsYours(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	kc := c.KubeconfigPath
	mustRunIPAM(t, kc, "lock", "--ttl", "5m")
	defer mustRunIPAM(t, kc, "unlock")
	out, err := runIPAM(t, kc, "lock", "--ttl", "5m")
	if !errors.Is(err, calico.ErrDatastoreLocked) {
		t.Fatalf("a second ipam lock: err = %v, want ErrDatastoreLocked\n%s", err, out)
	}
	msg := err.Error()
	for _, want := range []string{"already locked by this owner, whypending-cli:", "(manual, since ", "on host ", "whypending ipam unlock"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q: %s", want, msg)
		}
	}
	for _, bad := range []string{"someone else", "pid 0"} {
		if strings.Contains(msg, bad) {
			t.Errorf("the refusal says %q: %s", bad, msg)
		}
	}
}
