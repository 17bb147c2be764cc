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

// podUse is what the engine keeps of a pod: enough to decide whether it uses an address or is
// about to (CNI ADD in flight).
type podUse struct {
	namespace, name, node string
	ips                   []netip.Addr
	// pending: scheduled, not host-networked, not finished, and no address yet.
	pending bool
}

func (p podUse) owner() string { return "Workload(" + p.namespace + "/" + p.name + ")" }

// podUseOf applies Calico's WorkloadEndpoint rules to a pod. ok is false for pods that can not
// hold a Calico address: unscheduled, host-networked or finished ones. Addresses come from
// status.podIPs, else status.podIP, else the Calico podIPs/podIP annotations, else the AWS
// pod-ips annotation.
func podUseOf(p *podFields) (u podUse, ok bool) {
	if p.node == "" || p.hostNetwork || p.finished() {
		return u, false
	}
	u = podUse{namespace: p.namespace, name: p.name, node: p.node}
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
			u.ips = append(u.ips, a)
		}
	}
	u.pending = len(u.ips) == 0
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

// scanPods lists pods page by page (protobuf, Limit+Continue) with the given field selector
// (default: scheduled pods) and passes each one that can hold a Calico address to fn. Only
// the needed fields are decoded (see podproto.go) and pages are dropped as it goes.
func (c *Client) scanPods(ctx context.Context, fieldSelector string, fn func(podUse)) error {
	return c.scanPodsIn(ctx, "", fieldSelector, fn)
}

// scanAllPods is scanPods over every namespace, listing a few namespaces in parallel (a single
// list is encoded by one server goroutine, so parallel lists use more of the server's cores).
// Namespaces are listed first; a pod can only exist in a namespace that existed before it.
func (c *Client) scanAllPods(ctx context.Context, fn func(podUse)) error {
	var namespaces []string
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := c.meta.Resource(namespacesGVR).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list namespaces: %w", err)
		}
		for i := range list.Items {
			namespaces = append(namespaces, list.Items[i].Name)
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	return forEach(ctx, podListStreams, namespaces, func(ctx context.Context, ns string) error {
		return c.scanPodsIn(ctx, ns, "", fn)
	})
}

// podListStreams is how many namespaces scanAllPods lists at once.
const podListStreams = 4

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// scanPodsIn is scanPods restricted to one namespace ("" for all).
func (c *Client) scanPodsIn(ctx context.Context, namespace, fieldSelector string, fn func(podUse)) error {
	opts := metav1.ListOptions{Limit: listPageSize, FieldSelector: cmp.Or(fieldSelector, scheduledPods)}
	for {
		body, err := c.kube.CoreV1().RESTClient().Get().Namespace(namespace).Resource("pods").
			VersionedParams(&opts, scheme.ParameterCodec).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		opts.Continue, err = decodePodList(body, func(p *podFields) {
			if u, ok := podUseOf(p); ok {
				fn(u)
			}
		})
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		if opts.Continue == "" {
			return nil
		}
	}
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
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := c.meta.Resource(nodesGVR).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		for i := range list.Items {
			fn(nodeUseOf(list.Items[i].Name, list.Items[i].Annotations))
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
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
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		list, err := c.kube.CoreV1().Services("").List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list services: %w", err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
				continue
			}
			l := lbUse{namespace: s.Namespace, name: s.Name}
			for _, in := range s.Status.LoadBalancer.Ingress {
				if a, ok := parseIP(in.IP); ok {
					l.ips = append(l.ips, a)
				}
			}
			if len(l.ips) > 0 {
				fn(l)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return nil
		}
	}
}
