package triage

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestClassifyPull(t *testing.T) {
	tests := []struct {
		name    string
		reason  string
		msg     string
		secrets bool
		want    Code
	}{
		{"manifest unknown", "ImagePullBackOff", `Failed to pull image "x:1": rpc error: code = Unknown desc = Error response from daemon: manifest for x:1 not found: manifest unknown: manifest unknown`, false, CodeImageNotFound},
		{"containerd not found", "ErrImagePull", `failed to resolve reference "docker.io/library/x:1": docker.io/library/x:1: not found`, false, CodeImageNotFound},
		{"docker hub's ambiguous answer without pull secrets", "ErrImagePull", `pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, false, CodeImageNotFound},
		{"docker hub's ambiguous answer with pull secrets", "ErrImagePull", `pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, true, CodeImagePullUnauthorized},
		{"no basic auth credentials", "ImagePullBackOff", `Get https://1.dkr.ecr.us-east-1.amazonaws.com/v2/x/manifests/v1: no basic auth credentials`, false, CodeImagePullUnauthorized},
		{"401", "ErrImagePull", `unexpected status from HEAD request: 401 Unauthorized`, false, CodeImagePullUnauthorized},
		{"toomanyrequests", "ErrImagePull", `429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`, false, CodeImagePullRateLimited},
		{"pull quota", "ErrImagePull", `unexpected status from HEAD request to https://registry.example.com/v2/shop/checkout/manifests/1.8.2: 403 Forbidden: quota exceeded: project "shop" has used its monthly pull quota`, false, CodeRegistryQuotaExceeded},
		{"storage quota", "ErrImagePull", `denied: adding 1.2 GiB of storage resource, which when updated to current usage of 9.5 GiB will exceed the configured upper limit of 10.0 GiB`, false, CodeRegistryQuotaExceeded},
		{"platform", "ErrImagePull", `no matching manifest for linux/arm/v7 in the manifest list entries`, false, CodeImagePlatformMismatch},
		{"never pull", "ErrImageNeverPull", `Container image "x:latest" is not present with pull policy of Never`, false, CodeImageNotPresentPullNever},
		{"invalid name", "InvalidImageName", `couldn't parse image name "images:ubuntu/24.04": invalid reference format`, false, CodeInvalidImageName},
		{"timeout", "ErrImagePull", `dial tcp 10.0.0.1:443: i/o timeout`, false, CodeImagePullFailed},
		{"back-off only", "ImagePullBackOff", `Back-off pulling image "x:1"`, false, CodeImagePullFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := classifyPull(tt.reason, tt.msg, tt.secrets); got != tt.want {
				t.Errorf("classifyPull(%s, %q) = %s, want %s", tt.reason, tt.msg, got, tt.want)
			}
		})
	}
}

func TestImageRules(t *testing.T) {
	backoff := testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`))
	failed := ev(corev1.EventTypeWarning, "Failed", "app", `Failed to pull image "registry.example.com/shop/app:1.0": 403 Forbidden: quota exceeded`, 6, time.Minute)
	errLine := ev(corev1.EventTypeWarning, "Failed", "app", "Error: ImagePullBackOff", 31, time.Second)
	tests := []struct {
		name string
		snap *Snapshot
		want []Code
	}{
		{"running containers have no image problem", testSnapshot(testPod()), nil},
		{"the cause comes from the older Failed event, not the newer Error line", testSnapshot(backoff, failed, errLine), []Code{CodeRegistryQuotaExceeded}},
		{"with no pull event the answer is the generic pull failure", testSnapshot(backoff), []Code{CodeImagePullFailed}},
		{"an init container's pull failure", testSnapshot(testPod(initContainer("init", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present with pull policy of Never"}}, 0))), []Code{CodeImageNotPresentPullNever}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, imageRules, tt.snap, tt.want...)
			for _, f := range got {
				if f.Evidence[0].Field == "" && f.Evidence[0].Reason == "" {
					t.Errorf("%s first evidence %+v names neither a field nor an event", f.Code, f.Evidence[0])
				}
			}
		})
	}
}

func TestImageRef(t *testing.T) {
	tests := []struct{ image, registry, repo string }{
		{"nginx", "docker.io", "nginx"},
		{"web-test-image:v1", "docker.io", "web-test-image"},
		{"registry.example.com/shop/checkout:1.8.2", "registry.example.com", "registry.example.com/shop/checkout"},
		{"localhost:5000/app@sha256:abc", "localhost:5000", "localhost:5000/app"},
	}
	for _, tt := range tests {
		got := imageRef(tt.image)
		if got.registry != tt.registry || got.repo != tt.repo {
			t.Errorf("imageRef(%q) = %+v, want {%s %s}", tt.image, got, tt.registry, tt.repo)
		}
	}
}
