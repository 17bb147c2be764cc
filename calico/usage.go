package calico

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// This file reads what uses addresses: pods, node tunnel annotations and LoadBalancer services.

// Pod annotations Calico CNI writes.
const (
	annPodIP   = "cni.projectcalico.org/podIP"
	annPodIPs  = "cni.projectcalico.org/podIPs"
	annAWSIPs  = "vpc.amazonaws.com/pod-ips"
	phaseDone  = "Completed" // not in the API, but Calico treats it as finished
	podFieldOK = "spec.nodeName!="
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
// hold a Calico address: unscheduled, host-networked or finished ones.
func podUseOf(p *corev1.Pod) (u podUse, ok bool) {
	if p.Spec.NodeName == "" || p.Spec.HostNetwork || podFinished(p) {
		return u, false
	}
	u = podUse{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName}
	var raw []string
	switch {
	case len(p.Status.PodIPs) > 0:
		for _, ip := range p.Status.PodIPs {
			raw = append(raw, ip.IP)
		}
	case p.Status.PodIP != "":
		raw = []string{p.Status.PodIP}
	case p.Annotations[annPodIPs] != "":
		raw = strings.Split(p.Annotations[annPodIPs], ",")
	case p.Annotations[annPodIP] != "":
		raw = []string{p.Annotations[annPodIP]}
	case p.Annotations[annAWSIPs] != "":
		raw = strings.Split(p.Annotations[annAWSIPs], ",")
	}
	for _, s := range raw {
		if a, ok := parseIP(s); ok {
			u.ips = append(u.ips, a)
		}
	}
	u.pending = len(u.ips) == 0
	return u, true
}

// podFinished is Calico's IsFinished: phase Failed, Succeeded or Completed, or being deleted
// after the CNI plugin blanked the podIP annotation.
func podFinished(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		if ip, ok := p.Annotations[annPodIP]; ok && ip == "" {
			return true
		}
		if ip, ok := p.Annotations[annAWSIPs]; ok && ip == "" {
			return true
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded, phaseDone:
		return true
	}
	return false
}

// scanPods lists pods page by page (protobuf, Limit+Continue) with the given field selector
// (always restricted to scheduled pods) and passes each one that can hold a Calico address to
// fn. Pages are dropped as it goes, so memory stays at one page plus what fn keeps.
func (c *Client) scanPods(ctx context.Context, fieldSelector string, fn func(podUse)) error {
	sel := podFieldOK
	if fieldSelector != "" {
		sel = fieldSelector
	}
	opts := metav1.ListOptions{Limit: listPageSize, FieldSelector: sel}
	for {
		list, err := c.kube.CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list pods: %w", err)
		}
		for i := range list.Items {
			if u, ok := podUseOf(&list.Items[i]); ok {
				fn(u)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
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
