package calico

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fixtureSpec describes a generated IPAM fixture: Nodes nodes with BlocksPerNode /26 blocks
// each (in pool 10.0.0.0/12), Allocations allocations spread evenly over the blocks. Each node
// has one IPIP tunnel allocation (ordinal 0 of its first block, in use through the node
// annotation); of the other allocations every fifth is leaked (its pod does not exist) and the
// rest are used by Running pods. Every allocation has its own IPAMHandle.
type fixtureSpec struct {
	Nodes, BlocksPerNode, Allocations int
}

// fixture is what buildFixture created.
type fixture struct {
	spec                   fixtureSpec
	blocks, pods, leaked   int
	handles, tunnels       int
	namespaces             []string
	leakedByBlock          map[string]int
	createdIn              time.Duration
	objectsCreated, writes int64
}

// The sizes of the brief (S and L): calicoctl v3.32.1 was measured at the first one.
var (
	fixtureSmall = fixtureSpec{Nodes: 200, BlocksPerNode: 4, Allocations: 38400}   // 7,640 leaked, 30,560 pods
	fixtureLarge = fixtureSpec{Nodes: 1000, BlocksPerNode: 4, Allocations: 152000} // 30,200 leaked, 120,800 pods
)

const fixtureNamespaces = 20

// fixtureNode is the name of node i.
func fixtureNode(i int) string { return fmt.Sprintf("bench-node-%04d", i) }

// buildFixture creates the fixture through the API with many concurrent writers and no
// client-side rate limit. Objects are realistic in shape (labels, owner references, container
// status) so list costs resemble a real cluster's.
func buildFixture(ctx context.Context, cfg *rest.Config, spec fixtureSpec) (*fixture, error) {
	start := time.Now()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := NewClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	f := &fixture{spec: spec, leakedByBlock: map[string]int{}}
	var writes atomic.Int64
	post := func(ctx context.Context, res string, obj any) error {
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		writes.Add(1)
		if err := cl.raw.Post().Resource(res).Body(body).Do(ctx).Error(); err != nil {
			return fmt.Errorf("create %s: %w", res, err)
		}
		return nil
	}

	// Cluster-wide Calico objects.
	guid := "b7e1c5f0a2d34e6b9c8d7e6f5a4b3c2d"
	apiVersion := cl.APIGroup()
	for _, o := range []struct {
		res string
		obj any
	}{
		{resClusterInfo, map[string]any{"apiVersion": apiVersion, "kind": "ClusterInformation", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"clusterGUID": guid, "clusterType": "k8s,bgp,kdd", "calicoVersion": "v3.32.1", "datastoreReady": true}}},
		{cl.resIPAMConfig(), map[string]any{"apiVersion": apiVersion, "kind": "IPAMConfig", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"strictAffinity": false, "autoAllocateBlocks": true}}},
		{resPools, map[string]any{"apiVersion": apiVersion, "kind": "IPPool", "metadata": map[string]any{"name": "default-ipv4-ippool"},
			"spec": map[string]any{"cidr": "10.0.0.0/12", "blockSize": 26, "ipipMode": "Always", "natOutgoing": true, "nodeSelector": "all()"}}},
	} {
		if err := post(ctx, o.res, o.obj); err != nil {
			return nil, err
		}
	}
	for i := range fixtureNamespaces {
		ns := fmt.Sprintf("bench-%02d", i)
		f.namespaces = append(f.namespaces, ns)
		writes.Add(1)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}

	// Plan allocations.
	nBlocks := spec.Nodes * spec.BlocksPerNode
	pool := netip.MustParsePrefix("10.0.0.0/12")
	type podPlan struct {
		ns, name, node, ip, containerID string
	}
	type blockPlanF struct {
		obj     map[string]any
		handles []map[string]any
		pods    []podPlan
		affs    map[string]any
	}
	plans := make([]*blockPlanF, nBlocks)
	nonTunnel := 0
	ts := time.Now().UTC().Add(-48 * time.Hour)
	for bi := range nBlocks {
		node := fixtureNode(bi / spec.BlocksPerNode)
		cidr := netip.PrefixFrom(ordinalIP(pool, bi*64), 26)
		n := spec.Allocations / nBlocks
		if bi < spec.Allocations%nBlocks {
			n++
		}
		seq := int64(1_700_000_000_000_000_000) + int64(bi)*1000
		allocs := make([]any, 64)
		var attrs []any
		seqFor := map[string]any{}
		var unalloc []any
		p := &blockPlanF{}
		for ord := range 64 {
			if ord >= n {
				unalloc = append(unalloc, int64(ord))
				continue
			}
			ip := ordinalIP(cidr, ord).String()
			var handle string
			var sec map[string]any
			if ord == 0 && bi%spec.BlocksPerNode == 0 {
				handle = "ipip-tunnel-addr-" + node
				sec = map[string]any{"node": node, "type": "ipipTunnelAddress", "timestamp": ts.Format("2006-01-02 15:04:05.000 -0700 MST")}
				f.tunnels++
			} else {
				ns := f.namespaces[nonTunnel%fixtureNamespaces]
				cid := fmt.Sprintf("%064x", uint64(bi)<<32|uint64(ord)<<8|0x5a)
				handle = "k8s-pod-network." + cid
				leaked := nonTunnel%5 == 4
				name := fmt.Sprintf("web-%05d-%s", nonTunnel, strconv.FormatInt(int64(bi*64+ord), 36))
				if leaked {
					name = "gone-" + name
					f.leaked++
					f.leakedByBlock[cidr.String()]++
				} else {
					p.pods = append(p.pods, podPlan{ns: ns, name: name, node: node, ip: ip, containerID: cid})
				}
				sec = map[string]any{"namespace": ns, "node": node, "pod": name, "timestamp": ts.Format("2006-01-02 15:04:05.000 -0700 MST")}
				nonTunnel++
			}
			allocs[ord] = int64(len(attrs))
			attrs = append(attrs, map[string]any{"handle_id": handle, "secondary": sec})
			seqFor[strconv.Itoa(ord)] = seq + int64(ord)
			p.handles = append(p.handles, map[string]any{"apiVersion": apiVersion, "kind": "IPAMHandle",
				"metadata": map[string]any{"name": HandleName(handle)},
				"spec":     map[string]any{"handleID": handle, "block": map[string]any{cidr.String(): 1}, "deleted": false}})
		}
		p.obj = map[string]any{"apiVersion": apiVersion, "kind": "IPAMBlock", "metadata": map[string]any{"name": BlockName(cidr)},
			"spec": map[string]any{"cidr": cidr.String(), "affinity": "host:" + node, "allocations": allocs, "unallocated": unalloc,
				"attributes": attrs, "sequenceNumber": seq + 64, "sequenceNumberForAllocation": seqFor, "strictAffinity": false, "deleted": false}}
		deleted := any("false")
		if cl.v3 {
			deleted = false
		}
		p.affs = map[string]any{"apiVersion": apiVersion, "kind": "BlockAffinity",
			"metadata": map[string]any{"name": AffinityName(node, cidr), "labels": map[string]any{"projectcalico.org/affinity-type": "host", "projectcalico.org/ip-version": "4"}},
			"spec":     map[string]any{"state": "confirmed", "node": node, "type": "host", "cidr": cidr.String(), "deleted": deleted}}
		plans[bi] = p
		f.blocks++
		f.handles += len(p.handles)
		f.pods += len(p.pods)
	}

	const workers = 96
	// Nodes.
	if err := forEach(ctx, workers, indexes(spec.Nodes), func(ctx context.Context, i int) error {
		node := fixtureNode(i)
		tunnel := ordinalIP(pool, i*spec.BlocksPerNode*64).String()
		writes.Add(1)
		_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
			Labels: map[string]string{"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{"projectcalico.org/IPv4Address": fmt.Sprintf("192.168.%d.%d/16", i/250, i%250+1),
				"projectcalico.org/IPv4IPIPTunnelAddr": tunnel}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("create nodes: %w", err)
	}
	// Blocks, affinities and handles.
	if err := forEach(ctx, workers, plans, func(ctx context.Context, p *blockPlanF) error {
		if err := post(ctx, resBlocks, p.obj); err != nil {
			return err
		}
		return post(ctx, resAffinities, p.affs)
	}); err != nil {
		return nil, err
	}
	var handles []map[string]any
	var pods []podPlan
	for _, p := range plans {
		handles = append(handles, p.handles...)
		pods = append(pods, p.pods...)
	}
	if err := forEach(ctx, workers, handles, func(ctx context.Context, h map[string]any) error {
		return post(ctx, resHandles, h)
	}); err != nil {
		return nil, err
	}
	// Pods: create, then write a Running status.
	started := metav1.NewTime(ts)
	if err := forEach(ctx, workers, pods, func(ctx context.Context, pp podPlan) error {
		pod := benchPod(pp.ns, pp.name, pp.node, pp.ip, pp.containerID, started)
		status := pod.Status
		writes.Add(2)
		created, err := kube.CoreV1().Pods(pp.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		status.QOSClass = created.Status.QOSClass
		created.Status = status
		_, err = kube.CoreV1().Pods(pp.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("create pods: %w", err)
	}
	f.createdIn = time.Since(start)
	f.writes = writes.Load()
	return f, nil
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// benchPod is a Deployment-style pod with Calico's CNI annotations, a Running status and the
// service account token volume the ServiceAccount admission plugin adds (with its random
// name; the test API server runs without that plugin).
func benchPod(ns, name, node, ip, containerID string, started metav1.Time) *corev1.Pod {
	app := "web-" + strconv.Itoa(len(name)%7)
	h := fnv.New32a()
	h.Write([]byte(name))
	token := fmt.Sprintf("kube-api-access-%05x", h.Sum32()&0xfffff) // random-looking, per pod
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d4b9c6f8d"},
			Annotations: map[string]string{
				"cni.projectcalico.org/containerID": containerID,
				"cni.projectcalico.org/podIP":       ip + "/32",
				"cni.projectcalico.org/podIPs":      ip + "/32",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d4b9c6f8d",
				UID: types.UID("3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b"), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/" + app + ":1.24.3",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"},
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				VolumeMounts:             []corev1.VolumeMount{{Name: token, ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			}},
			Volumes: []corev1.Volume{{Name: token, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr(int64(3607))}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}}},
			ServiceAccountName: "default",
			RestartPolicy:      corev1.RestartPolicyAlways,
			DNSPolicy:          corev1.DNSClusterFirst,
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
			},
			HostIP: "192.168.0.1", PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &started,
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Ready: true, Started: ptr(true), Image: "registry.example.com/shop/" + app + ":1.24.3",
				ImageID:     "registry.example.com/shop/" + app + "@sha256:9b2c4f1e0d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c",
				ContainerID: "containerd://" + containerID,
				State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
			}},
		},
	}
}

func ptr[T any](v T) *T { return &v }
