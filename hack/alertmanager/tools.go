//go:build tools

// Package alertmanager pins the alertmanager command
// (github.com/prometheus/alertmanager/cmd/alertmanager) so that build.sh can build it from the
// Go module proxy with this module's go.sum. v0.31.1 is the newest that builds from its module
// zip: v0.32 and later embed UI assets the zip lacks.
package alertmanager

import _ "github.com/prometheus/alertmanager/cmd/alertmanager"
