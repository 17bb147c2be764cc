package digest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/bot"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

func TestParseSchedule(t *testing.T) {
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name     string
		schedule string
		timezone string
		now      string // RFC3339
		wantNext string // RFC3339 in UTC; "" when parsing must fail
	}{
		{"weekdays at 9 in Berlin, on a Monday morning", "0 9 * * 1-5", "Europe/Berlin", "2026-11-30T07:00:00Z", "2026-11-30T08:00:00Z"},
		{"weekdays at 9 in Berlin skip the weekend", "0 9 * * 1-5", "Europe/Berlin", "2026-12-04T09:00:00Z", "2026-12-07T08:00:00Z"},
		{"9 in Berlin follows summer time", "0 9 * * *", "Europe/Berlin", "2027-03-27T09:00:00Z", "2027-03-28T07:00:00Z"},
		{"no time zone means UTC", "30 6 * * *", "", "2026-11-30T07:00:00Z", "2026-12-01T06:30:00Z"},
		{"a descriptor", "@daily", "America/New_York", "2026-11-30T12:00:00Z", "2026-12-01T05:00:00Z"},
		{"four fields", "0 9 * *", "UTC", "2026-11-30T07:00:00Z", ""},
		{"an hour out of range", "0 25 * * *", "UTC", "2026-11-30T07:00:00Z", ""},
		{"six fields (seconds are not accepted)", "0 0 9 * * *", "UTC", "2026-11-30T07:00:00Z", ""},
		{"an unknown time zone", "0 9 * * *", "Mars/Olympus", "2026-11-30T07:00:00Z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sched, loc, err := digest.ParseSchedule(tt.schedule, tt.timezone)
			if tt.wantNext == "" {
				if err == nil {
					t.Fatalf("digest.ParseSchedule(%q, %q) = nil error, want an error", tt.schedule, tt.timezone)
				}
				return
			}
			if err != nil {
				t.Fatalf("digest.ParseSchedule(%q, %q) = %v", tt.schedule, tt.timezone, err)
			}
			if got, want := sched.Next(at(tt.now).In(loc)), at(tt.wantNext); !got.Equal(want) {
				t.Errorf("next run after %s = %s, want %s", tt.now, got.UTC().Format(time.RFC3339), tt.wantNext)
			}
		})
	}
}

func TestSchedulerRejectsABadSchedule(t *testing.T) {
	s := &digest.Scheduler{Job: &digest.Job{Poster: &recordingPoster{}, Render: bot.RenderDigest}, Schedule: "every morning", Log: quietLog}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := s.Run(ctx); err == nil || ctx.Err() != nil {
		t.Errorf("Run with schedule %q = %v after %v, want an error at once", s.Schedule, err, ctx.Err())
	}
}

// staticIPAM returns the same check and utilization every time.
type staticIPAM struct {
	check *calico.CheckResult
	util  *calico.Utilization
}

func (s staticIPAM) Check(context.Context, calico.CheckOptions) (*calico.CheckResult, error) {
	return s.check, nil
}

func (s staticIPAM) Utilization(context.Context) (*calico.Utilization, error) { return s.util, nil }

// TestDigestLeaderElection runs two replicas on one Lease with a one-second schedule: only
// the leader posts; when it stops, the other takes the Lease over and posts, and the old
// leader posts nothing more.
func TestDigestLeaderElection(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	const ns = "whypending"
	if _, err := c.Client.CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ipam := staticIPAM{
		check: &calico.CheckResult{LeakedIPs: leakedOn("worker-2", 2), Problems: 2},
		util:  &calico.Utilization{MaxBlocksPerHost: 20, Pools: []calico.PoolUsage{poolUsage("default-ipv4-ippool", "172.16.0.0/24", 10, 256)}},
	}
	type replica struct {
		id     string
		poster *recordingPoster
		cancel context.CancelFunc
		done   chan error
	}
	start := func(id string) *replica {
		r := &replica{id: id, poster: &recordingPoster{}, done: make(chan error, 1)}
		s := &digest.Scheduler{
			Job: &digest.Job{Clusters: []digest.Cluster{{Name: "prod-eu", IPAM: ipam}}, Channels: []string{"C0OPS"},
				Poster: r.poster, Render: bot.RenderDigest},
			Leases:        c.Client.CoordinationV1(),
			Namespace:     ns,
			Identity:      id,
			LeaseDuration: 8 * time.Second,
			RenewDeadline: 5 * time.Second,
			RetryPeriod:   250 * time.Millisecond,
			Log:           quietLog,
		}
		digest.SetSchedule(s, cron.Every(time.Second))
		var ctx context.Context
		ctx, r.cancel = context.WithCancel(t.Context())
		go func() { r.done <- s.Run(ctx) }()
		t.Cleanup(func() { r.cancel(); <-r.done })
		return r
	}
	holder := func() string {
		l, err := c.Client.CoordinationV1().Leases(ns).Get(t.Context(), digest.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// waitPosts waits until r has posted at least n digests.
	waitPosts := func(r *replica, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(r.poster.Posts()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("replica %s posted %d digests in 30s, want %d (lease holder %q)", r.id, len(r.poster.Posts()), n, holder())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	a, b := start("replica-a"), start("replica-b")
	var leader, follower *replica
	deadline := time.Now().Add(30 * time.Second)
	for leader == nil {
		switch {
		case len(a.poster.Posts()) > 0:
			leader, follower = a, b
		case len(b.poster.Posts()) > 0:
			leader, follower = b, a
		case time.Now().After(deadline):
			t.Fatalf("no replica posted in 30s (lease holder %q)", holder())
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitPosts(leader, 3)
	if got := len(follower.poster.Posts()); got != 0 {
		t.Errorf("while %s leads, %s posted %d digests, want 0", leader.id, follower.id, got)
	}
	if got := holder(); got != leader.id {
		t.Errorf("lease holder = %q, want the posting replica %q", got, leader.id)
	}
	for _, p := range leader.poster.Posts() {
		if want := "IPAM digest for prod-eu: 2 leaked IPs, 0 empty blocks"; p.channel != "C0OPS" || p.m.Title != want {
			t.Errorf("leader posted %q to %s, want %q to C0OPS", p.m.Title, p.channel, want)
		}
	}

	leader.cancel()
	if err := <-leader.done; err != nil {
		t.Errorf("leader Run = %v, want nil after cancel", err)
	}
	leader.done <- nil // for t.Cleanup
	posted := len(leader.poster.Posts())
	waitPosts(follower, 2)
	if got := holder(); got != follower.id {
		t.Errorf("lease holder after the leader stopped = %q, want %q", got, follower.id)
	}
	if got := len(leader.poster.Posts()); got != posted {
		t.Errorf("the stopped leader posted %d more digests, want 0", got-posted)
	}
}

var quietLog = slog.New(slog.DiscardHandler)

// leakedOn returns n leaked allocations on node.
func leakedOn(node string, n int) []calico.Allocation {
	out := make([]calico.Allocation, n)
	for i := range out {
		out[i] = calico.Allocation{IP: fmt.Sprintf("10.%d.%d.%d", len(node), i/256, i%256), Node: node, Handle: "k8s-pod-network.x"}
	}
	return out
}

func poolUsage(name, cidr string, inUse, total float64) calico.PoolUsage {
	return calico.PoolUsage{Name: name, CIDR: netip.MustParsePrefix(cidr), BlockSize: 26, InUse: inUse, Total: total, Free: total - inUse}
}

type post struct {
	channel string
	m       chat.Message
}

// recordingPoster records posts.
type recordingPoster struct {
	mu    sync.Mutex
	posts []post
}

func (p *recordingPoster) PostMessage(_ context.Context, channel string, m chat.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.posts = append(p.posts, post{channel, m})
	return nil
}

func (p *recordingPoster) Posts() []post {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.posts)
}
