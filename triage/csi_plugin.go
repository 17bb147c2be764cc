package triage

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// This file explains csi-driver-not-registered: the kubelet mounts a CSI volume only through a
// driver that registered with it, and a driver registers on a node when its node plugin (a pod
// of the driver's node DaemonSet, with the node-driver-registrar sidecar) runs there. So the
// answer is the node DaemonSet and why it has no working pod on the node: its FailedCreate
// events (admission refused the privileged plugin), its own node rules, or its pod's state.

// CSIPlugin is what explains a CSI driver that has not registered with the kubelet of the pod's
// node, read when a mount event says so (NeedsCSIPlugin).
type CSIPlugin struct {
	// Driver is the CSI driver name the kubelet did not find ("org.democratic-csi.nfs").
	Driver string
	// DaemonSets are the DaemonSets, in any namespace, whose pod template runs that driver's
	// node plugin: the driver name appears in a container's command, args or env, or in a
	// hostPath (/var/lib/kubelet/plugins/<driver>/). Sorted by namespace and name.
	DaemonSets []*appsv1.DaemonSet
	// DaemonSetsErr says why the DaemonSets could not be listed (RBAC, say): DaemonSets is then
	// no evidence that none exists.
	DaemonSetsErr error
	// Events maps each DaemonSet's UID to its events (the controller's FailedCreate), newest
	// first; EventsErr says why they could not be read.
	Events    map[types.UID][]Event
	EventsErr error
	// Namespaces maps a DaemonSet's namespace to the Namespace (its pod-security labels); a
	// namespace that could not be read is absent.
	Namespaces map[string]*corev1.Namespace
	// CSINode is the pod's node's CSINode (the drivers registered there); nil when it does not
	// exist or could not be read.
	CSINode *storagev1.CSINode
}

// reCSINotRegistered matches the kubelet's "driver name X not found in the list of registered
// CSI drivers".
var reCSINotRegistered = regexp.MustCompile(`driver name (\S+) not found in the list of registered CSI drivers`)

// NeedsCSIPlugin returns the CSI driver whose node plugin the Collector should read
// (Snapshot.CSIPlugin): a current mount event of the pod says the kubelet has no registration for
// it. "" when none does.
func NeedsCSIPlugin(s *Snapshot) string {
	pod := s.Pod
	if pod == nil || pod.Spec.NodeName == "" || pod.DeletionTimestamp != nil || !awaitingSandbox(pod) {
		return ""
	}
	for _, e := range currentEvents(s, eventsWithReason(s, "FailedMount", "FailedAttachVolume", "FailedMapVolume")) {
		if m := reCSINotRegistered.FindStringSubmatch(e.Message); m != nil {
			return m[1]
		}
	}
	return ""
}

// RunsCSIDriver reports whether a DaemonSet's pod template runs the node plugin of CSI driver
// driver: the name appears in a container's command, args or env values, or in a hostPath.
func RunsCSIDriver(ds *appsv1.DaemonSet, driver string) bool {
	spec := ds.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		for _, s := range append(append([]string(nil), c.Command...), c.Args...) {
			if strings.Contains(s, driver) {
				return true
			}
		}
		for _, e := range c.Env {
			if strings.Contains(e.Value, driver) {
				return true
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && strings.Contains(v.HostPath.Path, driver) {
			return true
		}
	}
	return false
}

// csiNotRegisteredFinding builds csi-driver-not-registered from the mount event e.
func csiNotRegisteredFinding(s *Snapshot, e Event, all []Event) Finding {
	pod := s.Pod
	node := pod.Spec.NodeName
	driver := ""
	if m := reCSINotRegistered.FindStringSubmatch(e.Message); m != nil {
		driver = m[1]
	}
	f := Finding{Code: CodeCSIDriverNotRegistered, Severity: SeverityBlocker, Evidence: []Evidence{EventEvidence(pod, e)}}
	volume := quoted(e.Message, "volume ")
	f.Summary = fmt.Sprintf("The kubelet on %s has no registration for CSI driver %s, so it cannot mount volume %s (%s %s): the driver's node plugin does not run on %s.",
		node, driver, orUnknownVolume(volume), e.Reason, eventSeen(s, e), node)
	plug := s.CSIPlugin
	if plug == nil || plug.Driver != driver {
		f.Evidence = append(f.Evidence, Evidence{Object: "DaemonSets", Message: "the driver's node DaemonSet was not read"})
		f.Fix = csiGenericFix(s, driver)
		return f
	}
	if cn := plug.CSINode; cn != nil {
		var names []string
		for _, d := range cn.Spec.Drivers {
			names = append(names, d.Name)
		}
		msg := "no driver is registered on the node"
		if len(names) > 0 {
			msg = "registered drivers: " + strings.Join(names, ", ")
		}
		f.Evidence = append(f.Evidence, Evidence{Object: "CSINode " + cn.Name, Field: "spec.drivers", Message: msg})
	}
	switch {
	case plug.DaemonSetsErr != nil:
		f.Evidence = append(f.Evidence, Evidence{Object: "DaemonSets", Message: "not readable: " + plug.DaemonSetsErr.Error()})
		f.Summary += " The DaemonSets could not be read, so which node plugin is missing and why is not known."
		f.Fix = csiGenericFix(s, driver)
		return f
	case len(plug.DaemonSets) == 0:
		f.Summary += fmt.Sprintf(" No DaemonSet in the cluster runs a node plugin for %s (none names it in its pod template): the driver's node component is not installed, or the StorageClass or PersistentVolume names a driver (%s) other than the one installed.", driver, driver)
		f.Evidence = append(f.Evidence, Evidence{Object: "DaemonSets", Message: "none names " + driver + " in its pod template"})
		f.Fix = csiGenericFix(s, driver)
		return f
	}
	var fixes []string
	for _, ds := range plug.DaemonSets {
		why, ev, fix := nodePluginState(s, plug, ds)
		f.Summary += " " + why
		f.Evidence = append(f.Evidence, ev...)
		fixes = append(fixes, fix...)
	}
	f.Fix = append(fixes, fmt.Sprintf("kubectl get csinode %s -o jsonpath='{.spec.drivers[*].name}'   # %s appears here once its node plugin registers; the kubelet then mounts the volume on its next retry", shellQuote(node), driver))
	return f
}

// csiGenericFix is the fix when the node DaemonSet is unknown.
func csiGenericFix(s *Snapshot, driver string) []string {
	node := s.Pod.Spec.NodeName
	return []string{
		fmt.Sprintf("kubectl get daemonsets -A | grep -i -e csi -e %s   # the driver's node DaemonSet: DESIRED against CURRENT", shellQuote(strings.Split(driver, ".")[0])),
		fmt.Sprintf("kubectl get pods -A -o wide --field-selector spec.nodeName=%s | grep -i csi   # its pod on the node, if any", shellQuote(node)),
		fmt.Sprintf("kubectl get csinode %s -o jsonpath='{.spec.drivers[*].name}'   # the drivers registered on the node", shellQuote(node)),
	}
}

// nodePluginState says why node DaemonSet ds has no working pod on the pod's node: its own
// retryDaemonSetFix is how to have the DaemonSet controller create its missing pod: it retries
// with back-off, and any change to the DaemonSet object queues it at once. An annotation on the
// DaemonSet (not its template) is that change; kubectl rollout restart would be too, but it
// also replaces the plugin's Ready pods on every other node, one at a time, for nothing.
func retryDaemonSetFix(ds *appsv1.DaemonSet) string {
	return fmt.Sprintf(`kubectl annotate daemonset/%s -n %s whypending.io/retry="$(date +%%s)" --overwrite   # the DaemonSet controller retries with back-off (minutes apart after many failures) and creates its pod once the API server admits it; a change to the DaemonSet object retries at once, and this one restarts none of its running pods (kubectl rollout restart would replace them all)`,
		shellQuote(ds.Name), shellQuote(ds.Namespace))
}

// node rules skip the node, its pod there is not ready, or the API server refuses its pods
// (its newest FailedCreate).
func nodePluginState(s *Snapshot, plug *CSIPlugin, ds *appsv1.DaemonSet) (string, []Evidence, []string) {
	node := s.Node(s.Pod.Spec.NodeName)
	if !s.MayName(ds.Namespace) {
		return fmt.Sprintf("Its node DaemonSet runs in a namespace you cannot read, so its state on %s is not shown.", s.Pod.Spec.NodeName),
			nil, []string{fmt.Sprintf("Ask the cluster's admins why the node plugin of CSI driver %s has no registered pod on %s.", plug.Driver, s.Pod.Spec.NodeName)}
	}
	ref := WorkloadRef{Kind: KindDaemonSet, Namespace: ds.Namespace, Name: ds.Name}
	name := ds.Namespace + "/" + ds.Name
	st := ds.Status
	ev := []Evidence{{Object: ref.String(), Field: "status", Message: fmt.Sprintf("desired %d, current %d, ready %d", st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady)}}
	restart := retryDaemonSetFix(ds)
	// Its own pod on the node.
	for _, p := range s.Bound().On(s.Pod.Spec.NodeName) {
		if !ownedBy(p, ds.UID) {
			continue
		}
		ev = append(ev, Evidence{Object: podObject(p), Field: "status", Reason: PodState(p), Message: "the node plugin's pod on the node"})
		return fmt.Sprintf("Its node DaemonSet %s has pod %s on the node, but it is %s, so the driver's registrar has not registered it.", name, p.Name, PodState(p)),
			ev, []string{
				fmt.Sprintf("kubectl describe pod -n %s %s", shellQuote(p.Namespace), shellQuote(p.Name)),
				fmt.Sprintf("kubectl logs -n %s %s --all-containers --tail=20", shellQuote(p.Namespace), shellQuote(p.Name)),
			}
	}
	// Its own node rules.
	if node != nil {
		spec := ds.Spec.Template.Spec
		if ok, _ := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: spec}).Match(node); !ok {
			return fmt.Sprintf("Its node DaemonSet %s does not run on %s: the node does not match the template's nodeSelector or required node affinity.", name, node.Name),
				ev, []string{fmt.Sprintf("kubectl get daemonset -n %s %s -o jsonpath='{.spec.template.spec.nodeSelector}'; kubectl get node %s --show-labels", shellQuote(ds.Namespace), shellQuote(ds.Name), shellQuote(node.Name))}
		}
		if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, daemonTolerations(spec), func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, false); untolerated {
			return fmt.Sprintf("Its node DaemonSet %s does not tolerate taint %s of %s, so it runs no pod there.", name, taintString(&t), node.Name),
				ev, append([]string{fmt.Sprintf("kubectl get node %s -o jsonpath='{.spec.taints}'   # the node's taints now, and who set them decides whether the plugin should tolerate them", shellQuote(node.Name))},
					tolerationFixes(ref, []corev1.Taint{t}, len(spec.Tolerations) > 0)...)
		}
	}
	// The controller's own words.
	var failed *Event
	for _, e := range plug.Events[ds.UID] {
		if e.Reason == "FailedCreate" {
			failed = &e
			break
		}
	}
	if failed == nil {
		why := fmt.Sprintf("Its node DaemonSet %s has no pod on the node and no FailedCreate event says why.", name)
		if plug.EventsErr != nil {
			why = fmt.Sprintf("Its node DaemonSet %s has no pod on the node; its events could not be read (%v).", name, plug.EventsErr)
		}
		return why, ev, []string{fmt.Sprintf("kubectl describe daemonset -n %s %s", shellQuote(ds.Namespace), shellQuote(ds.Name)), restart}
	}
	ev = append(ev, objectEventEvidence(ref, *failed))
	ns := plug.Namespaces[ds.Namespace]
	why, fix := daemonRefusal(ds, ns, failed.Message)
	// Its newest FailedCreate first: the refusal the change answers, if it still stands.
	look := fmt.Sprintf("kubectl describe daemonset -n %s %s", shellQuote(ds.Namespace), shellQuote(ds.Name))
	if !slices.Contains(fix, look) {
		fix = append([]string{look + "   # its newest FailedCreate event: is the API server still refusing its pods, and why?"}, fix...)
	}
	return fmt.Sprintf("Its node DaemonSet %s creates no pod there (desired %d, current %d): %s", name, st.DesiredNumberScheduled, st.CurrentNumberScheduled, why),
		append(ev, namespaceSecurityEvidence(ns, ds.Namespace)...), append(fix, restart)
}

// daemonRefusal explains the API server's refusal of a system daemon's pod (a CSI or CNI node
// plugin), and fixes it without taking from the daemon what it needs: for Pod Security, the
// namespace label that admits it comes first, never removing privileged or hostPath, which
// the plugin cannot work without.
func daemonRefusal(ds *appsv1.DaemonSet, ns *corev1.Namespace, msg string) (string, []string) {
	ref := WorkloadRef{Kind: KindDaemonSet, Namespace: ds.Namespace, Name: ds.Name}
	nsq := shellQuote(ref.Namespace)
	switch {
	case strings.Contains(msg, "violates PodSecurity "):
		level := ""
		var controls []string
		if m := podSecurityRE.FindStringSubmatch(msg); m != nil {
			level = m[1]
			for _, v := range splitTopLevel(m[2]) {
				c, _, _ := strings.Cut(v, " (")
				controls = append(controls, c)
			}
		}
		source := fmt.Sprintf("namespace %s enforces it with its pod-security.kubernetes.io/enforce label", ref.Namespace)
		if ns != nil && ns.Labels["pod-security.kubernetes.io/enforce"] == "" {
			source = fmt.Sprintf("namespace %s has no pod-security.kubernetes.io/enforce label, so the cluster-wide default level applies (set in the API server's PodSecurity admission configuration; Talos, for one, defaults to baseline)", ref.Namespace)
		}
		return fmt.Sprintf("Pod Security %q refuses its pods (%s), and %s. A storage or network node plugin needs exactly those privileges.", level, strings.Join(controls, "; "), source),
			[]string{
				fmt.Sprintf("kubectl label namespace %s pod-security.kubernetes.io/enforce=privileged --overwrite   # the namespace of a node plugin needs the privileged level; do not remove privileged, hostPath or hostNetwork from the plugin, it does not work without them", nsq),
			}
	case strings.Contains(msg, "unable to validate against any security context constraint"):
		return "no OpenShift SecurityContextConstraints its ServiceAccount may use admits its pods: " + truncate(msg, 300) + ".",
			[]string{fmt.Sprintf("oc adm policy add-scc-to-user privileged -z %s -n %s   # node plugins need the privileged SCC", shellQuote(serviceAccountOf(ds.Spec.Template.Spec)), nsq)}
	}
	return fmt.Sprintf("the API server refuses its pods: %q.", truncateStart(msg, 300)),
		[]string{fmt.Sprintf("kubectl describe daemonset -n %s %s", nsq, shellQuote(ref.Name))}
}

// namespaceSecurityEvidence shows a namespace's pod-security labels, or that it has none.
func namespaceSecurityEvidence(ns *corev1.Namespace, name string) []Evidence {
	if ns == nil {
		return nil
	}
	var labels []string
	for _, k := range sortedKeys(ns.Labels) {
		if strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			labels = append(labels, k+"="+ns.Labels[k])
		}
	}
	msg := "no pod-security.kubernetes.io labels"
	if len(labels) > 0 {
		msg = strings.Join(labels, ", ")
	}
	return []Evidence{{Object: "Namespace " + name, Field: "metadata.labels", Message: msg}}
}

// sortDaemonSets orders DaemonSets by namespace and name.
func sortDaemonSets(dss []*appsv1.DaemonSet) {
	slices.SortFunc(dss, func(a, b *appsv1.DaemonSet) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// CSIPluginDaemonSets returns, from dss, the DaemonSets that run the node plugin of driver
// (RunsCSIDriver), sorted by namespace and name: what Snapshot.CSIPlugin.DaemonSets holds.
func CSIPluginDaemonSets(dss []*appsv1.DaemonSet, driver string) []*appsv1.DaemonSet {
	var out []*appsv1.DaemonSet
	for _, ds := range dss {
		if RunsCSIDriver(ds, driver) {
			out = append(out, ds)
		}
	}
	sortDaemonSets(out)
	return out
}

// serviceAccountOf is a pod spec's ServiceAccount ("default" when unset).
func serviceAccountOf(spec corev1.PodSpec) string {
	if spec.ServiceAccountName != "" {
		return spec.ServiceAccountName
	}
	return "default"
}
