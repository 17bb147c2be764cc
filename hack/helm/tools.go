//go:build tools

// Package helm pins the helm command (helm.sh/helm/v3/cmd/helm) so that build.sh can build
// it from the Go module proxy with this module's go.sum.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
