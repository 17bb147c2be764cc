package collect

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// This file holds the reads of the objects that explain a component's own message: when a
// CSI driver, a CNI agent or a registry name is what a pod waits on, the answer reads the
// object behind the message (the driver's node DaemonSet and its events, the aws-node
// DaemonSet's settings, the registry the cluster publishes). Each read is one small function
// that works on both backends (the cache when the Collector has one, else one request), and
// each is best effort: a read that fails (RBAC, say) leaves its part empty with the error, so
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
		ws.ServiceAccountElsewhere, _ = c.serviceAccountsNamed(ctx, name, ws.Requested.Namespace)
	}
	for _, key := range triage.NeedsWebhookServices(ws) {
		ns, name, _ := strings.Cut(key, "/")
		svc, err := c.service(ctx, ns, name)
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
	all, err := c.allDaemonSets(ctx)
	if err != nil {
		p.DaemonSetsErr = err
	}
	p.DaemonSets = triage.CSIPluginDaemonSets(all, driver)
	for _, ds := range p.DaemonSets {
		evs, err := c.eventsOfObject(ctx, ds.Namespace, ds.UID)
		if err != nil {
			p.EventsErr = err
		}
		p.Events[ds.UID] = evs
		if _, seen := p.Namespaces[ds.Namespace]; !seen {
			if ns, err := c.namespace(ctx, ds.Namespace); err == nil {
				p.Namespaces[ds.Namespace] = ns
			}
		}
	}
	p.CSINode, _ = c.csiNode(ctx, node)
	return p
}

// allDaemonSets lists the DaemonSets of every namespace.
func (c *Collector) allDaemonSets(ctx context.Context) ([]*appsv1.DaemonSet, error) {
	var list func(labels.Selector) ([]*appsv1.DaemonSet, error)
	if wc := c.workloadCache(); wc != nil {
		list = wc.daemonSets.List
	}
	dss, err := listVia(ctx, list, c.client.AppsV1().DaemonSets(metav1.NamespaceAll).List)
	if err != nil {
		return nil, fmt.Errorf("list daemonsets: %w", err)
	}
	return dss, nil
}

// daemonSet reads one DaemonSet; nil without error when it does not exist.
func (c *Collector) daemonSet(ctx context.Context, ns, name string) (*appsv1.DaemonSet, error) {
	var get func(string) (*appsv1.DaemonSet, error)
	if wc := c.workloadCache(); wc != nil {
		get = wc.daemonSets.DaemonSets(ns).Get
	}
	ds, err := getVia(ctx, name, get, c.client.AppsV1().DaemonSets(ns).Get)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get daemonset %s/%s: %w", ns, name, err)
	}
	return ds, nil
}

// eventsOfObject returns the events about the object with uid in ns, newest first: from the
// controller event cache, else listed (both event APIs).
func (c *Collector) eventsOfObject(ctx context.Context, ns string, uid types.UID) ([]triage.Event, error) {
	if c.workloadCache() != nil {
		return c.controllerEvents([]types.UID{uid}, nil)[uid], nil
	}
	evs, err := c.objectEvents(ctx, ns, string(uid))
	if err != nil {
		return nil, fmt.Errorf("list events in %s: %w", ns, err)
	}
	return evs, nil
}

// namespace reads one Namespace.
func (c *Collector) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	var get func(string) (*corev1.Namespace, error)
	if wc := c.workloadCache(); wc != nil {
		get = wc.namespaces.Get
	}
	return getVia(ctx, name, get, c.client.CoreV1().Namespaces().Get)
}

// csiNode reads the node's CSINode (a list with a name selector: the chart grants list, not
// get); nil without error when it does not exist.
func (c *Collector) csiNode(ctx context.Context, node string) (*storagev1.CSINode, error) {
	if c.cache != nil {
		n, err := c.cache.csiNodes.Get(node)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return n, err
	}
	list, err := c.client.StorageV1().CSINodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		return nil, fmt.Errorf("list csinodes: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// localRegistryHostingNamespace and localRegistryHostingName name the ConfigMap in which a
// cluster publishes its local registry (KEP-1755: kind, k3d, minikube, MicroK8s write it).
const (
	localRegistryHostingNamespace = "kube-public"
	localRegistryHostingName      = "local-registry-hosting"
)

// localRegistryHosting reads the cluster's published local registry (KEP-1755's ConfigMap
// kube-public/local-registry-hosting), with a name-selected list (the chart grants list on
// ConfigMaps, not get); nil without error when the cluster publishes none.
func (c *Collector) localRegistryHosting(ctx context.Context) (*triage.RegistryHosting, error) {
	list, err := c.client.CoreV1().ConfigMaps(localRegistryHostingNamespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", localRegistryHostingName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list configmaps in %s: %w", localRegistryHostingNamespace, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return triage.ParseRegistryHosting(list.Items[0].Data)
}

// serviceAccountsNamed returns the namespaces, other than except, that have a ServiceAccount
// named name, sorted (one list across namespaces with a name selector, metadata only).
func (c *Collector) serviceAccountsNamed(ctx context.Context, name, except string) ([]string, error) {
	list, err := c.client.CoreV1().ServiceAccounts(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list serviceaccounts named %s: %w", name, err)
	}
	var out []string
	for _, sa := range list.Items {
		if sa.Namespace != except {
			out = append(out, sa.Namespace)
		}
	}
	sort.Strings(out)
	return out, nil
}

// service reads one Service (a name-selected list: the chart grants list on Services); nil
// without error when it does not exist.
func (c *Collector) service(ctx context.Context, ns, name string) (*corev1.Service, error) {
	list, err := c.client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list services in %s: %w", ns, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
