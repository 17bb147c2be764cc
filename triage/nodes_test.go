package triage

import (
	"testing"

	"k8s.io/apimachinery/pkg/version"
)

func TestNodeContextRules(t *testing.T) {
	tests := []struct {
		name    string
		ready   bool
		kubelet string
		server  *version.Info
		want    []Code
	}{
		{"ready node, same version", true, "v1.37.2", &version.Info{Major: "1", Minor: "37"}, nil},
		{"three minors behind is supported", true, "v1.34.1", &version.Info{Major: "1", Minor: "37"}, nil},
		{"four minors behind is not", true, "v1.33.5", &version.Info{Major: "1", Minor: "37"}, []Code{CodeKubeletVersionSkew}},
		{"kubelet newer than the API server", true, "v1.38.0", &version.Info{Major: "1", Minor: "37"}, []Code{CodeKubeletVersionSkew}},
		{"provider suffixes parse", true, "v1.16.8-eks-e16311", &version.Info{Major: "1", Minor: "27+"}, []Code{CodeKubeletVersionSkew}},
		{"a source-built API server reports major/minor, not gitVersion", true, "v1.33.5", &version.Info{Major: "1", Minor: "37", GitVersion: "v0.0.0-master+$Format:%H$"}, []Code{CodeKubeletVersionSkew}},
		{"unknown server version says nothing about skew", true, "v1.10.0", nil, nil},
		{"not a kubelet version", true, "0.2.1", &version.Info{Major: "1", Minor: "37"}, nil},
		{"not ready", false, "v1.37.2", &version.Info{Major: "1", Minor: "37"}, []Code{CodeNodeNotReady}},
		{"not ready and skewed", false, "v1.33.5", &version.Info{Major: "1", Minor: "37"}, []Code{CodeNodeNotReady, CodeKubeletVersionSkew}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSnapshot(testPod())
			s.Nodes[0] = testNode("node-1", tt.ready, tt.kubelet)
			s.ServerVersion = tt.server
			for _, f := range checkCodes(t, nodeContextRules, s, tt.want...) {
				if f.Severity == SeverityBlocker {
					t.Errorf("%s is a blocker; context findings never are", f.Code)
				}
			}
		})
	}
}
