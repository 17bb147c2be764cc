package triage

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// This file reads a registry host that does not resolve as a name problem before a network
// problem: the image may name a registry the cluster calls by another name. It compares the
// failing host with the registry the cluster publishes (KEP-1755's local-registry-hosting
// ConfigMap, which kind, k3d, minikube and MicroK8s write) and with the registries the node's
// other pods pull from, and names a close spelling.

// RegistryHosting is the local registry a cluster publishes: KEP-1755's LocalRegistryHostingV1,
// the "localRegistryHosting.v1" key of ConfigMap kube-public/local-registry-hosting.
type RegistryHosting struct {
	// Host is how the registry is reached from outside the cluster ("localhost:5001").
	Host string `json:"host,omitempty"`
	// HostFromContainerRuntime is how the nodes' container runtime reaches it
	// ("kind-registry:5000"): the name an image must use.
	HostFromContainerRuntime string `json:"hostFromContainerRuntime,omitempty"`
	// HostFromClusterNetwork is how pods reach it.
	HostFromClusterNetwork string `json:"hostFromClusterNetwork,omitempty"`
	// Help is the publisher's documentation link.
	Help string `json:"help,omitempty"`
}

// ParseRegistryHosting reads a local-registry-hosting ConfigMap's data; nil without error when
// it has no localRegistryHosting.v1 key.
func ParseRegistryHosting(data map[string]string) (*RegistryHosting, error) {
	raw, ok := data["localRegistryHosting.v1"]
	if !ok {
		return nil, nil
	}
	var h RegistryHosting
	if err := yaml.Unmarshal([]byte(raw), &h); err != nil {
		return nil, fmt.Errorf("parse localRegistryHosting.v1: %w", err)
	}
	return &h, nil
}

// NeedsRegistryHosting reports whether the Collector should read the registry the cluster
// publishes (Snapshot.RegistryHosting): a container waits on an image whose registry host does
// not resolve on the node.
func NeedsRegistryHosting(s *Snapshot) bool {
	pod := s.Pod
	if pod == nil || pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range containerStatuses(pod) {
		w := c.Status.State.Waiting
		if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") {
			continue
		}
		for _, pf := range pullFailures(s, c) {
			if m := reLookup.FindStringSubmatch(pf.message); m != nil && m[2] == "no such host" {
				return true
			}
		}
	}
	return false
}

// registryCandidate is a registry name the cluster uses, and where the answer saw it.
type registryCandidate struct {
	host, source string
}

// knownRegistries lists the registry names the cluster uses: the one it publishes (the
// runtime's name first), then the registries of the images of the node's other pods and of
// the pod's other containers.
func knownRegistries(s *Snapshot) []registryCandidate {
	var out []registryCandidate
	seen := map[string]bool{}
	add := func(host, source string) {
		if host != "" && !seen[host] {
			seen[host] = true
			out = append(out, registryCandidate{host, source})
		}
	}
	if h := s.RegistryHosting; h != nil {
		const cm = "ConfigMap kube-public/local-registry-hosting"
		add(h.HostFromContainerRuntime, cm+" (hostFromContainerRuntime: the name the node's runtime uses)")
		add(h.HostFromClusterNetwork, cm+" (hostFromClusterNetwork)")
		add(h.Host, cm+" (host: the name from outside the cluster)")
	}
	var others []string
	byHost := map[string]string{}
	for _, p := range s.Bound().On(s.Pod.Spec.NodeName) {
		for _, c := range append(append(p.Spec.InitContainers[:0:0], p.Spec.InitContainers...), p.Spec.Containers...) {
			if r := imageRef(c.Image); r.explicitHost && byHost[r.registry] == "" {
				byHost[r.registry] = fmt.Sprintf("image %s of %s on the node", c.Image, s.PodName(p))
				if !s.MayName(p.Namespace) {
					byHost[r.registry] = "an image of " + UnreadablePod + " on the node"
				}
				others = append(others, r.registry)
			}
		}
	}
	sort.Strings(others)
	for _, h := range others {
		add(h, byHost[h])
	}
	return out
}

// registryNameProblem compares the host that does not resolve with the registries the cluster
// uses: a published local registry that the image does not name the way the runtime does, or
// a close spelling of a registry the node's pods pull from. It returns the better name (""
// when none is close), why, and the evidence.
func registryNameProblem(s *Snapshot, host string) (better, why string, ev []Evidence) {
	cands := knownRegistries(s)
	if s.RegistryHosting == nil && s.RegistryHostingErr != nil {
		ev = append(ev, Evidence{Object: "ConfigMap kube-public/local-registry-hosting", Message: "not readable: " + s.RegistryHostingErr.Error()})
	}
	if h := s.RegistryHosting; h != nil {
		ev = append(ev, Evidence{Object: "ConfigMap kube-public/local-registry-hosting", Field: "data[localRegistryHosting.v1]",
			Message: fmt.Sprintf("host %s, hostFromContainerRuntime %s, hostFromClusterNetwork %s", orDefault(h.Host, "(unset)"), orDefault(h.HostFromContainerRuntime, "(unset)"), orDefault(h.HostFromClusterNetwork, "(unset)"))})
		rt := h.HostFromContainerRuntime
		if rt != "" && rt != host && (host == h.Host || host == h.HostFromClusterNetwork || hostOnly(host) == hostOnly(h.Host) || closeHost(host, rt) || closeHost(host, h.Host)) {
			return rt, fmt.Sprintf("The cluster publishes its local registry (ConfigMap kube-public/local-registry-hosting), and the nodes' container runtime reaches it as %s, not %s", rt, host), ev
		}
	}
	for _, c := range cands {
		if c.host != host && closeHost(host, c.host) {
			return c.host, fmt.Sprintf("%s is a close spelling of %s, which the cluster does use (%s): most likely a typo in the image name", host, c.host, c.source), ev
		}
	}
	if len(cands) > 0 {
		var names []string
		for _, c := range cands {
			names = append(names, c.host)
		}
		ev = append(ev, Evidence{Object: nodeObject(s.Pod.Spec.NodeName), Field: "registries in use", Message: "no close spelling among: " + joinLimited(names, 6)})
	}
	return "", "", ev
}

// closeHost reports whether two registry hosts are a typo apart: the same name with another
// port, or names within edit distance 2 (at most a third of the shorter).
func closeHost(a, b string) bool {
	if a == "" || b == "" || a == b {
		return false
	}
	ha, hb := hostOnly(a), hostOnly(b)
	if ha == hb {
		return true
	}
	d := editDistance(ha, hb)
	return d <= 2 && d <= max(1, min(len(ha), len(hb))/3)
}

// withRegistry is image with its registry host replaced by host.
func withRegistry(image, host string) string {
	ref := imageRef(image)
	if ref.explicitHost {
		return host + strings.TrimPrefix(image, ref.registry)
	}
	return host + "/" + image
}
