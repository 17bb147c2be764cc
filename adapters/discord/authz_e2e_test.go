package discord_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/bot/approval"
	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
)

// People of the authorization e2e test, besides alice (mapped to chattest.RequesterUser) and
// bob (holding opsRole, mapped to group chattest.SREGroup).
var (
	// dev is an approver in the config, mapped to chattest.DevUser: get pods in the
	// scenario's namespace only.
	dev = discordfake.Member{ID: "1600000000000000005", Name: "dev", Roles: []string{"1700000000000000009"}}
	// nobody is mapped to nothing.
	nobody = discordfake.Member{ID: "1600000000000000006", Name: "nobody", Roles: []string{"1700000000000000009"}}
)

// hiddenPod is in chattest.HiddenNamespace, one letter from the scenario's pod.
const hiddenPod = "shop-7frd7stjbt-2kq8x"

// TestE2EAuthorization runs per-user authorization (mode all) over the Discord interactions
// endpoint against the real API server's RBAC (chattest.InstallRBAC): a refused command is
// answered at once and ephemeral (a deferred response's visibility cannot change later), so
// nothing is posted in the channel; the developer may ask about the scenario's namespace but
// not about payments; an unmapped member is told what is missing; the developer may neither
// plan nor approve, and is told the verb; bob, through opsRole mapped to group sre, approves
// alice's plan and it runs; every refusal is audited.
//
// A check that cannot be made (the API server refuses the bot's SubjectAccessReview, or
// answers 503) is answered at once and ephemeral too, saying so; a decision that lapses
// between that early check and the command's own (its TTL ran out, a RoleBinding was
// removed) publishes nothing: the public deferred response is deleted and the refusal is an
// ephemeral follow-up.
func TestE2EAuthorization(t *testing.T) {
	var logs chattest.LogBuffer
	rv := &chattest.SwitchReviewer{}
	// The authorizer's clock: lapse makes it jump an hour (past any TTL) right after its next
	// reading, the one that caches the decision being made.
	var skew atomic.Int64
	var lapse atomic.Bool
	clock := func() time.Time {
		now := time.Now().Add(time.Duration(skew.Load()))
		if lapse.CompareAndSwap(true, false) {
			skew.Add(int64(time.Hour))
		}
		return now
	}
	e := newE2E(t, e2eOptions{scenario: "seed-ipam-leaked", approvers: []string{dev.ID}, log: logs.Logger(),
		authz: &authz.Options{Mode: authz.ModeAll, Clusters: map[string]authz.Reviewer{chattest.ClusterName: rv},
			Now: clock, Mappings: map[string]authz.Mapping{"discord": {
				Users: map[string]authz.Identity{
					alice.ID: {User: chattest.RequesterUser},
					dev.ID:   {User: chattest.DevUser},
				},
				Groups: map[string][]string{opsRole: {chattest.SREGroup}},
			}}}})
	rv.Set(e.Reviewer())
	e.InstallRBAC(t, "seed-ipam-leaked", hiddenPod)

	// refused checks that a command is answered at once, ephemeral, with want, and that
	// nothing else is sent for it.
	refused := func(t *testing.T, who discordfake.Member, data map[string]any, want string) {
		t.Helper()
		token, resp, raw := e.command(t, who, data)
		if resp.Type != discordgo.InteractionResponseChannelMessageWithSource || resp.Data == nil || resp.Data.Flags != discordgo.MessageFlagsEphemeral {
			t.Errorf("response = %s, want an immediate ephemeral message", raw)
		}
		if !strings.Contains(strings.ReplaceAll(raw, `\\`, ""), want) {
			t.Errorf("response = %s, want %q", raw, want)
		}
		if strings.Contains(raw, hiddenPod) {
			t.Errorf("the refusal names the pod %s", hiddenPod)
		}
		time.Sleep(100 * time.Millisecond)
		if calls := e.fake.CallsFor(token); len(calls) != 0 {
			t.Errorf("%d REST calls for a refused command, want none: %+v", len(calls), calls)
		}
	}

	t.Run("the developer may ask about their namespace", func(t *testing.T) {
		token, resp, raw := e.command(t, dev, discordfake.CommandData("why-pending", "", "pod", stuckPod))
		if resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || resp.Data.Flags != 0 {
			t.Fatalf("response = %s, want a public deferred response", raw)
		}
		if text := discordfake.MessageText(e.answer(t, token).Message); !strings.Contains(text, "calico-ipam-exhausted") {
			t.Errorf("answer:\n%s\nwant the diagnosis", text)
		}
	})
	t.Run("the developer may not ask about payments", func(t *testing.T) {
		refused(t, dev, discordfake.CommandData("why-pending", "", "pod", chattest.HiddenNamespace+"/"+hiddenPod),
			"Kubernetes RBAC does not allow you to get pods in namespace payments on cluster test (checked as user dev@example.com). Nothing was done.")
	})
	t.Run("an unmapped member is told what is missing", func(t *testing.T) {
		refused(t, nobody, discordfake.CommandData("why-pending", "", "pod", stuckPod),
			"Missing: Discord user "+nobody.ID+" is not in authorization.discord.users; you hold none of the roles in authorization.discord.roles.")
	})
	t.Run("a check that cannot be made is answered at once, to the asker alone", func(t *testing.T) {
		defer rv.Set(e.Reviewer())
		// The API server refuses the SubjectAccessReview itself: the bot's ServiceAccount
		// lacks create subjectaccessreviews.
		rv.Set(e.ReviewerAs(t, "system:serviceaccount:whypending:without-reviews"))
		refused(t, alice, discordfake.CommandData("why-pending", "", "pod", stuckPod),
			"the bot's ServiceAccount may not create subjectaccessreviews.authorization.k8s.io there")
		rv.Set(chattest.ReviewerFunc(func(context.Context, authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
			return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewServiceUnavailable("etcdserver: leader changed")
		}))
		refused(t, alice, discordfake.CommandData("ipam", "release-ips"), "whypending could not check what Kubernetes RBAC allows you on cluster test (the check failed), so nothing was done.")
	})
	t.Run("a decision that lapses after the early check publishes nothing", func(t *testing.T) {
		// The early check (Admit) is allowed; then the RoleBinding goes and the decision's TTL
		// runs out, so the command's own check is refused.
		defer rv.Set(e.Reviewer())
		var once sync.Once
		rv.Set(chattest.ReviewerFunc(func(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
			st, err := e.Reviewer().ReviewAccess(ctx, spec)
			if err != nil || spec.User != chattest.DevUser || spec.ResourceAttributes.Namespace != chattest.EmptyNamespace {
				return st, err
			}
			once.Do(func() {
				if err := e.Cluster.Client.RbacV1().RoleBindings(chattest.EmptyNamespace).Delete(ctx, "dev-reads-pods", metav1.DeleteOptions{}); err != nil {
					t.Error(err)
				}
				for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
					if now, err := e.Reviewer().ReviewAccess(ctx, spec); err == nil && !now.Allowed {
						break
					}
				}
				lapse.Store(true)
			})
			return st, err
		}))
		token, resp, raw := e.command(t, dev, discordfake.CommandData("why-pending", "", "pod", chattest.EmptyNamespace+"/web"))
		if resp.Type != discordgo.InteractionResponseDeferredChannelMessageWithSource || resp.Data.Flags != 0 {
			t.Fatalf("response = %s, want the public deferred response of an admitted command", raw)
		}
		want := "Kubernetes RBAC does not allow you to get pods in namespace " + chattest.EmptyNamespace
		var calls []discordfake.Call
		deadline := time.Now().Add(60 * time.Second)
		for calls = e.fake.CallsFor(token); len(calls) == 0 || calls[len(calls)-1].Route != "followup"; calls = e.fake.CallsFor(token) {
			if time.Now().After(deadline) {
				for _, c := range calls {
					t.Logf("%s %s %d %s", c.Method, c.Path, c.Status, c.Body)
				}
				t.Fatal("no follow-up for the command")
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		calls = e.fake.CallsFor(token)
		var routes []string
		for _, c := range calls {
			routes = append(routes, c.Route)
			switch c.Route {
			case "webhook-delete":
				if c.Status != http.StatusNoContent || !strings.HasSuffix(c.Path, "/messages/@original") {
					t.Errorf("delete %s = %d, want the deferred response deleted", c.Path, c.Status)
				}
			case "followup":
				if c.Message == nil || c.Message.Flags&discordgo.MessageFlagsEphemeral == 0 || !strings.Contains(discordfake.MessageText(c.Message), want) {
					t.Errorf("follow-up %s, want an ephemeral refusal with %q", c.Body, want)
				}
			default:
				t.Errorf("REST call %s %s %s: only the deletion of the deferred response and an ephemeral follow-up may be sent", c.Method, c.Path, c.Body)
			}
		}
		if strings.Join(routes, ",") != "webhook-delete,followup" {
			t.Errorf("REST calls %v, want webhook-delete,followup", routes)
		}
	})
	t.Run("the developer may not plan a repair", func(t *testing.T) {
		refused(t, dev, discordfake.CommandData("ipam", "release-ips"),
			"Kubernetes RBAC does not allow you to update ipamblocks.crd.projectcalico.org (cluster-wide) on cluster test (checked as user dev@example.com). Nothing was done.")
	})

	token, _, _ := e.command(t, alice, discordfake.CommandData("ipam", "release-ips"))
	plan := e.answer(t, token).Message
	approve := button(t, plan, "?approve|")
	planID := strings.TrimPrefix(approve.CustomID, "?approve|")
	if rec := e.Record(t, planID); rec.RequestedAs == nil || rec.RequestedAs.User != chattest.RequesterUser {
		t.Fatalf("requestedAs = %+v, want %s", rec.RequestedAs, chattest.RequesterUser)
	}
	goAhead := e.confirm(t, dev, approve.CustomID, plan)

	t.Run("the developer's approval is refused, naming the verb, to them alone", func(t *testing.T) {
		token, _, _ := e.click(t, 0, dev, goAhead, nil)
		got := e.answer(t, token)
		want := "Kubernetes RBAC does not allow you to update ipamblocks.crd.projectcalico.org (cluster-wide) on cluster test (checked as user dev@example.com). Nothing was done."
		// The go-ahead came from the ephemeral confirmation: the refusal replaces it.
		if !strings.HasSuffix(got.Path, "/messages/@original") || !strings.Contains(strings.ReplaceAll(discordfake.MessageText(got.Message), `\`, ""), want) {
			t.Errorf("reply = %s %q, want the ephemeral confirmation replaced by %q", got.Path, discordfake.MessageText(got.Message), want)
		}
		rec := e.Record(t, planID)
		last := rec.History[len(rec.History)-1]
		if rec.State != approval.StatePending || last.Event != approval.AuditRefused || last.Denied == nil || last.Denied.Verb != "update" || last.As == nil || last.As.User != chattest.DevUser {
			t.Errorf("record %s, last audit %+v: want Pending and the refusal with the denied verb", rec.State, last)
		}
		if edits := e.fake.ChannelEdits(plan.ID); len(edits) != 0 {
			t.Errorf("plan message edited %d times by a refusal, want 0", len(edits))
		}
	})

	t.Run("bob, by his role mapped to group sre, approves and the repair runs", func(t *testing.T) {
		goAhead := e.confirm(t, bob, approve.CustomID, plan)
		e.click(t, 0, bob, goAhead, nil)
		chattest.WaitFor(t, 120*time.Second, "the final plan message", func() bool {
			edits := e.fake.ChannelEdits(plan.ID)
			return len(edits) > 0 && strings.Contains(discordfake.MessageText(edits[len(edits)-1].Message), "Done:")
		})
		rec := e.Record(t, planID)
		if rec.State != approval.StateSucceeded || rec.DecidedAs == nil || strings.Join(rec.DecidedAs.Groups, ",") != chattest.SREGroup {
			t.Errorf("RemediationRequest %s decidedAs %+v, want Succeeded as group %s", rec.State, rec.DecidedAs, chattest.SREGroup)
		}
		if n := e.Leaked(t); n != 0 {
			t.Errorf("leaked IPs = %d, want 0", n)
		}
	})

	t.Run("every refusal is audited", func(t *testing.T) {
		recs := chattest.AuditLines(t, logs.String(), "authorization refused")
		want := map[string]bool{"/why-pending payments/" + hiddenPod: false, "plan release-leaked-ips": false, "approve " + planID: false, "unmapped": false}
		for _, r := range recs {
			if r["reason"] == "unmapped" && strings.HasSuffix(r["actor"].(string), "/"+nobody.ID) {
				want["unmapped"] = true
			}
			if strings.HasSuffix(r["actor"].(string), "/"+dev.ID) && r["verb"] != "" {
				want[r["what"].(string)] = true
			}
		}
		for k, found := range want {
			if !found {
				t.Errorf("no audit record of the refusal %q in:\n%s", k, logs.String())
			}
		}
	})
}
