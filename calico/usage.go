package calico

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// This file reads what uses addresses: pods, node tunnel annotations and LoadBalancer services.

// Pod annotations Calico CNI writes.
const (
	annPodIP      = "cni.projectcalico.org/podIP"
	annPodIPs     = "cni.projectcalico.org/podIPs"
	annAWSIPs     = "vpc.amazonaws.com/pod-ips"
	phaseDone     = "Completed" // not in the API, but Calico treats it as finished
	scheduledPods = "spec.nodeName!="
)

// tunnelAnnotations are the k8s Node annotations that hold Calico tunnel addresses in KDD mode.
// calicoctl reads only the IPv4 ones; the IPv6 ones are in use just the same.
var tunnelAnnotations = []string{
	"projectcalico.org/IPv4IPIPTunnelAddr",
	"projectcalico.org/IPv4VXLANTunnelAddr",
	"projectcalico.org/IPv6VXLANTunnelAddr",
	"projectcalico.org/IPv4WireguardInterfaceAddr",
	"projectcalico.org/IPv6WireguardInterfaceAddr",
}

// PodUse is what a pod does with Calico addresses: enough to decide whether it uses an
// address or is about to (CNI ADD in flight). PodUseOf makes one from a pod.
type PodUse struct {
	Namespace, Name, Node string
	// IPs are the pod's addresses (status.podIPs, else status.podIP, else Calico's
	// cni.projectcalico.org/podIPs or podIP annotation, else vpc.amazonaws.com/pod-ips).
	IPs []netip.Addr
	// Pending: scheduled, not host-networked, not finished, and no address yet.
	Pending bool
}

func (p PodUse) owner() string { return "Workload(" + p.Namespace + "/" + p.Name + ")" }

// PodUseOf applies Calico's WorkloadEndpoint rules to a pod. ok is false for a pod that can not
// hold a Calico address: unscheduled, host-networked or finished (phase Failed or Succeeded,
// or being deleted after the CNI plugin blanked its podIP annotation).
func PodUseOf(pod *corev1.Pod) (u PodUse, ok bool) {
	return podUseOf(podFieldsOf(pod))
}

// podUseOf is PodUseOf on the fields decoded from a pod list (podproto.go).
func podUseOf(p *podFields) (u PodUse, ok bool) {
	if p.node == "" || p.hostNetwork || p.finished() {
		return u, false
	}
	u = PodUse{Namespace: p.namespace, Name: p.name, Node: p.node}
	var raw []string
	switch {
	case len(p.podIPs) > 0:
		raw = p.podIPs
	case p.podIP != "":
		raw = []string{p.podIP}
	case p.annIPs != nil && *p.annIPs != "":
		raw = strings.Split(*p.annIPs, ",")
	case p.annIP != nil && *p.annIP != "":
		raw = []string{*p.annIP}
	case p.annAWS != nil && *p.annAWS != "":
		raw = strings.Split(*p.annAWS, ",")
	}
	for _, s := range raw {
		if a, ok := parseIP(s); ok {
			u.IPs = append(u.IPs, a)
		}
	}
	u.Pending = len(u.IPs) == 0
	return u, true
}

// finished is Calico's IsFinished: phase Failed, Succeeded or Completed, or being deleted
// after the CNI plugin blanked the podIP annotation.
func (p *podFields) finished() bool {
	if p.deleting && (p.annIP != nil && *p.annIP == "" || p.annAWS != nil && *p.annAWS == "") {
		return true
	}
	switch corev1.PodPhase(p.phase) {
	case corev1.PodFailed, corev1.PodSucceeded, phaseDone:
		return true
	}
	return false
}

// scanPods lists pods (protobuf, one unpaginated request, answered from the API server's watch
// cache) with the given field selector (default: scheduled pods) and passes each one that can
// hold a Calico address to fn. Only the needed fields are decoded (see podproto.go).
func (c *Client) scanPods(ctx context.Context, fieldSelector string, fn func(PodUse)) error {
	return c.scanPodsIn(ctx, "", fieldSelector, fn)
}

// scanAllPods is scanPods over every namespace, listing a few namespaces in parallel (a single
// list is encoded by one server goroutine, so parallel lists use more of the server's cores).
// Namespaces are listed first; a pod can only exist in a namespace that existed before it.
// Each response is decoded as it streams in, one pod at a time (decodePodList).
func (c *Client) scanAllPods(ctx context.Context, fn func(PodUse)) error {
	list, err := c.meta.Resource(namespacesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	namespaces := make([]string, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, list.Items[i].Name)
	}
	return forEach(ctx, podListStreams, namespaces, func(ctx context.Context, ns string) error {
		return c.scanPodsIn(ctx, ns, "", fn)
	})
}

// podListStreams is how many namespaces scanAllPods lists at once.
const podListStreams = 4

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// scanPodsIn is scanPods restricted to one namespace ("" for all).
func (c *Client) scanPodsIn(ctx context.Context, namespace, fieldSelector string, fn func(PodUse)) error {
	opts := metav1.ListOptions{FieldSelector: cmp.Or(fieldSelector, scheduledPods)}
	body, err := c.kube.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").
		VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	defer body.Close()
	err = decodePodList(body, func(p *podFields) {
		if u, ok := podUseOf(p); ok {
			fn(u)
		}
	})
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	return nil
}

// nodeUse is a node's Calico tunnel addresses.
type nodeUse struct {
	name string
	ips  []netip.Addr
}

func (n nodeUse) owner() string { return "Node(" + n.name + ")" }

func nodeUseOf(name string, annotations map[string]string) nodeUse {
	n := nodeUse{name: name}
	for _, k := range tunnelAnnotations {
		if a, ok := parseIP(annotations[k]); ok {
			n.ips = append(n.ips, a)
		}
	}
	return n
}

var nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// scanNodes lists node metadata (PartialObjectMetadata, so no node status is transferred) and
// passes each node's tunnel addresses to fn.
func (c *Client) scanNodes(ctx context.Context, fn func(nodeUse)) error {
	list, err := c.meta.Resource(nodesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for i := range list.Items {
		fn(nodeUseOf(list.Items[i].Name, list.Items[i].Annotations))
	}
	return nil
}

// getNode reads one node's tunnel addresses; exists is false when the node is gone.
func (c *Client) getNode(ctx context.Context, name string) (n nodeUse, exists bool, err error) {
	m, err := c.meta.Resource(nodesGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if isNotFound(err) {
			return nodeUse{name: name}, false, nil
		}
		return n, false, fmt.Errorf("get node %s: %w", name, err)
	}
	return nodeUseOf(name, m.Annotations), true, nil
}

// lbUse is a LoadBalancer service's ingress addresses.
type lbUse struct {
	namespace, name string
	ips             []netip.Addr
}

func (l lbUse) owner() string { return "Service(" + l.namespace + "/" + l.name + ")" }

// scanLoadBalancers passes the ingress addresses of every Service of type LoadBalancer to fn.
// Unlike calicoctl it does not need KubeControllersConfiguration: callers count an address only
// when it is in a Calico pool or allocated in a block, which is a superset of Calico-managed
// load balancer addresses and so errs on the side of "in use".
func (c *Client) scanLoadBalancers(ctx context.Context, fn func(lbUse)) error {
	list, err := c.kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list services: %w", err)
	}
	for i := range list.Items {
		if l, ok := lbUseOf(&list.Items[i]); ok {
			fn(l)
		}
	}
	return nil
}

// lbUseOf is the ingress addresses of a Service of type LoadBalancer; ok is false for other
// services and for one without an ingress address.
func lbUseOf(s *corev1.Service) (lbUse, bool) {
	if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return lbUse{}, false
	}
	l := lbUse{namespace: s.Namespace, name: s.Name}
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, ok := parseIP(in.IP); ok {
			l.ips = append(l.ips, a)
		}
	}
	return l, len(l.ips) > 0
}
