package collect

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/triage"
)

// collectNames reads, when a rule reports a ConfigMap, Secret or PVC missing
// (triage.NeedsNames), the names of those objects in the pod's namespace with their
// creationTimestamps, then the keys of the ConfigMaps a kubelet report calls missing that exist
// now, or says lack a key (triage.NeedsConfigMapKeys: the keys only, never the values), and the
// metadata of the pod's controlling Job (a Helm hook carries helm.sh/hook there). Best effort: a
// list that fails (RBAC, for example) leaves that resource out, which the rules read as unknown,
// and is not noted as refused (the chart grants no list on Secrets on purpose, so every answer
// about a missing Secret would be partial); Secrets are listed only when a
// SelfSubjectAccessReview does not say no. A ConfigMap whose read fails keeps its keys unknown.
func (c *Collector) collectNames(ctx context.Context, s *triage.Snapshot) {
	c.collectNamesFrom(ctx, s, c.nameReads())
}

// nameReads are the reads collectNames makes: names, the right to list them, and ConfigMaps.
type nameReads interface {
	names(ctx context.Context, namespace, resource string) ([]string, map[string]time.Time, error)
	mayList(ctx context.Context, namespace, resource string) (allowed, known bool)
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// nameReads returns c's reads for collectNames. Like the names, the keys only sharpen an
// answer that says when they are unknown: a ConfigMap read that fails is not noted as refused
// (refusals.configMap would note it).
func (c *Collector) nameReads() nameReads {
	if c.refused == nil {
		return c.read
	}
	return unnotedConfigMaps{reader: c.read, unnoted: c.refused.reader}
}

// unnotedConfigMaps reads ConfigMaps through unnoted, the rest through reader.
type unnotedConfigMaps struct {
	reader
	unnoted reader
}

func (u unnotedConfigMaps) configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	return u.unnoted.configMap(ctx, namespace, name)
}

// collectNamesFrom is collectNames through reads.
func (c *Collector) collectNamesFrom(ctx context.Context, s *triage.Snapshot, reads nameReads) {
	resources := triage.NeedsNames(s)
	if len(resources) > 0 {
		s.NamesInNamespace = map[string][]string{}
		s.CreatedInNamespace = map[string]map[string]time.Time{}
		for _, res := range resources {
			if res == "secrets" {
				// Listing Secrets, even as metadata, needs the right to read them all: a
				// ServiceAccount without it (the chart's, on purpose) asks first rather than be
				// refused on every such question, and the Secret's presence stays unknown.
				if allowed, known := reads.mayList(ctx, s.Pod.Namespace, res); known && !allowed {
					continue
				}
			}
			if names, created, err := reads.names(ctx, s.Pod.Namespace, res); err == nil {
				s.NamesInNamespace[res], s.CreatedInNamespace[res] = names, created
			}
		}
	}
	for _, name := range triage.NeedsConfigMapKeys(s) {
		cm, err := reads.configMap(ctx, s.Pod.Namespace, name)
		if err != nil || cm == nil {
			continue
		}
		keepConfigMap(s, cm)
	}
	if len(resources) == 0 {
		return
	}
	if ref := metav1.GetControllerOf(s.Pod); ref != nil && ref.Kind == "Job" {
		if o, err := c.read.workload(ctx, triage.KindJob, s.Pod.Namespace, ref.Name); err == nil {
			job := o.(*batchv1.Job)
			s.Controller = &metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
				ObjectMeta: *job.ObjectMeta.DeepCopy(),
			}
		}
	}
}

// sharedNames shares collectNames' reads among the pods of one batch (a namespace sweep, a
// workload's pods): each list of names, access review and ConfigMap is read once, however
// many pods report the same objects missing. Safe for concurrent use.
type sharedNames struct {
	reads nameReads

	mu     sync.Mutex
	lists  map[string]nameList        // by namespace/resource
	rights map[string][2]bool         // by namespace/resource: allowed, known
	cms    map[string]configMapResult // by namespace/name
}

type nameList struct {
	names   []string
	created map[string]time.Time
	err     error
}

type configMapResult struct {
	cm  *corev1.ConfigMap
	err error
}

func newSharedNames(reads nameReads) *sharedNames {
	return &sharedNames{reads: reads, lists: map[string]nameList{}, rights: map[string][2]bool{}, cms: map[string]configMapResult{}}
}

// The reads are made under mu: the pods of a batch that need one wait for it rather than
// repeat it.

func (m *sharedNames) names(ctx context.Context, namespace, resource string) ([]string, map[string]time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := namespace + "/" + resource
	l, ok := m.lists[k]
	if !ok {
		l.names, l.created, l.err = m.reads.names(ctx, namespace, resource)
		m.lists[k] = l
	}
	return l.names, l.created, l.err
}

func (m *sharedNames) mayList(ctx context.Context, namespace, resource string) (allowed, known bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := namespace + "/" + resource
	r, ok := m.rights[k]
	if !ok {
		r[0], r[1] = m.reads.mayList(ctx, namespace, resource)
		m.rights[k] = r
	}
	return r[0], r[1]
}

func (m *sharedNames) configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := namespace + "/" + name
	r, ok := m.cms[k]
	if !ok {
		r.cm, r.err = m.reads.configMap(ctx, namespace, name)
		m.cms[k] = r
	}
	return r.cm, r.err
}

// maxSimilarPods is how many close names a pod-not-found answer suggests.
const maxSimilarPods = 5

// similarPods returns "namespace/name" of up to maxSimilarPods existing pods whose names are
// closest to name, in namespace and in the others: by edit distance, where a shared prefix
// (the Deployment and ReplicaSet part of a generated name) and the asked namespace count as
// closer. It is best effort: a failed list gives no suggestions.
func (c *Collector) similarPods(ctx context.Context, namespace, name string) []string {
	refs := c.read.podRefs(ctx, namespace)
	return visibleNames(ctx, namespace, triage.ClosestPodNames(refs, namespace, name, len(refs)), maxSimilarPods)
}

// visibleKey carries a question's Target.Visible through its reads (Answer).
type visibleKey struct{}

// withVisible returns ctx carrying visible (nil: every namespace is visible).
func withVisible(ctx context.Context, visible func(context.Context, string) bool) context.Context {
	if visible == nil {
		return ctx
	}
	return context.WithValue(ctx, visibleKey{}, visible)
}

// maxVisibleChecks bounds the other namespaces one list of suggestions asks about.
const maxVisibleChecks = 10

// visibleNames returns up to n of names ("namespace/…", closest first) whose namespace is
// namespace or one the question may name (Target.Visible, carried by ctx); at most
// maxVisibleChecks other namespaces are asked about.
func visibleNames(ctx context.Context, namespace string, names []string, n int) []string {
	return keepVisible(ctx, namespace, names, n, func(name string) string {
		ns, _, _ := strings.Cut(name, "/")
		return ns
	})
}

// visibleNamespaces returns up to n of namespaces (in order) that are namespace or that the
// question may name (Target.Visible, carried by ctx), and whether any was left out for that.
func visibleNamespaces(ctx context.Context, namespace string, namespaces []string, n int) (out []string, hidden bool) {
	out = keepVisible(ctx, namespace, namespaces, n, func(ns string) string { return ns })
	return out, len(out) < min(n, len(namespaces))
}

// readableNamespaces returns Snapshot.Readable for the pods on the named nodes (Snapshot.Bound) of a question
// about namespace: the other namespaces among theirs that the question may name
// (Target.Visible, carried by ctx), each asked about once; nil when every namespace may be
// named (no Target.Visible: authorization is off).
func readableNamespaces(ctx context.Context, namespace string, nodes []string, pods triage.NodePods) map[string]bool {
	visible, _ := ctx.Value(visibleKey{}).(func(context.Context, string) bool)
	if visible == nil || pods == nil {
		return nil
	}
	out := map[string]bool{}
	asked := map[string]bool{namespace: true}
	for _, node := range nodes {
		for _, p := range pods.On(node) {
			if !asked[p.Namespace] {
				asked[p.Namespace] = true
				if visible(ctx, p.Namespace) {
					out[p.Namespace] = true
				}
			}
		}
	}
	return out
}

// keepVisible returns up to n of items whose namespace (nsOf) is namespace or visible to the
// question; at most maxVisibleChecks other namespaces are asked about, the rest are left out.
func keepVisible(ctx context.Context, namespace string, items []string, n int, nsOf func(string) string) []string {
	visible, _ := ctx.Value(visibleKey{}).(func(context.Context, string) bool)
	out := make([]string, 0, min(n, len(items)))
	seen := map[string]bool{namespace: true}
	checks := 0
	for _, item := range items {
		if len(out) == n {
			break
		}
		ns := nsOf(item)
		ok, known := seen[ns]
		if !known && visible == nil {
			ok, known = true, true
		}
		if !known && checks < maxVisibleChecks {
			checks++
			ok = visible(ctx, ns)
			seen[ns] = ok
		}
		if ok {
			out = append(out, item)
		}
	}
	return out
}

// keepConfigMap records what a Snapshot keeps of cm: its keys, and whether it is immutable
// (never its values).
func keepConfigMap(s *triage.Snapshot, cm *corev1.ConfigMap) {
	if s.ConfigMapKeys == nil {
		s.ConfigMapKeys = map[string][]string{}
	}
	s.ConfigMapKeys[cm.Name] = configMapKeys(cm)
	if cm.Immutable != nil && *cm.Immutable {
		if s.ImmutableConfigMaps == nil {
			s.ImmutableConfigMaps = map[string]bool{}
		}
		s.ImmutableConfigMaps[cm.Name] = true
	}
}

// configMapKeys returns the keys of cm's data and binaryData, sorted (the values are dropped).
func configMapKeys(cm *corev1.ConfigMap) []string {
	keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
