// Package whypending ships the data the binary embeds: the demo scenarios (plain Kubernetes
// manifests with their expected diagnosis) and the CRDs it installs in the local control plane.
package whypending

import "embed"

// Scenarios holds testdata/scenarios/<name>/{manifests.yaml,expected.yaml}: the demo's stuck
// pods, each reconstructed from a public bug report or troubleshooting guide.
//
//go:embed testdata/scenarios
var Scenarios embed.FS

// CalicoCRDs holds testdata/calico-crds/*.yaml: Calico v3.32.1's crd.projectcalico.org/v1
// IPAM CRDs, copied unedited.
//
//go:embed testdata/calico-crds
var CalicoCRDs embed.FS
