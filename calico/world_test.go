package calico

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/whypending/whypending/internal/testenv"
)

// world builds hand-made IPAM states in a test cluster.
type world struct {
	t    testing.TB
	ctx  context.Context
	c    *testenv.Cluster
	cl   *Client
	kube kubernetes.Interface
}

func newWorld(t testing.TB) *world {
	t.Helper()
	c, cl := startCluster(t, "")
	w := &world{t: t, ctx: context.Background(), c: c, cl: cl, kube: c.Client}
	w.post(resClusterInfo, map[string]any{"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"clusterGUID": "test-guid", "clusterType": "k8s,kdd", "calicoVersion": "v3.32.1", "datastoreReady": true}})
	return w
}

func (w *world) post(res string, obj map[string]any) {
	w.t.Helper()
	obj["apiVersion"] = w.cl.APIGroup()
	kinds := map[string]string{resBlocks: "IPAMBlock", resHandles: "IPAMHandle", resAffinities: "BlockAffinity",
		resPools: "IPPool", resClusterInfo: "ClusterInformation", "ipamconfigs": "IPAMConfig", "ipamconfigurations": "IPAMConfiguration"}
	obj["kind"] = kinds[res]
	body, err := json.Marshal(obj)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.cl.raw.Post().Resource(res).Body(body).Do(w.ctx).Error(); err != nil {
		w.t.Fatalf("create %s: %v", res, err)
	}
}

func (w *world) pool(name, cidr string, blockSize int, disabled bool) {
	w.t.Helper()
	w.post(resPools, map[string]any{"metadata": map[string]any{"name": name},
		"spec": map[string]any{"cidr": cidr, "blockSize": blockSize, "disabled": disabled}})
}

func (w *world) ipamConfig(strict bool, maxBlocks int) {
	w.t.Helper()
	w.post(w.cl.resIPAMConfig(), map[string]any{"metadata": map[string]any{"name": "default"},
		"spec": map[string]any{"strictAffinity": strict, "autoAllocateBlocks": true, "maxBlocksPerHost": maxBlocks}})
}

// attr is one allocation of a block built by world.block.
type attr struct {
	handle string
	sec    map[string]string
}

// podAttr is the attribute the CNI plugin writes for a pod.
func podAttr(ns, pod, node string) attr {
	return attr{handle: "k8s-pod-network." + ns + "." + pod, sec: map[string]string{"namespace": ns, "pod": pod, "node": node, "timestamp": "2026-11-29 10:00:00.000 +0000 UTC"}}
}

// block creates an IPAMBlock with the given allocations (ordinal -> attribute; ordinals that
// share a handle share one attribute, like Calico) and the matching host BlockAffinity when
// affinity is "host:<node>". Ordinal ord gets sequence number 1000+ord.
func (w *world) block(cidr, affinity string, allocs map[int]attr) {
	w.t.Helper()
	p := netip.MustParsePrefix(cidr)
	size := blockSize(p)
	allocations := make([]any, size)
	attrs := []any{}
	attrIndex := map[string]int{}
	seqFor := map[string]any{}
	var unalloc []any
	for ord := range size {
		a, ok := allocs[ord]
		if !ok {
			unalloc = append(unalloc, ord)
			continue
		}
		i, ok := attrIndex[a.handle]
		if !ok || a.handle == "" {
			i = len(attrs)
			attrIndex[a.handle] = i
			m := map[string]any{"secondary": a.sec}
			if a.handle != "" {
				m["handle_id"] = a.handle
			}
			attrs = append(attrs, m)
		}
		allocations[ord] = i
		seqFor[strconv.Itoa(ord)] = 1000 + ord
	}
	spec := map[string]any{"cidr": p.String(), "allocations": allocations, "unallocated": unalloc, "attributes": attrs,
		"sequenceNumber": 2000, "sequenceNumberForAllocation": seqFor, "strictAffinity": false}
	if affinity != "" {
		spec["affinity"] = affinity
	}
	w.post(resBlocks, map[string]any{"metadata": map[string]any{"name": BlockName(p)}, "spec": spec})
	if node, ok := strings.CutPrefix(affinity, "host:"); ok {
		w.affinity(node, cidr, "confirmed")
	}
}

func (w *world) affinity(node, cidr, state string) {
	w.t.Helper()
	var deleted any = "false"
	if w.cl.v3 {
		deleted = false
	}
	p := netip.MustParsePrefix(cidr)
	w.post(resAffinities, map[string]any{"metadata": map[string]any{"name": AffinityName(node, p)},
		"spec": map[string]any{"state": state, "node": node, "type": "host", "cidr": p.String(), "deleted": deleted}})
}

// handle creates an IPAMHandle holding n addresses in each given block.
func (w *world) handle(id string, blocks map[string]int) {
	w.t.Helper()
	b := map[string]any{}
	for k, v := range blocks {
		b[k] = v
	}
	w.post(resHandles, map[string]any{"metadata": map[string]any{"name": HandleName(id)},
		"spec": map[string]any{"handleID": id, "block": b}})
}

func (w *world) node(name string, annotations map[string]string) {
	w.t.Helper()
	if _, err := w.kube.CoreV1().Nodes().Create(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) namespace(name string) {
	w.t.Helper()
	if _, err := w.kube.CoreV1().Namespaces().Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// pod creates a pod bound to node and writes its status: Running with ips, or Pending with no
// address when ips is empty. mut may change the pod before it is created.
func (w *world) pod(ns, name, node string, ips []string, mut func(*corev1.Pod)) *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "example.com/img:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if len(ips) == 0 {
		p.Status.Phase = corev1.PodPending
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	if mut != nil {
		mut(p)
	}
	status := p.Status
	created, err := w.kube.CoreV1().Pods(ns).Create(w.ctx, p, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	status.QOSClass = created.Status.QOSClass
	created.Status = status
	out, err := w.kube.CoreV1().Pods(ns).UpdateStatus(w.ctx, created, metav1.UpdateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) loadBalancer(ns, name, ip string) {
	w.t.Helper()
	s, err := w.kube.CoreV1().Services(ns).Create(w.ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
	if _, err := w.kube.CoreV1().Services(ns).UpdateStatus(w.ctx, s, metav1.UpdateOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

func ips(allocs []Allocation) []string {
	out := []string{}
	for _, a := range allocs {
		out = append(out, a.IP)
	}
	return out
}

func useIPs(u []InUseIP) []string {
	out := []string{}
	for _, a := range u {
		out = append(out, fmt.Sprintf("%s %v", a.IP, a.Owners))
	}
	return out
}
