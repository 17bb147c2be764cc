package main

import (
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped by release builds (see the Dockerfile):
//
//	go build -ldflags "-X main.version=v0.2.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/whypending
//
// Unstamped builds fall back to what the Go toolchain records (debug.ReadBuildInfo).
var version, commit string

// buildInfo is what `whypending version` prints.
type buildInfo struct {
	// Version is the release version: -X main.version, else the module version the Go
	// toolchain recorded (a tag, a pseudo-version, or "(devel)" for a local build).
	Version string `json:"version"`
	// Commit is the VCS revision: -X main.commit, else the toolchain's vcs.revision (with
	// "-dirty" when vcs.modified), else "unknown" (built with -buildvcs=false or outside git).
	Commit string `json:"commit"`
	// GoVersion is the Go toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the binary.
	Platform string `json:"platform"`
}

// readBuildInfo assembles buildInfo from the stamped variables and info (nil when the binary
// carries no build information).
func readBuildInfo(info *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: version, Commit: commit, GoVersion: "unknown", Platform: "unknown"}
	if info == nil {
		return fillUnknown(b)
	}
	b.GoVersion = info.GoVersion
	if b.Version == "" {
		b.Version = info.Main.Version
	}
	var goos, goarch, revision string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if goos != "" && goarch != "" {
		b.Platform = goos + "/" + goarch
	}
	if b.Commit == "" && revision != "" {
		b.Commit = revision
		if modified {
			b.Commit += "-dirty"
		}
	}
	return fillUnknown(b)
}

func fillUnknown(b buildInfo) buildInfo {
	if b.Version == "" {
		b.Version = "(devel)"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version [-o json]",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, _ := debug.ReadBuildInfo()
			b := readBuildInfo(info)
			switch output {
			case "text":
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "whypending %s (commit %s, %s, %s)\n", b.Version, b.Commit, b.GoVersion, b.Platform)
				return err
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			return fmt.Errorf("unknown output format %q: use text or json", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
