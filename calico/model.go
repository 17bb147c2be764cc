package calico

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The structs below decode only what the engine reads. Writes never marshal them: they modify
// the unstructured object read from the API server, so fields unknown here survive.

// objectMeta is the part of metadata the engine reads.
type objectMeta struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	ResourceVersion   string            `json:"resourceVersion"`
	CreationTimestamp string            `json:"creationTimestamp"`
	DeletionTimestamp string            `json:"deletionTimestamp"`
	Annotations       map[string]string `json:"annotations"`
}

// blockObject is an IPAMBlock (crd.projectcalico.org/v1 or projectcalico.org/v3; the spec
// JSON is the same).
type blockObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     blockSpec  `json:"spec"`
}

type blockSpec struct {
	CIDR     string  `json:"cidr"`
	Affinity *string `json:"affinity"`
	// Allocations has one entry per ordinal: an index into Attributes, or nil when free.
	Allocations []*int `json:"allocations"`
	// Unallocated is the FIFO of free ordinals.
	Unallocated []int             `json:"unallocated"`
	Attributes  []blockAttributes `json:"attributes"`
	// SequenceNumber goes up on every block write.
	SequenceNumber uint64 `json:"sequenceNumber"`
	// SequenceNumberForAllocation maps an ordinal (decimal string) to SequenceNumber at the
	// time that ordinal was allocated.
	SequenceNumberForAllocation map[string]uint64 `json:"sequenceNumberForAllocation"`
	Deleted                     bool              `json:"deleted"`
}

type blockAttributes struct {
	HandleID  *string        `json:"handle_id"`
	Secondary attrsSecondary `json:"secondary"`
	// ReleasedAt is set (Calico master, IP cooldown) on the shared attribute of released
	// ordinals that are still cooling down.
	ReleasedAt *string `json:"releasedAt"`
}

// attrsSecondary are the secondary attributes the engine reads (decoded into fields rather
// than a map: a large cluster has one per allocation).
type attrsSecondary struct {
	Node      string `json:"node"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
}

// windowsReservedHandle is the handle of the ordinals a Windows node reserves in its blocks
// (the first three and the last); no IPAMHandle object exists for it.
const windowsReservedHandle = "windows-reserved-ipam-handle"

// Secondary attribute keys the CNI plugin and calico-node write.
const (
	attrNode      = "node"
	attrNamespace = "namespace"
	attrPod       = "pod"
	attrType      = "type"
	attrTimestamp = "timestamp"
)

// block is a decoded, validated IPAMBlock.
type block struct {
	name, uid, rv string
	cidr          netip.Prefix
	affinity      string // raw spec.affinity, e.g. "host:worker-1"; "" when none
	spec          *blockSpec
	// seqs is spec.sequenceNumberForAllocation indexed by ordinal: parse moves the map (keyed
	// by decimal strings) here, because a slice costs a fraction of the map's memory and the
	// bot's cache keeps every block of the cluster. nil when the map was kept.
	seqs []uint64
}

func (o *blockObject) parse() (*block, error) {
	p, err := netip.ParsePrefix(o.Spec.CIDR)
	if err != nil {
		return nil, fmt.Errorf("ipamblock %s: bad cidr %q: %w", o.Metadata.Name, o.Spec.CIDR, err)
	}
	if blockSize(p) == 0 {
		return nil, fmt.Errorf("ipamblock %s: unsupported block size %s", o.Metadata.Name, p)
	}
	b := &block{name: o.Metadata.Name, uid: o.Metadata.UID, rv: o.Metadata.ResourceVersion, cidr: p.Masked(), spec: &o.Spec}
	if o.Spec.Affinity != nil {
		b.affinity = *o.Spec.Affinity
	}
	b.seqs = seqsByOrdinal(o.Spec.SequenceNumberForAllocation, len(o.Spec.Allocations))
	if b.seqs != nil {
		o.Spec.SequenceNumberForAllocation = nil
	}
	internAttributes(o.Spec.Attributes)
	return b, nil
}

// seqsByOrdinal converts spec.sequenceNumberForAllocation into a slice indexed by ordinal;
// nil when the map is empty or has a key that is not exactly the decimal form of an ordinal
// of a block of size n (Calico writes strconv.Itoa(ordinal); other keys keep the map, read
// by the exact key).
func seqsByOrdinal(m map[string]uint64, n int) []uint64 {
	if len(m) == 0 {
		return nil
	}
	seqs := make([]uint64, n)
	for k, v := range m {
		ord, err := strconv.Atoi(k)
		if err != nil || ord < 0 || ord >= n || strconv.Itoa(ord) != k {
			return nil
		}
		seqs[ord] = v
	}
	return seqs
}

// internAttributes makes equal node, namespace and type attributes of a block share one
// string: a block's allocations mostly name the same node and a few namespaces.
func internAttributes(attrs []blockAttributes) {
	seen := map[string]string{}
	intern := func(s *string) {
		if v, ok := seen[*s]; ok {
			*s = v
		} else {
			seen[*s] = *s
		}
	}
	for i := range attrs {
		intern(&attrs[i].Secondary.Node)
		intern(&attrs[i].Secondary.Namespace)
		intern(&attrs[i].Secondary.Type)
	}
}

// affineNode is the node of a "host:<node>" affinity, else "".
func (b *block) affineNode() string {
	n, ok := strings.CutPrefix(b.affinity, "host:")
	if !ok {
		return ""
	}
	return n
}

// attrs returns the attributes of an allocated ordinal, or nil when the ordinal is free or its
// attribute index is out of range.
func (b *block) attrs(ord int) *blockAttributes {
	if ord < 0 || ord >= len(b.spec.Allocations) || b.spec.Allocations[ord] == nil {
		return nil
	}
	i := *b.spec.Allocations[ord]
	if i < 0 || i >= len(b.spec.Attributes) {
		return nil
	}
	return &b.spec.Attributes[i]
}

// handleOf is the handle ID of an allocated ordinal, cut at the first '\r' like Calico does
// ("k8s-pod-network.<id>\r\neth0" handles written by old CNI versions), or "".
func (b *block) handleOf(ord int) string {
	a := b.attrs(ord)
	if a == nil || a.HandleID == nil {
		return ""
	}
	return cutHandle(*a.HandleID)
}

// cutHandle cuts a handle ID at its first '\r'.
func cutHandle(h string) string {
	h, _, _ = strings.Cut(h, "\r")
	return h
}

// seqOf is the sequence number the block recorded when ordinal ord was allocated (0 when
// none).
func (b *block) seqOf(ord int) uint64 {
	if b.seqs != nil {
		if ord >= 0 && ord < len(b.seqs) {
			return b.seqs[ord]
		}
		return 0
	}
	return b.spec.SequenceNumberForAllocation[strconv.Itoa(ord)]
}

// reservedOnly reports whether every allocated ordinal belongs to the Windows-reserved handle
// (so the block holds no IP in use); true for a block with no allocation at all.
func (b *block) reservedOnly() bool {
	for ord, a := range b.spec.Allocations {
		if a != nil && !strings.EqualFold(b.handleOf(ord), windowsReservedHandle) {
			return false
		}
	}
	return true
}

// counts returns the number of allocated ordinals and of Windows-reserved ones.
func (b *block) counts() (allocated, reserved int) {
	for ord, a := range b.spec.Allocations {
		if a == nil {
			continue
		}
		allocated++
		if strings.EqualFold(b.handleOf(ord), windowsReservedHandle) {
			reserved++
		}
	}
	return allocated, reserved
}

// validate checks the block invariants Calico's check (master) enforces: one allocation entry
// per address; every allocation points at an existing attribute; every attribute is referenced;
// unallocated holds valid, unique ordinals disjoint from the allocated ones; and allocated plus
// unallocated cover the block. It returns one message per broken invariant.
func (b *block) validate() []string {
	var problems []string
	size := blockSize(b.cidr)
	if len(b.spec.Allocations) != size {
		problems = append(problems, fmt.Sprintf("has %d allocation entries, want %d", len(b.spec.Allocations), size))
	}
	referenced := make([]bool, len(b.spec.Attributes))
	allocated := 0
	for ord, a := range b.spec.Allocations {
		if a == nil {
			continue
		}
		allocated++
		if *a < 0 || *a >= len(b.spec.Attributes) {
			problems = append(problems, fmt.Sprintf("ordinal %d points at missing attribute %d", ord, *a))
			continue
		}
		referenced[*a] = true
	}
	for i, r := range referenced {
		if !r {
			problems = append(problems, fmt.Sprintf("attribute %d is not referenced", i))
		}
	}
	seen := map[int]bool{}
	for _, ord := range b.spec.Unallocated {
		switch {
		case ord < 0 || ord >= len(b.spec.Allocations):
			problems = append(problems, fmt.Sprintf("unallocated ordinal %d is out of range", ord))
		case seen[ord]:
			problems = append(problems, fmt.Sprintf("unallocated ordinal %d is listed twice", ord))
		case b.spec.Allocations[ord] != nil:
			problems = append(problems, fmt.Sprintf("ordinal %d is both allocated and unallocated", ord))
		}
		seen[ord] = true
	}
	if allocated+len(b.spec.Unallocated) != size {
		problems = append(problems, fmt.Sprintf("%d allocated + %d unallocated != %d addresses", allocated, len(b.spec.Unallocated), size))
	}
	return problems
}

// handleMeta is the part of an IPAMHandle a check reads.
type handleMeta struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		HandleID string `json:"handleID"`
		Deleted  bool   `json:"deleted"`
	} `json:"spec"`
}

// handleObject is an IPAMHandle.
type handleObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		HandleID string `json:"handleID"`
		// Block maps a block CIDR to the number of addresses this handle holds in it.
		Block   map[string]int `json:"block"`
		Deleted bool           `json:"deleted"`
	} `json:"spec"`
}

// affinityObject is a BlockAffinity. spec.deleted is a string in crd.projectcalico.org/v1
// and a bool in projectcalico.org/v3, so it is decoded by hand.
type affinityObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		State   string          `json:"state"`
		Node    string          `json:"node"`
		Type    string          `json:"type"`
		CIDR    string          `json:"cidr"`
		Deleted json.RawMessage `json:"deleted"`
	} `json:"spec"`
}

func (a *affinityObject) deleted() bool {
	s := strings.Trim(string(a.Spec.Deleted), `"`)
	d, _ := strconv.ParseBool(s)
	return d
}

// Affinity states (BlockAffinity spec.state).
const (
	stateConfirmed       = "confirmed"
	statePending         = "pending"
	statePendingDeletion = "pendingDeletion"
)

// poolObject is an IPPool.
type poolObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		CIDR      string `json:"cidr"`
		BlockSize int    `json:"blockSize"`
		Disabled  bool   `json:"disabled"`
	} `json:"spec"`
}

// ipamConfigObject is IPAMConfig (v1) / IPAMConfiguration (v3) "default".
type ipamConfigObject struct {
	Spec struct {
		StrictAffinity     bool  `json:"strictAffinity"`
		AutoAllocateBlocks *bool `json:"autoAllocateBlocks"`
		MaxBlocksPerHost   int   `json:"maxBlocksPerHost"`
	} `json:"spec"`
}

// clusterInfoObject is ClusterInformation "default".
type clusterInfoObject struct {
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		ClusterGUID    string `json:"clusterGUID"`
		ClusterType    string `json:"clusterType"`
		CalicoVersion  string `json:"calicoVersion"`
		DatastoreReady *bool  `json:"datastoreReady"`
	} `json:"spec"`
}

// DefaultMaxBlocksPerHost is the limit Calico applies when IPAMConfig maxBlocksPerHost is 0.
const DefaultMaxBlocksPerHost = 20
