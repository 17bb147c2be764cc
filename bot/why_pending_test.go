package bot

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// TestWhyPendingTargets checks how /why-pending reads its argument and which namespace it asks
// in: TYPE/NAME, a bare name, NAMESPACE/POD and --all, with -n, the channel's namespace and the
// cluster's.
func TestWhyPendingTargets(t *testing.T) {
	var asked []triage.Target
	answer := AnswererFunc(func(_ context.Context, tg triage.Target) (*triage.Answer, error) {
		asked = append(asked, tg)
		if tg.All {
			return &triage.Answer{Namespace: &triage.NamespaceDiagnosis{Namespace: tg.Namespace, Summary: "Nothing is stuck"}}, nil
		}
		wd := &triage.WorkloadDiagnosis{Workload: triage.WorkloadRef{Kind: triage.KindDeployment, Namespace: tg.Namespace, Name: tg.Name},
			Summary:  "4 of 5 pods Pending: insufficient-cpu; 1 Running and Ready.",
			Findings: []triage.Finding{{Code: triage.CodeInsufficientCPU, Summary: "4 of 5 pods Pending: insufficient-cpu"}}}
		return &triage.Answer{Workload: wd}, nil
	})
	b := New(Options{
		Clusters:          []*Cluster{{Name: "prod", Namespace: "default", Answerer: answer}},
		ChannelNamespaces: map[string]string{"CSHOP": "shop"},
		Log:               quietLog,
	})
	tests := []struct {
		args, channel string
		want          triage.Target
		wantTitle     string
	}{
		{"deploy/checkout", "CSHOP", triage.Target{Namespace: "shop", Kind: triage.KindDeployment, Name: "checkout", OtherReading: &triage.PodRef{Namespace: "deploy", Name: "checkout"}}, "Deployment shop/checkout: insufficient-cpu"},
		{"checkout -n payments", "CSHOP", triage.Target{Namespace: "payments", Name: "checkout", NamespaceGiven: true}, "Deployment payments/checkout: insufficient-cpu"},
		{"prod/web-7f9c", "COTHER", triage.Target{Namespace: "prod", Name: "web-7f9c"}, "Deployment prod/web-7f9c"},
		{"svc/web -n shop", "COTHER", triage.Target{Namespace: "svc", Name: "web", NamespaceGiven: true, FlagNamespace: "shop"}, "Deployment svc/web"},
		{"--all", "CSHOP", triage.Target{Namespace: "shop", All: true}, "Namespace shop: nothing is stuck"},
		{"—all", "COTHER", triage.Target{Namespace: "default", All: true}, "Namespace default: nothing is stuck"},
	}
	for _, tt := range tests {
		asked = nil
		name, args := chat.ParseCommand("/why-pending", tt.args)
		got := b.Command(t.Context(), chat.Request{Principal: alice, Channel: tt.channel, Command: name, Args: args})
		if len(asked) != 1 {
			t.Errorf("/why-pending %s in %s asked %d times (%s)", tt.args, tt.channel, len(asked), got.Message.Title)
			continue
		}
		if diff := cmp.Diff(tt.want, asked[0]); diff != "" {
			t.Errorf("/why-pending %s in %s target mismatch (-want +got):\n%s", tt.args, tt.channel, diff)
		}
		if !strings.HasPrefix(got.Message.Title, tt.wantTitle) || !got.Public {
			t.Errorf("/why-pending %s title = %q public=%t, want %q… public", tt.args, got.Message.Title, got.Public, tt.wantTitle)
		}
	}
	for _, bad := range []string{"--all checkout", "", "deploy/Bad_Name"} {
		asked = nil
		name, args := chat.ParseCommand("/why-pending", bad)
		got := b.Command(t.Context(), chat.Request{Principal: alice, Channel: "CSHOP", Command: name, Args: args})
		if len(asked) != 0 || !strings.HasPrefix(got.Message.Title, "/why-pending: ") {
			t.Errorf("/why-pending %q = %q (asked %d), want a usage answer and no question asked", bad, got.Message.Title, len(asked))
		}
	}
	help := b.Command(t.Context(), chat.Request{Principal: alice, Channel: "CSHOP", Command: "whypending", Args: []string{"help"}})
	if !strings.Contains(help.Message.Sections[1].Code, "TYPE/NAME") {
		t.Errorf("/whypending help does not explain TYPE/NAME: %+v", help.Message.Sections)
	}
}

// TestWhyPendingTwoNamespacesAnswered: the answer's refusal of "svc/web -n shop" (namespace svc
// exists, so the question names two) is shown to the asker as Given's refusal is, not as a
// failure.
func TestWhyPendingTwoNamespacesAnswered(t *testing.T) {
	answer := AnswererFunc(func(_ context.Context, tg triage.Target) (*triage.Answer, error) {
		return nil, tg.TwoNamespaces()
	})
	b := New(Options{Clusters: []*Cluster{{Name: "prod", Namespace: "default", Answerer: answer}}, Log: quietLog})
	name, args := chat.ParseCommand("/why-pending", "svc/web -n shop")
	got := b.Command(t.Context(), chat.Request{Principal: alice, Channel: "COTHER", Command: name, Args: args})
	want := "/why-pending: two namespaces given: -n shop, and svc in svc/web; give one (-n shop web, or svc/web)"
	if got.Message.Title != want {
		t.Errorf("title = %q, want %q", got.Message.Title, want)
	}
}
