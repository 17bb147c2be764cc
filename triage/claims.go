package triage

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// This file explains why one of the pod's PersistentVolumeClaims is not bound, from the claim,
// its StorageClass, its own events and the pod. The scheduling rules (an unscheduled pod) and
// the volume rules (a pod whose mount times out) share it, so both say the same thing.

const (
	// selectedNodeAnnotation is set on a WaitForFirstConsumer claim by the scheduler once it
	// picks a node; the provisioner then creates the volume for that node.
	selectedNodeAnnotation = "volume.kubernetes.io/selected-node"
	// defaultClassAnnotation marks the default StorageClass.
	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
	// noProvisioner is the provisioner of classes whose PVs are created by hand (local volumes).
	noProvisioner = "kubernetes.io/no-provisioner"
)

// claimWhy is why a claim is not bound, in words and evidence.
type claimWhy struct {
	// Summary completes "PersistentVolumeClaim data is not bound (status Pending): …".
	Summary  string
	Evidence []Evidence
	Fix      []string
	// Stuck is true when waiting will not bind it: something must change first. False means
	// it binds in the normal course (a WaitForFirstConsumer claim of a pod not yet placed).
	Stuck bool
	// Unsure is true when the claim's class and events do not say why.
	Unsure bool
}

// explainUnboundClaim says why the pod's claim name (pvc, not bound) is not bound.
func explainUnboundClaim(s *Snapshot, name string, pvc *corev1.PersistentVolumeClaim) claimWhy {
	pod := s.Pod
	obj := "PersistentVolumeClaim " + pvc.Namespace + "/" + name
	w := claimWhy{}
	for _, e := range s.ClaimEvents[name] {
		if len(w.Evidence) == 2 {
			break
		}
		w.Evidence = append(w.Evidence, Evidence{Object: obj, Reason: e.Reason, Message: e.Message, Count: e.Count, LastSeen: e.LastSeen})
	}
	describePVC := fmt.Sprintf("kubectl describe pvc -n %s %s", shellQuote(pvc.Namespace), shellQuote(name))
	failed := latestClaimEvent(s, name, "ProvisioningFailed")

	if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName == "" {
		w.Stuck = true
		w.Summary = `it sets storageClassName: "", which asks for a pre-created PersistentVolume without a class, and none matches it`
		w.Fix = []string{"kubectl get pv", "Create a PersistentVolume that matches the claim (size, access modes, no class), or give the claim a StorageClass (recreate it: storageClassName cannot change)."}
		return w
	}
	sc := claimClass(s, pvc)
	switch {
	case s.StorageClasses == nil:
		w.Unsure = true
		w.Summary = "the StorageClasses could not be read to say why"
		if s.StorageClassesErr != nil {
			w.Summary += fmt.Sprintf(" (%v)", s.StorageClassesErr)
		}
		w.Fix = []string{describePVC, "kubectl get storageclass"}
		return w
	case pvc.Spec.StorageClassName == nil && sc == nil:
		w.Stuck = true
		w.Summary = "it names no storageClassName and the cluster has no default StorageClass, so only a matching pre-created PersistentVolume can bind it"
		w.Fix = []string{"kubectl get storageclass", "Mark a StorageClass default (annotation storageclass.kubernetes.io/is-default-class: \"true\"; the claim then gets it), or create a PersistentVolume that matches the claim."}
		return w
	case sc == nil:
		class := *pvc.Spec.StorageClassName
		w.Stuck = true
		w.Summary = fmt.Sprintf("its StorageClass %q does not exist", class)
		if near := closestNames(class, sortedKeys(s.StorageClasses), 3); len(near) > 0 {
			w.Summary += fmt.Sprintf(" (did you mean %s?)", strings.Join(near, ", "))
		}
		w.Evidence = append(w.Evidence, Evidence{Object: obj, Field: "spec.storageClassName", Message: class + ": not found"})
		w.Fix = []string{"kubectl get storageclass", fmt.Sprintf("Recreate the claim with an existing storageClassName (it cannot be changed in place), or create StorageClass %s.", class)}
		return w
	}
	w.Evidence = append(w.Evidence, Evidence{Object: "StorageClass " + sc.Name, Field: "provisioner, volumeBindingMode",
		Message: fmt.Sprintf("%s, %s", sc.Provisioner, bindingMode(sc))})
	wffc := bindingMode(sc) == storagev1.VolumeBindingWaitForFirstConsumer
	selected := pvc.Annotations[selectedNodeAnnotation]
	switch {
	case failed != nil:
		w.Stuck = true
		w.Summary = fmt.Sprintf("provisioner %s fails to create its volume: %s", sc.Provisioner, truncate(failed.Message, 240))
		w.Fix = []string{describePVC, fmt.Sprintf("Check the %s provisioner's controller logs and the StorageClass %s parameters.", sc.Provisioner, sc.Name)}
	case sc.Provisioner == noProvisioner:
		w.Stuck = true
		w.Summary = fmt.Sprintf("StorageClass %s has no provisioner (%s): its PersistentVolumes are created by hand, and none matches the claim", sc.Name, noProvisioner)
		w.Fix = []string{"kubectl get pv -o wide", fmt.Sprintf("Create a PersistentVolume of class %s that matches the claim (size, access modes, and for local volumes the node).", sc.Name)}
	case wffc && selected == "" && pod.Spec.NodeName != "" && len(eventsWithReason(s, "Scheduled")) == 0:
		w.Stuck = true
		w.Summary = fmt.Sprintf("StorageClass %s binds on first consumer (WaitForFirstConsumer), but the pod was created with spec.nodeName %s: the scheduler never ran for it, so no node was ever selected for the claim and the volume is never provisioned",
			sc.Name, pod.Spec.NodeName)
		w.Evidence = append(w.Evidence, Evidence{Object: podObject(pod), Field: "spec.nodeName", Message: pod.Spec.NodeName + " (set at creation; no annotation " + selectedNodeAnnotation + " on the claim)"})
		w.Fix = []string{
			fmt.Sprintf("Recreate the pod without spec.nodeName; to keep it on %s use nodeSelector: {kubernetes.io/hostname: %s}, so the scheduler places it and selects the node for the claim.", pod.Spec.NodeName, pod.Spec.NodeName),
			fmt.Sprintf("kubectl get pod -n %s %s -o yaml > pod.yaml   # then replace nodeName with the nodeSelector and: kubectl replace --force -f pod.yaml", shellQuote(pod.Namespace), shellQuote(pod.Name)),
		}
	case wffc && selected == "" && pod.Spec.NodeName == "":
		w.Summary = fmt.Sprintf("StorageClass %s binds on first consumer (WaitForFirstConsumer): the volume is provisioned once the scheduler places the pod", sc.Name)
		w.Fix = []string{describePVC}
	case wffc && selected == "":
		w.Unsure = true
		w.Stuck = true
		w.Summary = fmt.Sprintf("StorageClass %s binds on first consumer (WaitForFirstConsumer), the pod is on %s, and no node is selected for the claim (annotation %s)", sc.Name, pod.Spec.NodeName, selectedNodeAnnotation)
		w.Fix = []string{describePVC, fmt.Sprintf("Check the %s provisioner's logs: it may have given up and cleared the node selection.", sc.Provisioner)}
	case wffc:
		w.Summary = fmt.Sprintf("the scheduler selected node %s for it, and provisioner %s has not created the volume yet", selected, sc.Provisioner)
		w.Unsure = true
		w.Fix = []string{describePVC, fmt.Sprintf("Check that the %s provisioner runs and can create volumes for %s.", sc.Provisioner, selected)}
	default:
		w.Summary = fmt.Sprintf("provisioner %s has not created its volume yet", sc.Provisioner)
		w.Unsure = true
		w.Stuck = true
		w.Fix = []string{describePVC, fmt.Sprintf("Check that the %s provisioner (its controller pods) runs.", sc.Provisioner)}
	}
	return w
}

// bindingMode is the class's volumeBindingMode (Immediate when unset).
func bindingMode(sc *storagev1.StorageClass) storagev1.VolumeBindingMode {
	if sc.VolumeBindingMode == nil {
		return storagev1.VolumeBindingImmediate
	}
	return *sc.VolumeBindingMode
}

// latestClaimEvent returns the claim's newest event with reason, or nil.
func latestClaimEvent(s *Snapshot, name, reason string) *Event {
	for _, e := range s.ClaimEvents[name] {
		if e.Reason == reason {
			return &e
		}
	}
	return nil
}

// claimClass returns the StorageClass a claim uses: the one it names, else the default class
// (storageclass.kubernetes.io/is-default-class) for a claim that names none; nil when unknown.
func claimClass(s *Snapshot, pvc *corev1.PersistentVolumeClaim) *storagev1.StorageClass {
	if pvc.Spec.StorageClassName != nil {
		return s.StorageClasses[*pvc.Spec.StorageClassName]
	}
	for _, name := range sortedKeys(s.StorageClasses) {
		if sc := s.StorageClasses[name]; sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			return sc
		}
	}
	return nil
}
