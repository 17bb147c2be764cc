package digest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/bot/watch"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// noCalico is the IPAM of a cluster without Calico.
type noCalico struct{}

func (noCalico) Check(context.Context, calico.CheckOptions) (*calico.CheckResult, error) {
	return nil, calico.ErrCalicoNotInstalled
}

func (noCalico) Utilization(context.Context) (*calico.Utilization, error) {
	return nil, calico.ErrCalicoNotInstalled
}

// TestDigestListsUnclearStuckWorkloads: each cluster's digest lists its own stuck workloads
// whose answer is not sure (the watch never posts them on their own), a cluster without Calico
// gets a digest for them alone and none when it has none, and a list that cannot be read is
// said so in the digest and in Run's error.
func TestDigestListsUnclearStuckWorkloads(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	ipam := staticIPAM{check: &calico.CheckResult{}, util: &calico.Utilization{MaxBlocksPerHost: 20}}
	items := []watch.Item{
		{Workload: watch.Workload{Cluster: "lab", Kind: triage.KindDeployment, Namespace: "ml", Name: "train"}, Code: triage.CodeUnknown, Since: at.Add(-3 * time.Hour)},
		{Workload: watch.Workload{Cluster: "prod-eu", Kind: triage.KindPod, Namespace: "batch", Name: "nightly"}, Code: triage.CodeUnknown, Since: at.Add(-time.Hour)},
		{Workload: watch.Workload{Cluster: "elsewhere", Kind: triage.KindPod, Namespace: "x", Name: "y"}, Code: triage.CodeUnknown, Since: at},
	}
	clusters := []digest.Cluster{{Name: "prod-eu", IPAM: ipam}, {Name: "lab", IPAM: noCalico{}}, {Name: "dev", IPAM: noCalico{}}, {Name: "edge"}}
	text := func(m chat.Message) string {
		var b strings.Builder
		b.WriteString(m.Title + "\n")
		for _, s := range m.Sections {
			b.WriteString(s.Heading + "\n" + s.Text + "\n" + strings.Join(s.Lines, "\n") + "\n")
		}
		return b.String()
	}

	p := &recordingPoster{}
	j := &digest.Job{Clusters: clusters, Channels: []string{"C0OPS"}, Poster: p, Render: bot.RenderDigest, Now: func() time.Time { return at },
		Unclear: func(context.Context) ([]watch.Item, error) { return items, nil }}
	if err := j.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	posts := p.Posts()
	if len(posts) != 2 {
		for _, x := range posts {
			t.Logf("posted: %s", text(x.m))
		}
		t.Fatalf("%d digests posted, want 2 (prod-eu, and lab for its stuck workload; dev and edge have nothing to say)", len(posts))
	}
	prod, lab := text(posts[0].m), text(posts[1].m)
	if !strings.HasPrefix(prod, "IPAM digest for prod-eu: no problems found") ||
		!strings.Contains(prod, "Stuck without a clear cause (1, not posted on their own)") ||
		!strings.Contains(prod, "`/why-pending nightly -n batch`: unknown (since 08:00 UTC)") || strings.Contains(prod, "train") || strings.Contains(prod, "elsewhere") {
		t.Errorf("prod-eu's digest:\n%s\nwant its IPAM and its one stuck pod without a clear cause, nothing of other clusters", prod)
	}
	if !strings.HasPrefix(lab, "Digest for lab: 1 stuck workload without a clear cause") ||
		!strings.Contains(lab, "`/why-pending deploy/train -n ml`: unknown (since 06:00 UTC)") || strings.Contains(lab, "IPAM") {
		t.Errorf("lab's digest:\n%s\nwant its stuck Deployment alone (no Calico)", lab)
	}

	p = &recordingPoster{}
	j.Poster = p
	j.Unclear = func(context.Context) ([]watch.Item, error) {
		return nil, errors.New("notifications.whypending.io is forbidden")
	}
	if err := j.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("Run = %v, want the error reading the watch's list", err)
	}
	if posts := p.Posts(); len(posts) != 1 || !strings.Contains(text(posts[0].m), "The watch's list could not be read") {
		t.Errorf("with the list unreadable: %d posts, want prod-eu's digest saying so", len(posts))
	}
}
