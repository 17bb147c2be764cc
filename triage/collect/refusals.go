package collect

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/whypending/whypending/triage"
)

// refusals is a reader that notes every read that fails during one question (the API server
// refuses it with 403 Forbidden, it times out, the connection fails, a 5xx), so the answer
// can say it is partial and what would complete it. Each question gets
// its own (Collector.recording). Reads that only feed "did you mean" suggestions (names,
// podRefs, workloadsNamed, podExists, serviceAccountNamespaces) are not noted: without them
// the answer is as complete; nor are the ConfigMap keys collectNames reads, which an answer
// calls unknown when it lacks them.
type refusals struct {
	reader
	mu   sync.Mutex
	seen map[triage.RefusedRead]bool
	list []triage.RefusedRead
	// stalls are the reads (resource and namespace) that timed out: asked again in the same
	// question (the events of each of a workload's pods), they fail at once with that error
	// instead of waiting out another request timeout each.
	stalls map[string]error
}

// recording returns a copy of c whose reads are noted in the returned refusals.
func (c *Collector) recording() (*Collector, *refusals) {
	r := &refusals{reader: c.read, seen: map[triage.RefusedRead]bool{}}
	cc := *c
	cc.read, cc.refused = r, r
	return &cc, r
}

// noteIPAM notes a refused Calico IPAM read (made through package calico, not the reader):
// the resource is the one the API server names in its answer.
func (r *refusals) noteIPAM(err error) {
	if status, ok := forbidden(err); ok {
		if d := status.Status().Details; d != nil && d.Kind != "" {
			resource := d.Kind
			if d.Group != "" {
				resource += "." + d.Group
			}
			r.note(err, time.Time{}, "list", resource, "")
		}
	}
}

// refused returns the refused reads in the order they were made (nil when none).
func (r *refusals) refused() []triage.RefusedRead {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]triage.RefusedRead(nil), r.list...)
}

// note records err when the read failed (failure): refused by the API server, timed out or
// failed otherwise, started at start (zero: not timed). A Forbidden error inside a joined
// error (a read made of two requests) counts too. The first failure of a read is kept.
func (r *refusals) note(err error, start time.Time, verb, resource, namespace string) {
	why, ok := failure(err)
	if !ok {
		return
	}
	key := triage.RefusedRead{Verb: verb, Resource: resource, Namespace: namespace}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	if why == triage.ReadTimedOut {
		if r.stalls == nil {
			r.stalls = map[string]error{}
		}
		r.stalls[resource+"/"+namespace] = err
	}
	key.Failure, key.Message = why, err.Error()
	if status, ok := forbidden(err); ok {
		key.Message = status.Status().Message
	} else if !start.IsZero() {
		key.WaitedSeconds = int(time.Since(start).Round(time.Second) / time.Second)
	}
	r.list = append(r.list, key)
}

// failure reports whether err means a read failed, and why: refused (403), timed out, or
// failed otherwise (the connection, a 5xx, 429 Too Many Requests, 410 Gone for an expired
// list). The API server's other answers (404 NotFound, 400 for a container with no previous
// log, …) say something about the object, so they are answers, not failures.
func failure(err error) (triage.ReadFailure, bool) {
	var status apierrors.APIStatus
	var timeout interface{ Timeout() bool } // net.Error, *url.Error, fleet.TimeoutError
	switch {
	case err == nil:
		return "", false
	case apierrors.IsForbidden(err) && errors.As(err, &status):
		return triage.ReadForbidden, true
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		errors.As(err, &timeout) && timeout.Timeout():
		return triage.ReadTimedOut, true
	case errors.As(err, &status):
		code := status.Status().Code
		if code >= 500 || code == http.StatusTooManyRequests || code == http.StatusGone {
			return triage.ReadFailed, true
		}
		return "", false
	}
	return triage.ReadFailed, true
}

// forbidden returns the Forbidden status in err, if there is one.
func forbidden(err error) (apierrors.APIStatus, bool) {
	var status apierrors.APIStatus
	if err == nil || !apierrors.IsForbidden(err) || !errors.As(err, &status) {
		return nil, false
	}
	return status, true
}

// onlyForbidden reports whether err, and every error joined in it, is the API server's 403
// Forbidden.
func onlyForbidden(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlyForbidden(e) {
				return false
			}
		}
		return len(j.Unwrap()) > 0
	}
	_, ok := forbidden(err)
	return ok
}

// refusedWorkloadLists are the workload resources whose list in namespace was refused.
func refusedWorkloadLists(namespace string, refused []triage.RefusedRead) []string {
	var out []string
	for _, r := range refused {
		if r.Verb == "list" && r.Namespace == namespace && strings.Contains(r.Resource, ".") {
			out = append(out, r.Resource)
		}
	}
	return out
}

// workloadResource is the resource of a workload kind with its API group: "deployments.apps".
func workloadResource(kind triage.Kind) string {
	group := "apps"
	if kind == triage.KindJob || kind == triage.KindCronJob {
		group = "batch"
	}
	return strings.ToLower(string(kind)) + "s." + group
}

func (r *refusals) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	start := time.Now()
	p, err := r.reader.pod(ctx, namespace, name)
	r.note(err, start, "get", "pods", namespace)
	return p, err
}

func (r *refusals) pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	start := time.Now()
	p, err := r.reader.pods(ctx, namespace, sel)
	r.note(err, start, "list", "pods", namespace)
	return p, err
}

func (r *refusals) podsOnNode(ctx context.Context, namespace, node string, sel labels.Selector) ([]*corev1.Pod, error) {
	start := time.Now()
	p, err := r.reader.podsOnNode(ctx, namespace, node, sel)
	r.note(err, start, "list", "pods", namespace)
	return p, err
}

func (r *refusals) boundPods(ctx context.Context, node string, skip types.UID) ([]*corev1.Pod, error) {
	start := time.Now()
	p, err := r.reader.boundPods(ctx, node, skip)
	r.note(err, start, "list", "pods", "")
	return p, err
}

func (r *refusals) allBound(ctx context.Context) (triage.NodePods, map[string]corev1.ResourceList, error) {
	start := time.Now()
	p, used, err := r.reader.allBound(ctx)
	r.note(err, start, "list", "pods", "")
	return p, used, err
}

func (r *refusals) podLog(ctx context.Context, namespace, name string, opts *corev1.PodLogOptions) ([]byte, error) {
	start := time.Now()
	b, err := r.reader.podLog(ctx, namespace, name, opts)
	if why, _ := failure(err); why != triage.ReadFailed {
		// A log the API server answers with an error is the kubelet's failure, relayed (it
		// cannot reach the node's kubelet); the finding shows it as the log's own evidence
		// (triage.LogTail.Err). A refused or timed-out log read makes the answer partial.
		r.note(err, start, "get", "pods/log", namespace)
	}
	return b, err
}

// stalled is the error of an earlier read of resource in namespace that timed out in this
// question, nil when none did.
func (r *refusals) stalled(resource, namespace string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stalls[resource+"/"+namespace]
}

func (r *refusals) podEvents(ctx context.Context, pod *corev1.Pod) ([]triage.Event, error) {
	if err := r.stalled("events", pod.Namespace); err != nil {
		return nil, err
	}
	start := time.Now()
	e, err := r.reader.podEvents(ctx, pod)
	r.note(err, start, "list", "events", pod.Namespace)
	return e, err
}

func (r *refusals) objectEvents(ctx context.Context, namespace, uid string) ([]triage.Event, error) {
	if err := r.stalled("events", namespace); err != nil {
		return nil, err
	}
	start := time.Now()
	e, err := r.reader.objectEvents(ctx, namespace, uid)
	r.note(err, start, "list", "events", namespace)
	return e, err
}

func (r *refusals) namespaceEvents(ctx context.Context, namespace string) (eventIndex, error) {
	if err := r.stalled("events", namespace); err != nil {
		return nil, err
	}
	start := time.Now()
	e, err := r.reader.namespaceEvents(ctx, namespace)
	r.note(err, start, "list", "events", namespace)
	return e, err
}

func (r *refusals) node(ctx context.Context, name string) (*corev1.Node, error) {
	start := time.Now()
	n, err := r.reader.node(ctx, name)
	r.note(err, start, "get", "nodes", "")
	return n, err
}

func (r *refusals) nodes(ctx context.Context) ([]*corev1.Node, error) {
	start := time.Now()
	n, err := r.reader.nodes(ctx)
	r.note(err, start, "list", "nodes", "")
	return n, err
}

func (r *refusals) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	start := time.Now()
	c, err := r.reader.claim(ctx, namespace, name)
	r.note(err, start, "get", "persistentvolumeclaims", namespace)
	return c, err
}

func (r *refusals) claims(ctx context.Context, namespace string) ([]*corev1.PersistentVolumeClaim, error) {
	start := time.Now()
	c, err := r.reader.claims(ctx, namespace)
	r.note(err, start, "list", "persistentvolumeclaims", namespace)
	return c, err
}

func (r *refusals) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	start := time.Now()
	v, err := r.reader.volume(ctx, name)
	r.note(err, start, "get", "persistentvolumes", "")
	return v, err
}

func (r *refusals) volumes(ctx context.Context, names map[string]bool) (map[string]*corev1.PersistentVolume, error) {
	start := time.Now()
	v, err := r.reader.volumes(ctx, names)
	r.note(err, start, "list", "persistentvolumes", "")
	return v, err
}

func (r *refusals) storageClasses(ctx context.Context) ([]*storagev1.StorageClass, error) {
	start := time.Now()
	s, err := r.reader.storageClasses(ctx)
	r.note(err, start, "list", "storageclasses.storage.k8s.io", "")
	return s, err
}

func (r *refusals) csiNodes(ctx context.Context) ([]*storagev1.CSINode, error) {
	start := time.Now()
	n, err := r.reader.csiNodes(ctx)
	r.note(err, start, "list", "csinodes.storage.k8s.io", "")
	return n, err
}

func (r *refusals) workload(ctx context.Context, kind triage.Kind, namespace, name string) (runtime.Object, error) {
	start := time.Now()
	o, err := r.reader.workload(ctx, kind, namespace, name)
	r.note(err, start, "get", workloadResource(kind), namespace)
	return o, err
}

func (r *refusals) listWorkloads(ctx context.Context, namespace string, kind triage.Kind, into *namespaceWorkloads) error {
	start := time.Now()
	err := r.reader.listWorkloads(ctx, namespace, kind, into)
	r.note(err, start, "list", workloadResource(kind), namespace)
	return err
}

func (r *refusals) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	start := time.Now()
	n, err := r.reader.namespace(ctx, name)
	r.note(err, start, "get", "namespaces", "")
	return n, err
}

func (r *refusals) quotas(ctx context.Context, namespace string) ([]*corev1.ResourceQuota, error) {
	start := time.Now()
	q, err := r.reader.quotas(ctx, namespace)
	r.note(err, start, "list", "resourcequotas", namespace)
	return q, err
}

func (r *refusals) limitRanges(ctx context.Context, namespace string) ([]*corev1.LimitRange, error) {
	start := time.Now()
	l, err := r.reader.limitRanges(ctx, namespace)
	r.note(err, start, "list", "limitranges", namespace)
	return l, err
}

func (r *refusals) configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	start := time.Now()
	c, err := r.reader.configMap(ctx, namespace, name)
	r.note(err, start, "list", "configmaps", namespace)
	return c, err
}

func (r *refusals) service(ctx context.Context, namespace, name string) (*corev1.Service, error) {
	start := time.Now()
	s, err := r.reader.service(ctx, namespace, name)
	r.note(err, start, "list", "services", namespace)
	return s, err
}
