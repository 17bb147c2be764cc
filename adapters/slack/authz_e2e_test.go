package slack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/chattest"
)

// People of the authorization e2e test, besides alice (mapped to chattest.RequesterUser) and
// bob (in SOPS, mapped to group chattest.SREGroup).
const (
	dev    = "UDEV"    // an approver in the config, mapped to chattest.DevUser: get pods in the scenario's namespace only
	nobody = "UNOBODY" // mapped to nothing; their profile's email is not verified
	erin   = "UERIN"   // mapped by the verified email of her profile, chattest.DevUser's
)

const (
	scenarioNS = "seed-ipam-leaked"
	stuck      = scenarioNS + "/shop-7frd7stjbt-2kq8r"
	// hiddenPod is in chattest.HiddenNamespace, one letter from the scenario's pod.
	hiddenPod = "shop-7frd7stjbt-2kq8x"
)

// TestE2EAuthorization runs per-user authorization (mode all) over Slack against the real API
// server's RBAC, with real Roles and RoleBindings (chattest.InstallRBAC): the developer may
// ask about the scenario's namespace but not about payments, and learns nothing of payments
// (no suggestion of its pod); an unmapped person is told what is missing; the developer may
// neither plan nor approve a repair, though the config lists them as an approver, and is told
// the verb; bob, through group sre, approves alice's plan and the repair runs; the
// RemediationRequest records the identities checked; every refusal is ephemeral, posts
// nothing in the channel and is audited; a RoleBinding removed mid-session takes effect
// within the TTL.
func TestE2EAuthorization(t *testing.T) {
	const ttl = 3 * time.Second
	var logs chattest.LogBuffer
	reg := prometheus.NewRegistry()
	metrics := authz.NewMetrics(reg)
	rv := &chattest.SwitchReviewer{}
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", approvers: []string{dev}, log: logs.Logger(),
		authz: &authz.Options{Mode: authz.ModeAll, TTL: ttl, Metrics: metrics, Clusters: map[string]authz.Reviewer{chattest.ClusterName: rv}, Mappings: map[string]authz.Mapping{"slack": {
			Users: map[string]authz.Identity{
				alice: {User: chattest.RequesterUser},
				dev:   {User: chattest.DevUser},
			},
			Groups:        map[string][]string{opsGroup: {chattest.SREGroup}},
			VerifiedEmail: true, EmailDomains: []string{"example.com"},
		}}}})
	e.slack.mu.Lock()
	e.slack.emails = map[string]string{erin: chattest.DevUser}
	e.slack.mu.Unlock()
	rv.Set(e.Reviewer())
	e.InstallRBAC(t, scenarioNS, hiddenPod)

	// refused checks that a command's answer is the ephemeral refusal want, and that
	// nothing was posted in the channel.
	refused := func(t *testing.T, user, command, text, want string) {
		t.Helper()
		postsBefore, _ := e.slack.snapshot()
		_, ack, path := e.command(t, user, command, text)
		got := e.answer(t, path)
		if got.ResponseType != "ephemeral" || !strings.Contains(blocksText(got.Blocks)+got.Text, want) {
			t.Errorf("%s %s %s: ack %q, answer (%s) %q\n%s\nwant an ephemeral refusal with %q", user, command, text, ack, got.ResponseType, got.Text, blocksText(got.Blocks), want)
		}
		if strings.Contains(blocksText(got.Blocks)+got.Text, hiddenPod) {
			t.Errorf("the refusal names the pod %s", hiddenPod)
		}
		if posts, _ := e.slack.snapshot(); len(posts) != len(postsBefore) {
			t.Errorf("%s %s: %d messages posted in the channel, want none", command, text, len(posts)-len(postsBefore))
		}
	}

	t.Run("the developer may ask about their namespace", func(t *testing.T) {
		_, _, path := e.command(t, dev, "/why-pending", stuck)
		got := e.answer(t, path)
		if got.ResponseType != "in_channel" || !strings.Contains(blocksText(got.Blocks), "calico-ipam-exhausted") {
			t.Errorf("answer (%s):\n%s\nwant the in-channel diagnosis", got.ResponseType, blocksText(got.Blocks))
		}
	})
	t.Run("the developer may not ask about payments, and learns nothing of it", func(t *testing.T) {
		refused(t, dev, "/why-pending", chattest.HiddenNamespace+"/"+hiddenPod,
			"Kubernetes RBAC does not allow you to get pods in namespace payments on cluster test (checked as user dev@example.com). Nothing was done.")
		refused(t, dev, "/why-pending", "--all -n "+chattest.HiddenNamespace,
			"Kubernetes RBAC does not allow you to list pods in namespace payments on cluster test")
	})
	t.Run("a typo in the developer's namespace suggests no pod of payments", func(t *testing.T) {
		_, _, path := e.command(t, dev, "/why-pending", strings.TrimSuffix(stuck, "r"))
		got := e.answer(t, path)
		text := blocksText(got.Blocks) + got.Text
		if !strings.Contains(text, "shop-7frd7stjbt-2kq8r") {
			t.Errorf("answer:\n%s\nwant the close pod of the developer's namespace suggested", text)
		}
		if strings.Contains(text, hiddenPod) || strings.Contains(text, chattest.HiddenNamespace) {
			t.Errorf("answer names payments or its pod:\n%s", text)
		}
		// Someone who may read every namespace is shown it: the filter is RBAC's, not a rule
		// of its own.
		_, _, path = e.command(t, bob, "/why-pending", strings.TrimSuffix(stuck, "r"))
		if text := blocksText(e.answer(t, path).Blocks); strings.Contains(text, hiddenPod) {
			t.Logf("bob (get pods everywhere) is shown %s too", hiddenPod)
		} else {
			t.Errorf("bob's answer lacks %s, which he may read:\n%s", hiddenPod, text)
		}
	})
	t.Run("a sweep of an empty namespace names only the namespaces the developer may read", func(t *testing.T) {
		ask := func(user string) string {
			_, _, path := e.command(t, user, "/why-pending", "--all -n "+chattest.EmptyNamespace)
			return blocksText(e.answer(t, path).Blocks)
		}
		// bob may read every namespace: his answer names both namespaces with stuck pods.
		if text := ask(bob); !strings.Contains(text, scenarioNS) || !strings.Contains(text, chattest.HiddenNamespace) {
			t.Fatalf("bob's sweep of %s:\n%s\nwant %s and %s named as having stuck pods", chattest.EmptyNamespace, text, scenarioNS, chattest.HiddenNamespace)
		}
		text := ask(dev)
		if !strings.Contains(text, scenarioNS) || strings.Contains(text, chattest.HiddenNamespace) {
			t.Errorf("the developer's sweep of %s:\n%s\nwant %s named and %s not", chattest.EmptyNamespace, text, scenarioNS, chattest.HiddenNamespace)
		}
	})
	t.Run("an answer names another namespace's pod only to someone who may read it", func(t *testing.T) {
		pending := scenarioNS + "/" + e.HostPortConflict(t, scenarioNS, "worker-1")
		ask := func(user string) string {
			var text string
			chattest.WaitFor(t, 30*time.Second, "the host-port-conflict answer", func() bool {
				_, _, path := e.command(t, user, "/why-pending", pending)
				got := e.answer(t, path)
				text = blocksText(got.Blocks) + got.Text
				return strings.Contains(text, "host-port-conflict")
			})
			return text
		}
		if text := ask(bob); !strings.Contains(text, chattest.HiddenNamespace+"/"+chattest.HostPortHolder) {
			t.Errorf("bob (get pods everywhere):\n%s\nwant the holder %s/%s named", text, chattest.HiddenNamespace, chattest.HostPortHolder)
		}
		text := ask(dev)
		if strings.Contains(text, chattest.HostPortHolder) || strings.Contains(text, chattest.HiddenNamespace) {
			t.Errorf("the developer's answer names payments or its pod:\n%s", text)
		}
		if !strings.Contains(text, "held by a pod in a namespace you cannot read") {
			t.Errorf("the developer's answer:\n%s\nwant the holder called a pod in a namespace you cannot read", text)
		}
	})
	t.Run("a check that cannot be made is told to the asker alone", func(t *testing.T) {
		defer rv.Set(e.Reviewer())
		// The API server refuses the bot's SubjectAccessReview: its ServiceAccount lacks
		// create subjectaccessreviews. (A namespace not asked about before: decisions are cached
		// by identity, and erin is chattest.DevUser.)
		rv.Set(e.ReviewerAs(t, "system:serviceaccount:whypending:without-reviews"))
		refused(t, erin, "/why-pending", chattest.EmptyNamespace+"/web", "the bot's ServiceAccount may not create subjectaccessreviews.authorization.k8s.io there")
	})
	t.Run("an unmapped person is told what is missing", func(t *testing.T) {
		refused(t, nobody, "/why-pending", stuck,
			"You are not mapped to a Kubernetes user or group, so whypending cannot check what RBAC allows you; nothing was done. "+
				"Missing: Slack user UNOBODY is not in authorization.slack.users; you are in none of the Slack user groups in authorization.slack.groups; your Slack profile has no verified email.")
	})
	t.Run("a verified email is the Kubernetes user name", func(t *testing.T) {
		_, _, path := e.command(t, erin, "/why-pending", stuck)
		if got := e.answer(t, path); got.ResponseType != "in_channel" || !strings.Contains(blocksText(got.Blocks), "calico-ipam-exhausted") {
			t.Errorf("erin's answer (%s) %q, want the diagnosis: she is %s by her verified email", got.ResponseType, got.Text, chattest.DevUser)
		}
		refused(t, erin, "/why-pending", chattest.HiddenNamespace+"/"+hiddenPod, "(checked as user "+chattest.DevUser+")")
	})
	t.Run("the developer may not plan a repair", func(t *testing.T) {
		refused(t, dev, "/ipam", "release-ips",
			"Kubernetes RBAC does not allow you to update ipamblocks.crd.projectcalico.org (cluster-wide) on cluster test (checked as user dev@example.com). Nothing was done.")
	})

	_, _, _ = e.command(t, alice, "/ipam", "release-ips")
	plan, planID := e.planPost(t, 1)
	if rec := e.Record(t, planID); rec.RequestedAs == nil || rec.RequestedAs.User != chattest.RequesterUser {
		t.Fatalf("RemediationRequest requestedAs = %+v, want %s", rec.RequestedAs, chattest.RequesterUser)
	}

	t.Run("the developer's approval is refused, naming the verb", func(t *testing.T) {
		_, path := e.click(t, 0, dev, chat.ActionApprove, planID, plan.TS)
		got := e.answer(t, path)
		want := "Kubernetes RBAC does not allow you to update ipamblocks.crd.projectcalico.org (cluster-wide) on cluster test (checked as user dev@example.com). Nothing was done."
		if got.ResponseType != "ephemeral" || got.ReplaceOriginal || got.Text != want {
			t.Errorf("reply = %q (%s, replace %v), want the ephemeral %q", got.Text, got.ResponseType, got.ReplaceOriginal, want)
		}
		rec := e.Record(t, planID)
		last := rec.History[len(rec.History)-1]
		if rec.State != approval.StatePending || last.Event != approval.AuditRefused || last.As == nil || last.As.User != chattest.DevUser ||
			last.Denied == nil || last.Denied.Verb != "update" || last.Denied.Resource != "ipamblocks" {
			t.Errorf("record %s, last audit %+v (as %+v, denied %+v): want Pending and a refusal as %s denied update ipamblocks", rec.State, last, last.As, last.Denied, chattest.DevUser)
		}
		if updates := e.updatesOf(plan.TS); len(updates) != 0 {
			t.Errorf("plan message updated %d times by a refusal, want 0", len(updates))
		}
	})

	t.Run("bob, in group sre, approves and the repair runs", func(t *testing.T) {
		e.click(t, 0, bob, chat.ActionApprove, planID, plan.TS)
		chattest.WaitFor(t, 120*time.Second, "the final plan message", func() bool {
			updates := e.updatesOf(plan.TS)
			return len(updates) > 0 && strings.Contains(updates[len(updates)-1].Text, "Done:")
		})
		rec := e.Record(t, planID)
		if rec.State != approval.StateSucceeded || rec.DecidedAs == nil || strings.Join(rec.DecidedAs.Groups, ",") != chattest.SREGroup {
			t.Errorf("RemediationRequest %s decidedAs %+v, want Succeeded as group %s", rec.State, rec.DecidedAs, chattest.SREGroup)
		}
		if n := e.Leaked(t); n != 0 {
			t.Errorf("leaked IPs after the release = %d, want 0", n)
		}
	})

	t.Run("every refusal is audited with the denied verb", func(t *testing.T) {
		recs := chattest.AuditLines(t, logs.String(), "authorization refused")
		want := map[string]bool{"get pods payments": false, "list pods payments": false, "update ipamblocks ": false, "unmapped": false}
		for _, r := range recs {
			if r["reason"] == "unmapped" && strings.HasSuffix(r["actor"].(string), "/"+nobody) {
				want["unmapped"] = true
			}
			if strings.HasSuffix(r["actor"].(string), "/"+dev) && r["as"] == "user "+chattest.DevUser {
				want[r["verb"].(string)+" "+r["resource"].(string)+" "+r["namespace"].(string)] = true
			}
		}
		for k, found := range want {
			if !found {
				t.Errorf("no audit record of the refusal %q in:\n%s", k, logs.String())
			}
		}
	})

	t.Run("a RoleBinding removed mid-session takes effect within the TTL", func(t *testing.T) {
		// A fresh decision allows the developer, and is cached for the TTL.
		_, _, path := e.command(t, dev, "/why-pending", stuck)
		if got := e.answer(t, path); got.ResponseType != "in_channel" {
			t.Fatalf("before the removal: answer (%s) %q, want the diagnosis", got.ResponseType, got.Text)
		}
		if err := e.Cluster.Client.RbacV1().RoleBindings(scenarioNS).Delete(context.Background(), "dev-reads-pods", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		removed := time.Now()
		var took time.Duration
		for {
			_, _, path := e.command(t, dev, "/why-pending", stuck)
			if got := e.answer(t, path); got.ResponseType == "ephemeral" && strings.Contains(got.Text+blocksText(got.Blocks), "does not allow you to get pods in namespace "+scenarioNS) {
				took = time.Since(removed)
				break
			}
			if time.Since(removed) > ttl+10*time.Second {
				t.Fatalf("the developer is still answered %s after the RoleBinding was removed (TTL %s)", time.Since(removed), ttl)
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("the removal took effect after %s (TTL %s)", took.Round(10*time.Millisecond), ttl)
		if took > ttl+2*time.Second {
			t.Errorf("the removal took %s to take effect, want at most the TTL (%s) and the API server's informer lag", took, ttl)
		}
	})

	hits, misses := reviewCounts(t, reg)
	t.Logf("SubjectAccessReview decisions: %v from the cache, %v from the API server", hits, misses)
	if hits == 0 || misses == 0 {
		t.Errorf("cache hits %v, misses %v: want both counted", hits, misses)
	}
}

// reviewCounts sums whypending_authorization_reviews_total by source: decisions from the
// cache (hits) and from the API server (misses).
func reviewCounts(t *testing.T, reg *prometheus.Registry) (hits, misses float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "whypending_authorization_reviews_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				switch {
				case l.GetName() == "source" && l.GetValue() == "cache":
					hits += m.GetCounter().GetValue()
				case l.GetName() == "source" && l.GetValue() == "api":
					misses += m.GetCounter().GetValue()
				}
			}
		}
	}
	return hits, misses
}
