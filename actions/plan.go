package actions

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/whypending/whypending/calico"
)

// Kind names a gated operation the way a user would say it. Kinds are stable: they appear in
// button values, RemediationRequest objects and audit records.
type Kind string

const (
	// KindReleaseLeakedIPs releases IPAM allocations that no pod, node tunnel or
	// LoadBalancer service uses (what `calicoctl ipam check` calls "allocated but not in use").
	KindReleaseLeakedIPs Kind = "release-leaked-ips"
	// KindReleaseEmptyBlocks releases empty IPAM blocks and their affinities, keeping every
	// node's last affine block.
	KindReleaseEmptyBlocks Kind = "release-empty-blocks"
	// KindUnlockDatastore sets ClusterInformation default spec.datastoreReady back to true
	// (undoes a lock left behind by an interrupted repair or `calicoctl datastore migrate lock`).
	KindUnlockDatastore Kind = "unlock-datastore"
	// KindReleaseLeakedHandles deletes IPAMHandles that no block allocation references (what
	// `calicoctl ipam check` calls "handles with no matching IPs"), such as the handles a
	// release interrupted between its block and handle writes leaves behind.
	KindReleaseLeakedHandles Kind = "release-leaked-handles"
)

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	_, err := repairOf(k)
	return err == nil
}

// Destructive reports whether running the kind deletes or frees something. The two-person
// rule applies to destructive kinds only; unlocking restores normal operation and is not.
func (k Kind) Destructive() bool {
	rp, err := repairOf(k)
	return err == nil && rp.destructive()
}

// Verb is the kind as an imperative phrase with a count, e.g. "release 181 leaked IPs".
func (k Kind) Verb(n int) string {
	if rp, err := repairOf(k); err == nil {
		return rp.verb(n)
	}
	return string(k)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// MaxItems caps the items one plan carries, so a plan fits in one RemediationRequest object
// and one chat message's worth of review. A larger problem is repaired in several plans;
// Plan.Total says how many items were eligible.
const MaxItems = 2000

// DefaultExpiry is how long a plan may wait for approval when the caller sets no expiry.
const DefaultExpiry = 15 * time.Minute

// Plan is a dry run: exactly what Execute would change, read from a fresh Check or
// Utilization, with a fingerprint of that state. A Plan is a value; the bot stores it in an
// approval record and hands it back to Execute unchanged.
type Plan struct {
	// ID names the plan: "rr-" plus 13 lower-case base32 characters; it is also the
	// RemediationRequest object name and the value of the Approve / Deny buttons.
	ID string `json:"id"`
	// Kind is the operation.
	Kind Kind `json:"kind"`
	// Cluster is the configured cluster name the plan targets.
	Cluster string `json:"cluster"`
	// Node, when set, limits the plan to items on that node (allocations whose node, or
	// blocks whose affinity, is Node); "" means cluster-wide.
	Node string `json:"node,omitempty"`
	// Blocks, when set, limits a release-empty-blocks plan to these block CIDRs (the CLI's
	// `ipam release-blocks CIDR...`); empty means every block in Node's scope.
	Blocks []string `json:"blocks,omitempty"`
	// AllowLastBlock lets a release-empty-blocks plan take a node's last affine block too
	// (the CLI's --allow-last-block); the node claims a new block on its next pod.
	AllowLastBlock bool `json:"allowLastBlock,omitempty"`
	// Items are the objects the plan would change, sorted by Target; at most MaxItems unless
	// PlanOptions.Limit said otherwise.
	Items []Item `json:"items,omitempty"`
	// Total is how many items were eligible when planning (len(Items) unless capped).
	Total int `json:"total"`
	// Excluded are candidates in the plan's scope that it leaves out, and why: a named block
	// that is not empty, a node's last affine block, a leaked IPAMHandle younger than the
	// grace period. It explains the dry run; Execute does not read it, and the bot's
	// RemediationRequest does not keep it.
	Excluded []Skip `json:"excluded,omitempty"`
	// Fingerprint is the hex SHA-256 (first 16 characters) of Kind, Cluster and every item's
	// Target, Handle and SequenceNumber: two plans with the same fingerprint would change
	// exactly the same allocations.
	Fingerprint string `json:"fingerprint"`
	// Basis describes the state the plan was read from, e.g. "ClusterInformation rv 1234".
	Basis string `json:"basis,omitempty"`
	// Warning, when set, is what a reviewer must read before approving: that the datastore
	// lock an unlock-datastore plan would lift is not this runner's (it carries no whypending
	// marker, and may belong to calicoctl or a Calico upgrade in progress; or another
	// owner's marker names who holds it and since when).
	Warning string `json:"warning,omitempty"`
	// SecondApprover, when true, makes the plan need an approver other than its requester
	// whatever the policy's two-person rule says (Warning says why): lifting someone else's
	// lock is never one person's decision.
	SecondApprover bool `json:"secondApprover,omitempty"`
	// RequestedBy names who asked, as the bot's principal string ("slack:T1/U2").
	RequestedBy string `json:"requestedBy"`
	// CreatedAt is when the dry run ran.
	CreatedAt time.Time `json:"createdAt"`
	// ExpiresAt is the last instant the plan may be approved.
	ExpiresAt time.Time `json:"expiresAt"`
}

// Item is one thing a plan changes.
type Item struct {
	// Target is the object changed: an IP ("172.16.0.5") for release-leaked-ips, a block
	// CIDR ("172.16.0.64/26") for release-empty-blocks, "ClusterInformation default" for
	// unlock-datastore, a handle ID ("k8s-pod-network.<id>") for release-leaked-handles.
	Target string `json:"target"`
	// Node is the node the allocation or block belongs to (from the allocation's
	// secondary.node attribute, else the block's affinity); "" when unknown.
	Node string `json:"node,omitempty"`
	// Owner is what the allocation's attributes name: "namespace/pod", "Node(name)" for
	// tunnel addresses, or "" when the attributes name nothing.
	Owner string `json:"owner,omitempty"`
	// Handle is the IPAM handle ID of the allocation ("k8s-pod-network.<id>"); Execute
	// releases the IP only if the block still holds this handle.
	Handle string `json:"handle,omitempty"`
	// SequenceNumber is sequenceNumberForAllocation[ordinal] of the allocation when planned;
	// Execute releases the IP only if it is unchanged (the address was not re-allocated).
	SequenceNumber uint64 `json:"sequenceNumber,omitempty"`
	// Block is the CIDR of the block that holds the IP (release-leaked-ips only).
	Block string `json:"block,omitempty"`
	// Revision is the IPAMHandle's metadata.resourceVersion when planned
	// (release-leaked-handles only); Execute deletes the handle only if it is unchanged.
	Revision string `json:"revision,omitempty"`
}

// Fingerprint computes Plan.Fingerprint for the given kind, cluster and items. An item's
// Revision counts when it is set.
func Fingerprint(kind Kind, cluster string, items []Item) string {
	sorted := append([]Item(nil), items...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Target < sorted[j].Target })
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", kind, cluster)
	for _, it := range sorted {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00", it.Target, it.Handle, it.SequenceNumber)
		if it.Revision != "" {
			fmt.Fprintf(h, "rv=%s\x00", it.Revision)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// NewID returns a fresh random plan ID ("rr-" + 13 base32 characters, 64 random bits), valid
// as a Kubernetes object name.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	enc := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	return "rr-" + strings.ToLower(enc)
}

// Expired reports whether the plan can no longer be approved at now.
func (p Plan) Expired(now time.Time) bool {
	return !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt)
}

// Title is a one-line description, e.g. "release 181 leaked IPs on prod-eu" or "release 2
// empty IPAM blocks on prod-eu node worker-3".
func (p Plan) Title() string {
	t := fmt.Sprintf("%s on %s", p.Kind.Verb(p.Total), p.Cluster)
	if p.Node != "" {
		t += " node " + p.Node
	}
	return t
}

// PlanOptions narrow a plan, or say what to plan from.
type PlanOptions struct {
	// Node limits the plan to one node ("" = cluster-wide).
	Node string
	// Blocks limits a release-empty-blocks plan to these blocks (Plan.Blocks); a named block
	// that cannot be released is in Plan.Excluded with the reason.
	Blocks []netip.Prefix
	// AllowLastBlock lets a release-empty-blocks plan take a node's last affine block
	// (Plan.AllowLastBlock).
	AllowLastBlock bool
	// Check, when set, is an IPAM check read moments ago to plan from instead of a fresh one
	// (release-leaked-ips, release-leaked-handles): the CLI's release-ips shows the check
	// and plans both kinds from it. Execute reads the cluster again all the same.
	Check *calico.CheckResult
	// Report, when set, is a calicoctl-schema report (`ipam check -o`) whose leaked
	// addresses and handles are the candidates (release-leaked-ips, release-leaked-handles;
	// the CLI's --from-report). The caller makes sure it is of this cluster. Execute reads
	// the cluster again all the same.
	Report *calico.Report
	// Limit caps Plan.Items: 0 means MaxItems; negative means no cap, for a caller that
	// stores no RemediationRequest and executes at once (the CLI).
	Limit int
}

// Approved is a plan together with its approval, as Execute takes it.
type Approved struct {
	// Plan is the plan exactly as it was shown for approval.
	Plan Plan
	// By is the approver's principal string.
	By string
	// At is when the approval was recorded; it must be before Plan.ExpiresAt.
	At time.Time
}
