// Package testenv runs a real local Kubernetes control plane (etcd, kube-apiserver and
// kube-scheduler built from the Go module proxy by hack/controlplane) with the Calico CRDs
// installed, and loads scenarios (plain manifests plus expected.yaml) into it. go test and
// whypending demo use it.
package testenv
