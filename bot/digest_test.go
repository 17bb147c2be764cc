package bot

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/bot/digest"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/internal/testcluster"
	"github.com/whypending/whypending/internal/testenv"
)

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

func emptyBlock(node, cidr string, lastAffine bool) calico.BlockUsage {
	return calico.BlockUsage{Name: strings.NewReplacer(".", "-", "/", "-").Replace(cidr), CIDR: netip.MustParsePrefix(cidr),
		Affinity: "host:" + node, Node: node, Total: 64, Free: 64, Empty: true, LastAffineBlock: lastAffine}
}

// section returns the message's section with heading, or nil.
func section(m chat.Message, heading string) *chat.Section {
	for i := range m.Sections {
		if m.Sections[i].Heading == heading {
			return &m.Sections[i]
		}
	}
	return nil
}

func sectionLines(m chat.Message, heading string) []string {
	if s := section(m, heading); s != nil {
		return s.Lines
	}
	return nil
}

func sectionRows(m chat.Message, heading string) [][]string {
	if s := section(m, heading); s != nil && s.Table != nil {
		return s.Table.Rows
	}
	return nil
}

func fieldValue(m chat.Message, name string) string {
	for _, s := range m.Sections {
		for _, f := range s.Fields {
			if f.Name == name {
				return f.Value
			}
		}
	}
	return ""
}

func TestDigestMessage(t *testing.T) {
	defaultPool := []calico.PoolUsage{poolUsage("default-ipv4-ippool", "172.16.0.0/24", 75, 256)}
	defaultPoolRows := [][]string{{"default-ipv4-ippool", "172.16.0.0/24", "75 / 256", "29%"}}

	var manyLeaks []calico.Allocation
	var manyEmpty []calico.BlockUsage
	manyNodeBlocks := map[string]int{}
	for i := range 13 {
		node := fmt.Sprintf("node-%02d", i)
		manyLeaks = append(manyLeaks, leakedOn(node, 13-i)...)
		if i < 12 {
			manyEmpty = append(manyEmpty, emptyBlock(node, fmt.Sprintf("10.9.%d.0/26", i), false))
			manyNodeBlocks[node] = 2
		}
	}

	tests := []struct {
		name         string
		check        calico.CheckResult
		util         calico.Utilization
		wantTitle    string
		wantSeverity chat.Severity
		wantButtons  []chat.Button
		wantPools    [][]string
		wantLeaks    []string   // lines of "Leaked IPs by node"
		wantBlocks   [][]string // rows of "Empty blocks by node"
		wantOther    []string   // lines of the other findings
	}{
		{
			name:         "a clean cluster says no problems found and offers no button",
			check:        calico.CheckResult{Blocks: 4, InUseIPs: 75},
			util:         calico.Utilization{Pools: defaultPool, NodeBlocks: map[string]int{"worker-1": 2, "worker-2": 2}, MaxBlocksPerHost: 20},
			wantTitle:    "IPAM digest for prod-eu: no problems found",
			wantSeverity: "ok",
			wantPools:    defaultPoolRows,
		},
		{
			name:         "leaked IPs are counted by node, largest first, with one release button",
			check:        calico.CheckResult{LeakedIPs: append(leakedOn("worker-1", 53), leakedOn("worker-2", 128)...), Problems: 181},
			util:         calico.Utilization{Pools: defaultPool, MaxBlocksPerHost: 20},
			wantTitle:    "IPAM digest for prod-eu: 181 leaked IPs, 0 empty blocks",
			wantSeverity: "warning",
			wantButtons: []chat.Button{{ActionID: "plan:release-leaked-ips", Label: "Release 181 leaked IPs",
				Value: "release-leaked-ips;cluster=prod-eu", Style: "primary"}},
			wantPools: defaultPoolRows,
			wantLeaks: []string{"worker-2: 128", "worker-1: 53"},
		},
		{
			name:  "empty blocks show against maxBlocksPerHost and a node's only block is not releasable",
			check: calico.CheckResult{},
			util: calico.Utilization{Pools: defaultPool, MaxBlocksPerHost: 4,
				NodeBlocks: map[string]int{"worker-1": 4, "worker-3": 1},
				EmptyBlocks: []calico.BlockUsage{emptyBlock("worker-1", "172.16.0.64/26", false),
					emptyBlock("worker-1", "172.16.0.128/26", false), emptyBlock("worker-3", "172.16.0.192/26", true)}},
			wantTitle:    "IPAM digest for prod-eu: 0 leaked IPs, 2 empty blocks, 1 node at maxBlocksPerHost",
			wantSeverity: "warning",
			wantButtons: []chat.Button{{ActionID: "plan:release-empty-blocks", Label: "Release 2 empty blocks",
				Value: "release-empty-blocks;cluster=prod-eu", Style: "primary"}},
			wantPools:  defaultPoolRows,
			wantBlocks: [][]string{{"worker-1", "2", "4 / 4", "at the limit"}, {"worker-3", "1", "1 / 4", "its only block is kept"}},
		},
		{
			name:  "an idle node's only empty block is shown but is no problem",
			check: calico.CheckResult{},
			util: calico.Utilization{Pools: defaultPool, MaxBlocksPerHost: 20, NodeBlocks: map[string]int{"worker-3": 1},
				EmptyBlocks: []calico.BlockUsage{emptyBlock("worker-3", "172.16.0.192/26", true)}},
			wantTitle:    "IPAM digest for prod-eu: no problems found",
			wantSeverity: "ok",
			wantPools:    defaultPoolRows,
			wantBlocks:   [][]string{{"worker-3", "1", "1 / 20", "its only block is kept"}},
		},
		{
			name:         "many nodes are cut to the top ten with the rest summarised",
			check:        calico.CheckResult{LeakedIPs: manyLeaks, Problems: len(manyLeaks)},
			util:         calico.Utilization{Pools: defaultPool, MaxBlocksPerHost: 20, NodeBlocks: manyNodeBlocks, EmptyBlocks: manyEmpty},
			wantTitle:    "IPAM digest for prod-eu: 91 leaked IPs, 12 empty blocks",
			wantSeverity: "warning",
			wantButtons: []chat.Button{
				{ActionID: "plan:release-leaked-ips", Label: "Release 91 leaked IPs", Value: "release-leaked-ips;cluster=prod-eu", Style: "primary"},
				{ActionID: "plan:release-empty-blocks", Label: "Release 12 empty blocks", Value: "release-empty-blocks;cluster=prod-eu", Style: "primary"},
			},
			wantPools: defaultPoolRows,
			wantLeaks: []string{"node-00: 13", "node-01: 12", "node-02: 11", "node-03: 10", "node-04: 9", "node-05: 8",
				"node-06: 7", "node-07: 6", "node-08: 5", "node-09: 4", "and 3 more nodes (6 leaked IPs)"},
			wantBlocks: [][]string{
				{"node-00", "1", "2 / 20", ""}, {"node-01", "1", "2 / 20", ""}, {"node-02", "1", "2 / 20", ""},
				{"node-03", "1", "2 / 20", ""}, {"node-04", "1", "2 / 20", ""}, {"node-05", "1", "2 / 20", ""},
				{"node-06", "1", "2 / 20", ""}, {"node-07", "1", "2 / 20", ""}, {"node-08", "1", "2 / 20", ""},
				{"node-09", "1", "2 / 20", ""}, {"and 2 more nodes", "", "", ""},
			},
		},
		{
			name:         "a held datastore lock is a blocker with an unlock button",
			check:        calico.CheckResult{Report: calico.Report{DatastoreLocked: true}},
			util:         calico.Utilization{Pools: defaultPool, MaxBlocksPerHost: 20},
			wantTitle:    "IPAM digest for prod-eu: 0 leaked IPs, 0 empty blocks, datastore locked",
			wantSeverity: "blocker",
			wantButtons: []chat.Button{{ActionID: "plan:unlock-datastore", Label: "Unlock the datastore",
				Value: "unlock-datastore;cluster=prod-eu"}},
			wantPools: defaultPoolRows,
		},
		{
			name: "a full pool and the problems the digest does not detail are named in the title",
			check: calico.CheckResult{Problems: 3, LeakedHandles: []calico.HandleInfo{{ID: "k8s-pod-network.gone"}},
				InUseNotAllocated: []calico.InUseIP{{IP: "172.16.0.9"}, {IP: "172.16.0.10"}}},
			util: calico.Utilization{MaxBlocksPerHost: 20, Pools: []calico.PoolUsage{
				poolUsage("default-ipv4-ippool", "172.16.0.0/24", 256, 256),
				poolUsage("spare", "172.17.0.0/24", 255, 256),
				{Name: "old", CIDR: netip.MustParsePrefix("10.0.0.0/30"), Disabled: true, InUse: 4, Total: 4},
				poolUsage("default-ipv6-ippool", "fd00::/48", 5, math.Pow(2, 80)),
				{Name: "orphaned", CIDR: netip.MustParsePrefix("0.0.0.0/0")},
			}},
			wantTitle:    "IPAM digest for prod-eu: 0 leaked IPs, 0 empty blocks, pool default-ipv4-ippool 100% allocated, pool spare 99% allocated, 3 other problems",
			wantSeverity: "warning",
			wantPools: [][]string{
				{"default-ipv4-ippool", "172.16.0.0/24", "256 / 256", "100%"},
				{"spare", "172.17.0.0/24", "255 / 256", "99%"},
				{"old (disabled)", "10.0.0.0/30", "4 / 4", "100%"},
				{"default-ipv6-ippool", "fd00::/48", "5 / 1208925819614629174706176", "<1%"},
			},
			wantOther: []string{"2 addresses in use but not allocated", "1 leaked handle"},
			wantButtons: []chat.Button{{ActionID: "plan:release-leaked-handles", Label: "Delete 1 leaked handle",
				Value: "release-leaked-handles;cluster=prod-eu"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := DigestMessage("prod-eu", &tt.check, &tt.util, testT0)
			if m.Title != tt.wantTitle || m.Severity != tt.wantSeverity {
				t.Errorf("title, severity = %q, %q, want %q, %q", m.Title, m.Severity, tt.wantTitle, tt.wantSeverity)
			}
			if diff := cmp.Diff(tt.wantButtons, m.Buttons); diff != "" {
				t.Errorf("buttons (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPools, sectionRows(m, "Pool usage")); diff != "" {
				t.Errorf("pool usage rows (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLeaks, sectionLines(m, "Leaked IPs by node")); diff != "" {
				t.Errorf("leaked IPs by node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBlocks, sectionRows(m, "Empty blocks by node")); diff != "" {
				t.Errorf("empty blocks by node (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantOther, sectionLines(m, "Other findings (run /ipam check or /ipam blocks for details)")); diff != "" {
				t.Errorf("other findings (-want +got):\n%s", diff)
			}
			wantDatastore := "unlocked"
			if tt.check.Report.DatastoreLocked {
				wantDatastore = "locked (datastoreReady=false)"
			}
			if got := fieldValue(m, "Datastore"); got != wantDatastore {
				t.Errorf("Datastore field = %q, want %q", got, wantDatastore)
			}
			if got, want := section(m, "Datastore locked") != nil, tt.check.Report.DatastoreLocked; got != want {
				t.Errorf("has a Datastore locked section = %v, want %v", got, want)
			}
			if want := "cluster prod-eu · collected 2026-11-30T12:00:00Z"; m.Footer != want {
				t.Errorf("footer = %q, want %q", m.Footer, want)
			}
		})
	}
}

// recordingPlanner records the plans asked for and finds nothing to change.
type recordingPlanner struct {
	cluster string
	kinds   *[]string
}

func (p recordingPlanner) Plan(_ context.Context, kind actions.Kind, o actions.PlanOptions) (actions.Plan, error) {
	*p.kinds = append(*p.kinds, p.cluster+"/"+string(kind))
	return actions.Plan{ID: actions.NewID(), Kind: kind, Cluster: p.cluster, Node: o.Node}, nil
}

// TestDigestButtonsStartPlans clicks every button a digest offers and checks that the bot's
// one click path makes the plan of that kind on the digest's cluster, not the default one.
func TestDigestButtonsStartPlans(t *testing.T) {
	var kinds []string
	b := New(Options{
		Clusters: []*Cluster{
			{Name: "staging", Planner: recordingPlanner{"staging", &kinds}, Executor: &fakeExecutor{}},
			{Name: "prod-eu", Planner: recordingPlanner{"prod-eu", &kinds}, Executor: &fakeExecutor{}},
		},
		Log: quietLog,
	})
	m := DigestMessage("prod-eu",
		&calico.CheckResult{LeakedIPs: leakedOn("worker-2", 3), Problems: 3, Report: calico.Report{DatastoreLocked: true}},
		&calico.Utilization{MaxBlocksPerHost: 20, NodeBlocks: map[string]int{"worker-1": 2},
			EmptyBlocks: []calico.BlockUsage{emptyBlock("worker-1", "172.16.0.64/26", false)}},
		testT0)
	for _, btn := range m.Buttons {
		out := b.Click(t.Context(), chat.Click{Principal: alice, Channel: "C0OPS", ActionID: btn.ActionID, Value: btn.Value}, nil)
		if !strings.HasPrefix(out.Notice, "Nothing to do on prod-eu") {
			t.Errorf("click %s = notice %q, want \"Nothing to do on prod-eu…\"", btn.ActionID, out.Notice)
		}
	}
	want := []string{"prod-eu/release-leaked-ips", "prod-eu/release-empty-blocks", "prod-eu/unlock-datastore"}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("plans made (-want +got):\n%s", diff)
	}
}

func TestDigestUsedPercent(t *testing.T) {
	tests := []struct {
		inUse, total float64
		want         string
	}{
		{0, 256, "0%"},
		{75, 256, "29%"},
		{255, 256, "99%"},
		{256, 256, "100%"},
		{5, math.Pow(2, 64), "<1%"},
		{0, 0, "-"},
	}
	for _, tt := range tests {
		if got := usedPercent(tt.inUse, tt.total); got != tt.want {
			t.Errorf("usedPercent(%v, %v) = %q, want %q", tt.inUse, tt.total, got, tt.want)
		}
	}
}

// post is one message a recordingPoster was asked to post.
type post struct {
	channel string
	m       chat.Message
}

// recordingPoster records posts; posts to the channels in fail fail.
type recordingPoster struct {
	mu    sync.Mutex
	posts []post
	fail  map[string]bool
}

func (p *recordingPoster) PostMessage(_ context.Context, channel string, m chat.Message) error {
	if p.fail[channel] {
		return errors.New("channel_not_found")
	}
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

var errIPAMDown = errors.New("the server is currently unable to handle the request")

// downIPAM fails every read.
type downIPAM struct{}

func (downIPAM) Check(context.Context, calico.CheckOptions) (*calico.CheckResult, error) {
	return nil, errIPAMDown
}

func (downIPAM) Utilization(context.Context) (*calico.Utilization, error) { return nil, errIPAMDown }

// noCalicoIPAM is the IPAM of a cluster found to have no Calico after it was configured.
type noCalicoIPAM struct{}

func (noCalicoIPAM) Check(context.Context, calico.CheckOptions) (*calico.CheckResult, error) {
	return nil, calico.ErrCalicoNotInstalled
}

func (noCalicoIPAM) Utilization(context.Context) (*calico.Utilization, error) {
	return nil, calico.ErrCalicoNotInstalled
}

// uninitializedIPAM is a cluster that serves Calico's API but has no ClusterInformation.
type uninitializedIPAM struct{}

func (uninitializedIPAM) Check(context.Context, calico.CheckOptions) (*calico.CheckResult, error) {
	return nil, fmt.Errorf("read clusterinformation: %w", calico.ErrNotInitialized)
}

func (uninitializedIPAM) Utilization(context.Context) (*calico.Utilization, error) {
	return nil, fmt.Errorf("read clusterinformation: %w", calico.ErrNotInitialized)
}

// TestDigestRoundOnSeedIPAMLeaked runs one digest round over five clusters: the
// seed-ipam-leaked scenario on a real control plane, one whose API fails, two without
// Calico and one that is unavailable (down), to two channels of which one refuses posts.
func TestDigestRoundOnSeedIPAMLeaked(t *testing.T) {
	c := testcluster.Start(t, testenv.Options{})
	testcluster.Load(t, c, "seed-ipam-leaked")
	ipam, err := calico.NewClient(t.Context(), c.Config)
	if err != nil {
		t.Fatal(err)
	}
	poster := &recordingPoster{fail: map[string]bool{"C0GONE": true}}
	d := &digest.Job{
		Clusters: []digest.Cluster{{Name: "prod-eu", IPAM: ipam}, {Name: "prod-us", IPAM: downIPAM{}}, {Name: "no-calico"},
			{Name: "plain", IPAM: noCalicoIPAM{}},
			{Name: "prod-ap", IPAM: downIPAM{}, Health: func() error {
				return chat.ClusterUnavailable("prod-ap", testT0, errors.New("cannot reach the Kubernetes API server at https://10.0.9.1:6443: connection refused"))
			}}},
		Channels: []string{"C0OPS", "C0GONE"},
		Poster:   poster,
		Render:   RenderDigest,
		Now:      func() time.Time { return testT0 },
	}
	err = d.Run(t.Context())

	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var gotErrs []string
	for _, e := range errs {
		gotErrs = append(gotErrs, e.Error())
	}
	wantErrs := []string{
		"post digest of cluster prod-eu to channel C0GONE: channel_not_found",
		"digest of cluster prod-us: check calico ipam: " + errIPAMDown.Error(),
		"post digest of cluster prod-us to channel C0GONE: channel_not_found",
		"digest of cluster prod-ap skipped: Cluster prod-ap is unavailable: cannot reach the Kubernetes API server at https://10.0.9.1:6443: connection refused (since 12:00:00Z).",
		"post digest of cluster prod-ap to channel C0GONE: channel_not_found",
	}
	if diff := cmp.Diff(wantErrs, gotErrs); diff != "" {
		t.Errorf("Job.Run errors (-want +got):\n%s", diff)
	}
	if !errors.Is(err, errIPAMDown) {
		t.Errorf("errors.Is(Job.Run error, errIPAMDown) = false, want true")
	}

	posts := poster.Posts()
	var got []string
	for _, p := range posts {
		got = append(got, p.channel+": "+p.m.Title)
	}
	want := []string{
		"C0OPS: IPAM digest for prod-eu: 181 leaked IPs, 0 empty blocks, pool default-ipv4-ippool 100% allocated",
		"C0OPS: IPAM digest for prod-us could not be collected",
		"C0OPS: IPAM digest for prod-ap skipped: the cluster is unavailable",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("posts (-want +got):\n%s", diff)
	}
	if text := posts[2].m.Sections[0].Text; !strings.Contains(text, "cannot reach the Kubernetes API server at https://10.0.9.1:6443: connection refused") {
		t.Errorf("skipped cluster's post = %q, want it to name the API server and its error", text)
	}
	m := posts[0].m
	if diff := cmp.Diff([]string{"worker-2: 128", "worker-1: 53"}, sectionLines(m, "Leaked IPs by node")); diff != "" {
		t.Errorf("leaked IPs by node (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"default-ipv4-ippool", "172.16.0.0/24", "256 / 256", "100%"}}, sectionRows(m, "Pool usage")); diff != "" {
		t.Errorf("pool usage (-want +got):\n%s", diff)
	}
	wantButtons := []chat.Button{{ActionID: "plan:release-leaked-ips", Label: "Release 181 leaked IPs",
		Value: "release-leaked-ips;cluster=prod-eu", Style: "primary"}}
	if diff := cmp.Diff(wantButtons, m.Buttons); diff != "" {
		t.Errorf("buttons (-want +got):\n%s", diff)
	}
	for name, want := range map[string]string{"Leaked IPs": "181", "Empty blocks": "0", "Datastore": "unlocked", "maxBlocksPerHost": "20"} {
		if got := fieldValue(m, name); got != want {
			t.Errorf("field %s = %q, want %q", name, got, want)
		}
	}
}
