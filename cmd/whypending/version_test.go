package main

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestReadBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/whypending/whypending", Version: "v0.2.0"},
		Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name            string
		version, commit string // the -X stamps
		info            *debug.BuildInfo
		want            buildInfo
	}{
		{"go install: the module version and VCS revision", "", "", info,
			buildInfo{Version: "v0.2.0", Commit: "0123abc-dirty", GoVersion: "go1.26.8", Platform: "linux/arm64"}},
		{"a release build: the stamps win", "v0.3.0", "fedcba9", info,
			buildInfo{Version: "v0.3.0", Commit: "fedcba9", GoVersion: "go1.26.8", Platform: "linux/arm64"}},
		{"a local build without VCS stamping", "", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			buildInfo{Version: "(devel)", Commit: "unknown", GoVersion: "go1.26.8", Platform: "unknown"}},
		{"no build information", "", "", nil,
			buildInfo{Version: "(devel)", Commit: "unknown", GoVersion: "unknown", Platform: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version, commit = tc.version, tc.commit
			t.Cleanup(func() { version, commit = "", "" })
			if got := readBuildInfo(tc.info); got != tc.want {
				t.Errorf("readBuildInfo = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	code, out, errOut := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "whypending ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version: exit %d, %q %q; want a line with the Go version %s", code, out, errOut, runtime.Version())
	}
	code, out, _ = runCLI(t, "version", "-o", "json")
	var b buildInfo
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.GoVersion != runtime.Version() || b.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version -o json: exit %d, %+v, %v", code, b, err)
	}
}
