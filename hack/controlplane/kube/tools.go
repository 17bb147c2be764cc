//go:build tools

// Package kube pins the kube-apiserver, kube-scheduler and kube-controller-manager commands of
// k8s.io/kubernetes so that build.sh can build them from the Go module proxy with this module's
// replace lines.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
