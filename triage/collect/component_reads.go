package collect

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// This file holds the reads of the objects that explain a component's own message: when a
// CSI driver, a CNI agent or a registry name is what a pod waits on, the answer reads the
// object behind the message (the driver's node DaemonSet and its events, the aws-node
// DaemonSet's settings, the registry the cluster publishes). Every read goes through the
// Collector's reader, so it works on both backends and a refused read makes the answer
// partial; each is best effort: a read that fails leaves its part empty with the error, so
// the rule says "not readable" rather than guessing. The rules decide what to read
// (triage.NeedsCSIPlugin, …), so a pod that needs none of it costs no request.

// collectComponents fills the parts of s that explain a component's message (see the file
// comment). Collect calls it after the pod's events, node and bound pods are in s.
func (c *Collector) collectComponents(ctx context.Context, s *triage.Snapshot) {
	if s.Pod == nil {
		return
	}
	if driver := triage.NeedsCSIPlugin(s); driver != "" {
		s.CSIPlugin = c.readCSIPlugin(ctx, driver, s.Pod.Spec.NodeName)
	}
	if triage.NeedsAWSNode(s) {
		s.AWSNode, s.AWSNodeErr = c.daemonSet(ctx, metav1.NamespaceSystem, "aws-node")
		if name := triage.AWSNodePodName(s); name != "" {
			s.AWSNodePod, _ = c.read.pod(ctx, metav1.NamespaceSystem, name) // nil when not readable: the DaemonSet's template answers
		}
	}
	if triage.NeedsRegistryHosting(s) {
		s.RegistryHosting, s.RegistryHostingErr = c.localRegistryHosting(ctx)
	}
}

// collectWorkloadComponents fills the parts of ws that explain an admission refusal beyond the
// namespace's own settings: the other namespaces that have the missing ServiceAccount's name,
// and the Services behind webhooks that could not be called.
func (c *Collector) collectWorkloadComponents(ctx context.Context, ws *triage.WorkloadSnapshot) {
	if name := triage.MissingServiceAccount(ws); name != "" {
		if nss, err := c.read.serviceAccountNamespaces(ctx, name); err == nil {
			ws.ServiceAccountElsewhere = slices.DeleteFunc(nss, func(ns string) bool { return ns == ws.Requested.Namespace })
		}
	}
	for _, key := range triage.NeedsWebhookServices(ws) {
		ns, name, _ := strings.Cut(key, "/")
		svc, err := c.read.service(ctx, ns, name)
		if err != nil {
			continue // not readable: the rule says nothing about a deadlock
		}
		if ws.WebhookServices == nil {
			ws.WebhookServices = map[string]*corev1.Service{}
		}
		ws.WebhookServices[key] = svc
	}
}

// readCSIPlugin reads what explains CSI driver driver not registered on node: the DaemonSets
// that run its node plugin, their events and namespaces, and the node's CSINode.
func (c *Collector) readCSIPlugin(ctx context.Context, driver, node string) *triage.CSIPlugin {
	p := &triage.CSIPlugin{Driver: driver, Events: map[types.UID][]triage.Event{}, Namespaces: map[string]*corev1.Namespace{}}
	var all namespaceWorkloads
	if err := c.read.listWorkloads(ctx, metav1.NamespaceAll, triage.KindDaemonSet, &all); err != nil {
		p.DaemonSetsErr = fmt.Errorf("list daemonsets: %w", err)
	}
	p.DaemonSets = triage.CSIPluginDaemonSets(all.daemonSets, driver)
	for _, ds := range p.DaemonSets {
		evs, err := c.read.objectEvents(ctx, ds.Namespace, string(ds.UID))
		if err != nil {
			p.EventsErr = fmt.Errorf("list events in %s: %w", ds.Namespace, err)
		}
		p.Events[ds.UID] = evs
		if _, seen := p.Namespaces[ds.Namespace]; !seen {
			if ns, err := c.read.namespace(ctx, ds.Namespace); err == nil {
				p.Namespaces[ds.Namespace] = ns
			}
		}
	}
	p.CSINode = c.csiNode(ctx, node)
	return p
}

// daemonSet reads one DaemonSet; nil without error when it does not exist.
func (c *Collector) daemonSet(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	o, err := c.read.workload(ctx, triage.KindDaemonSet, ns, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get daemonset %s/%s: %w", ns, name, err)
	}
	return o.(*appsv1.DaemonSet), nil
}

// csiNode returns the node's CSINode from the reader's CSINodes (the chart grants list, not
// get); nil when it does not exist or cannot be read.
func (c *Collector) csiNode(ctx context.Context, node string) *storagev1.CSINode {
	all, err := c.read.csiNodes(ctx)
	if err != nil {
		return nil
	}
	for _, n := range all {
		if n.Name == node {
			return n
		}
	}
	return nil
}

// localRegistryHostingNamespace and localRegistryHostingName name the ConfigMap in which a
// cluster publishes its local registry (KEP-1755: kind, k3d, minikube, MicroK8s write it).
const (
	localRegistryHostingNamespace = "kube-public"
	localRegistryHostingName      = "local-registry-hosting"
)

// localRegistryHosting reads the cluster's published local registry (KEP-1755's ConfigMap
// kube-public/local-registry-hosting); nil without error when the cluster publishes none.
func (c *Collector) localRegistryHosting(ctx context.Context) (*triage.RegistryHosting, error) {
	cm, err := c.read.configMap(ctx, localRegistryHostingNamespace, localRegistryHostingName)
	if err != nil {
		return nil, fmt.Errorf("list configmaps in %s: %w", localRegistryHostingNamespace, err)
	}
	if cm == nil {
		return nil, nil
	}
	return triage.ParseRegistryHosting(cm.Data)
}
