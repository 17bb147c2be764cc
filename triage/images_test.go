package triage

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestClassifyPull(t *testing.T) {
	tests := []struct {
		name      string
		reason    string
		msg       string
		want      Code
		ambiguous bool
	}{
		{"manifest unknown", "ImagePullBackOff", `Failed to pull image "x:1": rpc error: code = Unknown desc = Error response from daemon: manifest for x:1 not found: manifest unknown: manifest unknown`, CodeImageNotFound, false},
		{"containerd not found", "ErrImagePull", `failed to resolve reference "docker.io/library/x:1": docker.io/library/x:1: not found`, CodeImageNotFound, false},
		{"docker hub's ambiguous answer (containerd)", "ErrImagePull", `pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, CodeImageNotFound, true},
		{"docker hub's ambiguous answer (docker)", "ErrImagePull", `Error response from daemon: pull access denied for rmeuser-auth, repository does not exist or may require 'docker login': denied: requested access to the resource is denied`, CodeImageNotFound, true},
		{"docker hub's ambiguous answer (CRI-O)", "ErrImagePull", `reading manifest latest in docker.io/library/idonotexist: requested access to the resource is denied`, CodeImageNotFound, true},
		{"artifact registry's ambiguous answer", "ErrImagePull", `failed to resolve reference "europe-docker.pkg.dev/p/r/app:1": pulling from host europe-docker.pkg.dev failed with status code [manifests 1]: 403 Forbidden: denied: Permission "artifactregistry.repositories.downloadArtifacts" denied on resource "projects/p/locations/europe/repositories/r" (or it may not exist)`, CodeImageNotFound, true},
		{"harbor's ambiguous answer", "ErrImagePull", `failed to resolve reference "harbor.example.com/team/app:2": unexpected status from HEAD request: 401 Unauthorized: unauthorized: unauthorized to access repository: team/app, action: pull: unauthorized to access repository: team/app, action: pull`, CodeImageNotFound, true},
		{"no basic auth credentials", "ImagePullBackOff", `Get https://1.dkr.ecr.us-east-1.amazonaws.com/v2/x/manifests/v1: no basic auth credentials`, CodeImagePullUnauthorized, false},
		{"401", "ErrImagePull", `unexpected status from HEAD request: 401 Unauthorized`, CodeImagePullUnauthorized, false},
		{"toomanyrequests", "ErrImagePull", `429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`, CodeImagePullRateLimited, false},
		{"pull quota", "ErrImagePull", `unexpected status from HEAD request to https://registry.example.com/v2/shop/checkout/manifests/1.8.2: 403 Forbidden: quota exceeded: project "shop" has used its monthly pull quota`, CodeRegistryQuotaExceeded, false},
		{"storage quota", "ErrImagePull", `denied: adding 1.2 GiB of storage resource, which when updated to current usage of 9.5 GiB will exceed the configured upper limit of 10.0 GiB`, CodeRegistryQuotaExceeded, false},
		{"platform", "ErrImagePull", `no matching manifest for linux/arm/v7 in the manifest list entries`, CodeImagePlatformMismatch, false},
		{"never pull", "ErrImageNeverPull", `Container image "x:latest" is not present with pull policy of Never`, CodeImageNotPresentPullNever, false},
		{"invalid name", "InvalidImageName", `couldn't parse image name "images:ubuntu/24.04": invalid reference format`, CodeInvalidImageName, false},
		{"x509 unknown authority", "ErrImagePull", `error pinging docker registry r.apps.example: Get https://r.apps.example/v2/: x509: certificate signed by unknown authority`, CodeRegistryCertificateUntrusted, false},
		{"plain-HTTP registry", "ErrImagePull", `failed to do request: Head "https://10.0.0.5:5000/v2/app/manifests/1": http: server gave HTTP response to HTTPS client`, CodeRegistryCertificateUntrusted, false},
		{"dial timeout", "ErrImagePull", `dial tcp 10.0.0.1:443: i/o timeout`, CodeRegistryUnreachable, false},
		{"a token request that never reached the registry is not a refusal", "ErrImagePull", `failed to authorize: failed to fetch anonymous token: Get "https://auth.docker.io/token?scope=repository%3Alibrary%2Fredis%3Apull&service=registry.docker.io": dial tcp 199.59.148.222:443: i/o timeout`, CodeRegistryUnreachable, false},
		{"CRI-O short name", "ImageInspectError", `short-name "kubeovn/kube-ovn:v1.11.0" did not resolve to an alias and no unqualified-search registries are defined in "/etc/containers/registries.conf"`, CodeImageShortNameAmbiguous, false},
		{"back-off only", "ImagePullBackOff", `Back-off pulling image "x:1"`, CodeImagePullFailed, false},
		{"back-off with the last pull's error (kubelet 1.30+)", "ImagePullBackOff", `Back-off pulling image "registry.example/app:v9": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.example/app:v9": failed to resolve reference "registry.example/app:v9": registry.example/app:v9: not found`, CodeImageNotFound, false},
		{"a registry outage is not modelled", "ErrImagePull", `received unexpected HTTP status: 503 Service Unavailable`, CodeImagePullFailed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, amb := classifyPull(tt.reason, tt.msg); got != tt.want || amb != tt.ambiguous {
				t.Errorf("classifyPull(%s, %q) = %s, %t; want %s, %t", tt.reason, tt.msg, got, amb, tt.want, tt.ambiguous)
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
		{"with no pull event the waiting message's runtime words are read", testSnapshot(testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example/app:v9": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.example/app:v9": failed to resolve reference "registry.example/app:v9": registry.example/app:v9: not found`))), []Code{CodeImageNotFound}},
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
	tests := []struct {
		image string
		want  imageReference
	}{
		{"nginx", imageReference{registry: "docker.io", repo: "nginx", path: "nginx"}},
		{"web-test-image:v1", imageReference{registry: "docker.io", repo: "web-test-image", path: "web-test-image", tag: "v1"}},
		{"registry.example.com/shop/checkout:1.8.2", imageReference{registry: "registry.example.com", repo: "registry.example.com/shop/checkout", path: "shop/checkout", tag: "1.8.2", explicitHost: true}},
		{"localhost:5000/app@sha256:abc", imageReference{registry: "localhost:5000", repo: "localhost:5000/app", path: "app", digest: "@sha256:abc", explicitHost: true}},
		{"localhost/app:dev", imageReference{registry: "localhost", repo: "localhost/app", path: "app", tag: "dev", explicitHost: true}},
	}
	for _, tt := range tests {
		if got := imageRef(tt.image); got != tt.want {
			t.Errorf("imageRef(%q) = %+v, want %+v", tt.image, got, tt.want)
		}
	}
	for in, want := range map[string]string{"nginx:1.27": "docker.io/library/nginx:1.27", "fusionauth/fusionauth-app:1.60.2": "docker.io/fusionauth/fusionauth-app:1.60.2", "quay.io/a/b": "quay.io/a/b"} {
		if got := qualifiedName(in); got != want {
			t.Errorf("qualifiedName(%q) = %q, want %q", in, got, want)
		}
	}
}

// pullFailedPod is a pod whose container app waits in reason (ImagePullBackOff, ErrImagePull,
// ImageInspectError) for image, with the events a kubelet writes: the Failed event holding the
// runtime's error (older), then the Back-off and bare "Error: …" lines (newer).
func pullFailedPod(image, reason, failedReason, msg string, opts ...podOpt) *Snapshot {
	pod := testPod(append([]podOpt{func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }, pending(reason, `Back-off pulling image "`+image+`"`)}, opts...)...)
	return testSnapshot(pod,
		ev(corev1.EventTypeWarning, failedReason, "app", msg, 5, 50*time.Second),
		ev(corev1.EventTypeWarning, "Failed", "app", "Error: ErrImagePull", 5, 50*time.Second),
		ev(corev1.EventTypeNormal, "BackOff", "app", `Back-off pulling image "`+image+`"`, 14, 4*time.Second),
		ev(corev1.EventTypeWarning, "Failed", "app", "Error: ImagePullBackOff", 14, 4*time.Second),
	)
}

// TestRuntimeErrorIsEvidence covers kind 5 of issue 12: the runtime's own error is the
// evidence. TLS, network and short-name failures get their codes and fixes, across runtimes
// (containerd, CRI-O, Docker) and registries; the unmodelled rest is quoted and marked
// uncertain, never hidden behind "Back-off pulling image".
func TestRuntimeErrorIsEvidence(t *testing.T) {
	crio := func(s *Snapshot) { s.Nodes[0].Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.34.1" }
	docker := func(s *Snapshot) { s.Nodes[0].Status.NodeInfo.ContainerRuntimeVersion = "docker://24.0.7" }
	containerd := func(s *Snapshot) { s.Nodes[0].Status.NodeInfo.ContainerRuntimeVersion = "containerd://1.7.22" }
	tests := []struct {
		name                 string
		image, reason, event string
		msg                  string
		runtime              func(*Snapshot)
		want                 Code
		uncertain            bool
		// quote is a piece of the runtime's error the summary and the first evidence must hold;
		// fix is a piece the fix must hold.
		quote, fix string
	}{
		{"CRI-O, OpenShift's external registry route, unknown CA",
			"default-route-openshift-image-registry.apps-crc.testing/demo/operator-init:v1.0.1", "ImagePullBackOff", "Failed",
			`Failed to pull image "default-route-openshift-image-registry.apps-crc.testing/demo/operator-init:v1.0.1": rpc error: code = Unknown desc = error pinging docker registry default-route-openshift-image-registry.apps-crc.testing: Get https://default-route-openshift-image-registry.apps-crc.testing/v2/: x509: certificate signed by unknown authority`,
			crio, CodeRegistryCertificateUntrusted, false, "x509: certificate signed by unknown authority", "image-registry.openshift-image-registry.svc:5000/demo/operator-init:v1.0.1"},
		{"containerd, Harbor with a private CA (Go 1.20 wording)",
			"harbor.corp.local/app/api:2.3", "ErrImagePull", "Failed",
			`Failed to pull image "harbor.corp.local/app/api:2.3": failed to pull and unpack image "harbor.corp.local/app/api:2.3": failed to resolve reference "harbor.corp.local/app/api:2.3": failed to do request: Head "https://harbor.corp.local/v2/app/api/manifests/2.3": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			containerd, CodeRegistryCertificateUntrusted, false, "tls: failed to verify certificate", "/etc/containerd/certs.d/harbor.corp.local/ca.crt"},
		{"Docker, certificate for another name",
			"registry.internal:5000/tools/cli:7", "ImagePullBackOff", "Failed",
			`Failed to pull image "registry.internal:5000/tools/cli:7": rpc error: code = Unknown desc = Error response from daemon: Get "https://registry.internal:5000/v2/": x509: certificate is valid for registry.corp, not registry.internal`,
			docker, CodeRegistryCertificateUntrusted, false, "certificate is valid for registry.corp", "subject alternative name"},
		{"containerd, a registry that speaks plain HTTP",
			"10.0.0.5:5000/app:1", "ErrImagePull", "Failed",
			`Failed to pull image "10.0.0.5:5000/app:1": failed to pull and unpack image "10.0.0.5:5000/app:1": failed to resolve reference "10.0.0.5:5000/app:1": failed to do request: Head "https://10.0.0.5:5000/v2/app/manifests/1": http: server gave HTTP response to HTTPS client`,
			containerd, CodeRegistryCertificateUntrusted, false, "HTTP response to HTTPS client", "hosts.toml"},
		{"containerd, the registry name does not resolve",
			"registry.corp.example/shop/web:3", "ImagePullBackOff", "Failed",
			`Failed to pull image "registry.corp.example/shop/web:3": rpc error: code = Unknown desc = failed to pull and unpack image "registry.corp.example/shop/web:3": failed to resolve reference "registry.corp.example/shop/web:3": failed to do request: Head "https://registry.corp.example/v2/shop/web/manifests/3": dial tcp: lookup registry.corp.example on 10.96.0.10:53: no such host`,
			containerd, CodeRegistryUnreachable, false, "no such host", "getent hosts registry.corp.example"},
		{"Docker, Docker Hub times out",
			"grafana/grafana:11.2.0", "ImagePullBackOff", "Failed",
			`Failed to pull image "grafana/grafana:11.2.0": rpc error: code = Unknown desc = Error response from daemon: Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`,
			docker, CodeRegistryUnreachable, false, "Client.Timeout exceeded", "systemctl show docker --property=Environment"},
		{"containerd, the token host is unreachable, not the registry",
			"redis:7.2", "ErrImagePull", "Failed",
			`Failed to pull image "redis:7.2": rpc error: code = DeadlineExceeded desc = failed to pull and unpack image "docker.io/library/redis:7.2": failed to resolve reference "docker.io/library/redis:7.2": failed to authorize: failed to fetch anonymous token: Get "https://auth.docker.io/token?scope=repository%3Alibrary%2Fredis%3Apull&service=registry.docker.io": dial tcp 199.59.148.222:443: i/o timeout`,
			containerd, CodeRegistryUnreachable, false, "auth.docker.io", "NO_PROXY"},
		{"CRI-O, the HTTP proxy refuses the connection",
			"quay.io/prometheus/node-exporter:v1.8.2", "ErrImagePull", "Failed",
			`Failed to pull image "quay.io/prometheus/node-exporter:v1.8.2": rpc error: code = Unknown desc = pinging container registry quay.io: Get "https://quay.io/v2/": proxyconnect tcp: dial tcp 10.1.1.1:3128: connect: connection refused`,
			crio, CodeRegistryUnreachable, false, "proxyconnect", "systemctl show crio --property=Environment"},
		{"CRI-O 1.34 enforcing short names, an ambiguous list",
			"fusionauth/fusionauth-app:1.60.2", "ImageInspectError", "InspectFailed",
			`Failed to inspect image "": rpc error: code = Unknown desc = short name mode is enforcing, but image name fusionauth/fusionauth-app:1.60.2 returns ambiguous list`,
			crio, CodeImageShortNameAmbiguous, false, "returns ambiguous list", "docker.io/fusionauth/fusionauth-app:1.60.2"},
		{"CRI-O without unqualified-search registries",
			"kubeovn/kube-ovn:v1.11.3", "ImageInspectError", "InspectFailed",
			`Failed to inspect image "kubeovn/kube-ovn:v1.11.3": rpc error: code = Unknown desc = short-name "kubeovn/kube-ovn:v1.11.3" did not resolve to an alias and no unqualified-search registries are defined in "/etc/containers/registries.conf"`,
			crio, CodeImageShortNameAmbiguous, false, "did not resolve to an alias", "docker.io/kubeovn/kube-ovn:v1.11.3"},
		{"old CRI-O, no registries for an unqualified image",
			"nginx:alpine", "ImageInspectError", "InspectFailed",
			`Failed to inspect image "nginx:alpine": rpc error: code = Unknown desc = no registries configured while trying to pull an unqualified image`,
			crio, CodeImageShortNameAmbiguous, false, "no registries configured", "docker.io/library/nginx:alpine"},
		{"an unmodelled registry error is quoted and uncertain",
			"ghcr.io/acme/api:5", "ImagePullBackOff", "Failed",
			`Failed to pull image "ghcr.io/acme/api:5": rpc error: code = Unknown desc = failed to pull and unpack image "ghcr.io/acme/api:5": failed to copy: httpReadSeeker: failed open: unexpected status code https://ghcr.io/v2/acme/api/blobs/sha256:0f: 503 Service Unavailable`,
			containerd, CodeImagePullFailed, true, "503 Service Unavailable", "crictl pull ghcr.io/acme/api:5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := pullFailedPod(tt.image, tt.reason, tt.event, tt.msg)
			tt.runtime(s)
			d := Evaluate(s)
			f := d.Primary()
			if f.Code != tt.want || f.Uncertain != tt.uncertain || d.Uncertain != tt.uncertain {
				t.Fatalf("primary = %s (uncertain %t, diagnosis %t), want %s (uncertain %t): %s", f.Code, f.Uncertain, d.Uncertain, tt.want, tt.uncertain, f.Summary)
			}
			if e := f.Evidence[0]; e.Reason != tt.event || !strings.Contains(e.Message, tt.quote) {
				t.Errorf("first evidence = %s %q, want the %s event holding %q", e.Reason, e.Message, tt.event, tt.quote)
			}
			if !strings.Contains(f.Summary, tt.quote) {
				t.Errorf("summary %q does not quote the runtime's %q", f.Summary, tt.quote)
			}
			if fix := strings.Join(f.Fix, "\n"); !strings.Contains(fix, tt.fix) {
				t.Errorf("fix %q lacks %q", fix, tt.fix)
			}
			// The unmodelled error's crictl pull is its look (the allow-list of
			// TestFixLooksBeforeItActs says why); every other fix reads first.
			if !looksFirst(f.Fix) && f.Code != CodeImagePullFailed {
				t.Errorf("%s fix acts before it looks:\n%s", f.Code, strings.Join(f.Fix, "\n"))
			}
		})
	}

	// With only back-off events left, the answer says the cause is not known.
	s := testSnapshot(testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`)),
		ev(corev1.EventTypeNormal, "BackOff", "app", `Back-off pulling image "registry.example.com/shop/app:1.0"`, 30, time.Second))
	if d := Evaluate(s); d.Primary().Code != CodeImagePullFailed || !d.Uncertain || !strings.Contains(d.Summary, "not known") {
		t.Errorf("back-off only: primary %s, uncertain %t, summary %q; want an uncertain image-pull-failed that says the cause is not known", d.Primary().Code, d.Uncertain, d.Summary)
	}
}

// TestAmbiguousRegistryAnswer covers kind 12 of issue 12: "pull access denied … may require
// authorization" fits a missing image and a private repository alike. Both readings are given,
// each uncertain and with its own fix, the likelier first by the evidence: the name, the tag,
// the pull secrets and the kind of cluster.
func TestAmbiguousRegistryAnswer(t *testing.T) {
	const containerdDenied = `failed to pull and unpack image "docker.io/library/%[1]s": failed to resolve reference "docker.io/library/%[1]s": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`
	kindNode := func(s *Snapshot) {
		s.Nodes[0].Name, s.Nodes[0].Spec.ProviderID = "dev-control-plane", "kind://docker/dev/dev-control-plane"
		s.Pod.Spec.NodeName = "dev-control-plane"
	}
	minikubeNode := func(s *Snapshot) {
		s.Nodes[0].Name, s.Nodes[0].Labels = "minikube", map[string]string{"minikube.k8s.io/name": "minikube"}
		s.Nodes[0].Status.NodeInfo.ContainerRuntimeVersion = "docker://27.4.1"
		s.Pod.Spec.NodeName = "minikube"
	}
	k3dNode := func(s *Snapshot) {
		s.Nodes[0].Name = "k3d-local-server-0"
		s.Nodes[0].Status.NodeInfo.ContainerRuntimeVersion = "cri-o://1.30.4"
		s.Pod.Spec.NodeName = "k3d-local-server-0"
	}
	cloudNode := func(s *Snapshot) {}
	withSecret := func(p *corev1.Pod) {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "dockerhub-creds"}}
	}
	ownedByDeployment := func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"pod-template-hash": "5c7d9"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5c7d9", Controller: &yes}}
	}
	tests := []struct {
		name     string
		image    string
		msg      string
		node     func(*Snapshot)
		opts     []podOpt
		want     []Code
		fixFirst string // the first reading's fix must hold this
	}{
		{"a locally built image on kind (containerd)", "myapp:latest", fmt.Sprintf(containerdDenied, "myapp:latest"), kindNode, []podOpt{ownedByDeployment},
			[]Code{CodeImageNotFound, CodeImagePullUnauthorized}, "kind load docker-image myapp:latest --name dev"},
		{"minikube with the docker runtime", "suedostcargo-web", `Error response from daemon: pull access denied for suedostcargo-web, repository does not exist or may require 'docker login': denied: requested access to the resource is denied`, minikubeNode, nil,
			[]Code{CodeImageNotFound, CodeImagePullUnauthorized}, "minikube image load suedostcargo-web -p minikube"},
		{"k3d with CRI-O's wording", "idonotexist:dev", `reading manifest dev in docker.io/library/idonotexist: requested access to the resource is denied`, k3dNode, nil,
			[]Code{CodeImageNotFound, CodeImagePullUnauthorized}, "k3d image import idonotexist:dev -c local"},
		{"an organisation's image with pull secrets on a cloud node", "acme/payments:1.4.2", `failed to pull and unpack image "docker.io/acme/payments:1.4.2": failed to resolve reference "docker.io/acme/payments:1.4.2": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, cloudNode, []podOpt{withSecret},
			[]Code{CodeImagePullUnauthorized, CodeImageNotFound}, "kubectl get secret dockerhub-creds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := pullFailedPod(tt.image, "ErrImagePull", "Failed", `Failed to pull image "`+tt.image+`": `+tt.msg, tt.opts...)
			tt.node(s)
			got := imageRules(s)
			if !slices.Equal(codesOf(got), tt.want) {
				t.Fatalf("codes = %v, want %v", codesOf(got), tt.want)
			}
			for _, f := range got {
				if !f.Uncertain || !strings.Contains(f.Summary, "both for a repository that does not exist and for a private one") {
					t.Errorf("%s: uncertain %t, summary %q; want an uncertain reading that says the answer is ambiguous", f.Code, f.Uncertain, f.Summary)
				}
			}
			if fix := strings.Join(got[0].Fix, "\n"); !strings.Contains(fix, tt.fixFirst) {
				t.Errorf("first reading %s: fix %q lacks %q", got[0].Code, fix, tt.fixFirst)
			}
			for _, f := range got {
				if !looksFirst(f.Fix) {
					t.Errorf("%s reading acts before it looks:\n%s", f.Code, strings.Join(f.Fix, "\n"))
				}
				fix := strings.Join(f.Fix, "\n")
				switch f.Code {
				case CodeImageNotFound:
					if !strings.Contains(fix, "docker push") || strings.Contains(fix, "create secret") {
						t.Errorf("missing-image reading: fix %q, want push/load and no credentials", fix)
					}
				case CodeImagePullUnauthorized:
					if !strings.Contains(fix, "create secret docker-registry") {
						t.Errorf("private-repository reading: fix %q, want credentials", fix)
					}
				}
			}
			if d := Evaluate(s); !d.Uncertain || d.Primary().Code != tt.want[0] {
				t.Errorf("Evaluate: primary %s, uncertain %t; want %s, uncertain", d.Primary().Code, d.Uncertain, tt.want[0])
			}
		})
	}
}

// TestImageFixesLookBeforeTheyAct checks the order of the image fixes that change something:
// what the pod, its ServiceAccount, the registry or the build machine have is read before a
// pull secret is made or an image is loaded or set, and two alternative changes say they are.
func TestImageFixesLookBeforeTheyAct(t *testing.T) {
	withSecret := func(p *corev1.Pod) { p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred-old"}} }
	tests := []struct {
		name        string
		image, msg  string
		opts        []podOpt
		want        Code
		first, then string // first's step must come before then's
		says        string
	}{
		{"unauthorized, no pull secret: the ServiceAccount's list before a new secret", "registry.example.com/shop/app:1.0",
			`Failed to pull image "registry.example.com/shop/app:1.0": rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/shop/app:1.0": failed to resolve reference "registry.example.com/shop/app:1.0": pulling from host registry.example.com failed with status code [manifests 1.0]: 401 Unauthorized`,
			nil, CodeImagePullUnauthorized, "kubectl get serviceaccount default", "kubectl create secret docker-registry", "replaces the account's pull secrets"},
		{"unauthorized with a pull secret: that secret before a new one", "registry.example.com/shop/app:1.0",
			`Failed to pull image "registry.example.com/shop/app:1.0": rpc error: code = Unknown desc = failed to pull and unpack image "registry.example.com/shop/app:1.0": failed to resolve reference "registry.example.com/shop/app:1.0": pulling from host registry.example.com failed with status code [manifests 1.0]: 401 Unauthorized`,
			[]podOpt{withSecret}, CodeImagePullUnauthorized, "kubectl get secret regcred-old", "kubectl create secret docker-registry", "Otherwise either give the pod a pull secret that works"},
		{"rate limited: whether it pulls anonymously before a secret, which reaches the pod", "nginx:1.27",
			`Failed to pull image "nginx:1.27": rpc error: code = Unknown desc = failed to pull and unpack image "docker.io/library/nginx:1.27": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/library/nginx/manifests/sha256:0f: 429 Too Many Requests - Server message: toomanyrequests: You have reached your pull rate limit.`,
			nil, CodeImagePullRateLimited, "{.spec.imagePullSecrets}", "kubectl patch serviceaccount default", "Or pull through a mirror"},
		{"short name: the qualified name is looked up before it is set", "fusionauth/fusionauth-app:1.60.2",
			`Failed to inspect image "": rpc error: code = Unknown desc = short name mode is enforcing, but image name fusionauth/fusionauth-app:1.60.2 returns ambiguous list`,
			nil, CodeImageShortNameAmbiguous, "crane digest docker.io/fusionauth/fusionauth-app:1.60.2", "kubectl set image", "if the command above finds it"},
		{"plain HTTP: the registry's answer over HTTP before the node's config", "10.0.0.5:5000/app:1",
			`Failed to pull image "10.0.0.5:5000/app:1": failed to pull and unpack image "10.0.0.5:5000/app:1": failed to resolve reference "10.0.0.5:5000/app:1": failed to do request: Head "https://10.0.0.5:5000/v2/app/manifests/1": http: server gave HTTP response to HTTPS client`,
			nil, CodeRegistryCertificateUntrusted, "curl -sI", "Either serve TLS", ""},
		{"unknown CA: the certificate's issuer before trusting it", "harbor.corp.local/app/api:2.3",
			`Failed to pull image "harbor.corp.local/app/api:2.3": failed to pull and unpack image "harbor.corp.local/app/api:2.3": failed to resolve reference "harbor.corp.local/app/api:2.3": failed to do request: Head "https://harbor.corp.local/v2/app/api/manifests/2.3": tls: failed to verify certificate: x509: certificate signed by unknown authority`,
			nil, CodeRegistryCertificateUntrusted, "openssl s_client", "Either trust the CA", "Or pull through"},
		{"certificate for another name: the certificate before the choice", "registry.internal:5000/tools/cli:7",
			`Failed to pull image "registry.internal:5000/tools/cli:7": rpc error: code = Unknown desc = Error response from daemon: Get "https://registry.internal:5000/v2/": x509: certificate is valid for registry.corp, not registry.internal`,
			nil, CodeRegistryCertificateUntrusted, "openssl s_client", "Either pull by a name the certificate covers", ""},
		{"timeout: whether the node reaches the registry before opening the firewall", "grafana/grafana:11.2.0",
			`Failed to pull image "grafana/grafana:11.2.0": rpc error: code = Unknown desc = Error response from daemon: Get "https://registry-1.docker.io/v2/": dial tcp 1.2.3.4:443: i/o timeout`,
			nil, CodeRegistryUnreachable, "curl -sv", "Allow node-1 to reach", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Evaluate(pullFailedPod(tt.image, "ErrImagePull", "Failed", tt.msg, tt.opts...)).Primary()
			if f.Code != tt.want {
				t.Fatalf("primary = %s, want %s: %s", f.Code, tt.want, f.Summary)
			}
			if !looksFirst(f.Fix) {
				t.Errorf("fix acts before it looks:\n%s", strings.Join(f.Fix, "\n"))
			}
			checkBefore(t, f.Fix, tt.first, tt.then)
			if tt.says != "" && stepIndex(f.Fix, tt.says) < 0 {
				t.Errorf("fix lacks %q:\n%s", tt.says, strings.Join(f.Fix, "\n"))
			}
		})
	}

	// The image Never pulled: it must exist where it was built before it is loaded, and loading
	// and pushing are alternatives.
	s := testSnapshot(testPod(pending("ErrImageNeverPull", `Container image "myapp:dev" is not present with pull policy of Never`), func(p *corev1.Pod) { p.Spec.Containers[0].Image = "myapp:dev" }))
	s.Nodes[0].Name, s.Nodes[0].Spec.ProviderID, s.Pod.Spec.NodeName = "dev-control-plane", "kind://docker/dev/dev-control-plane", "dev-control-plane"
	f := Evaluate(s).Primary()
	if f.Code != CodeImageNotPresentPullNever {
		t.Fatalf("primary = %s, want %s", f.Code, CodeImageNotPresentPullNever)
	}
	checkBefore(t, f.Fix, "docker image inspect myapp:dev", "kind load docker-image myapp:dev --name dev")
	checkBefore(t, f.Fix, "Either load the image", "Or set imagePullPolicy: IfNotPresent")

	// The missing-image reading of an ambiguous denial lists the repository's tags before it
	// pushes or loads anything, and offers push, load and another tag as alternatives.
	s = pullFailedPod("myapp:latest", "ErrImagePull", "Failed", `Failed to pull image "myapp:latest": `+fmt.Sprintf(`failed to pull and unpack image "docker.io/library/%[1]s": failed to resolve reference "docker.io/library/%[1]s": pull access denied, repository does not exist or may require authorization: server message: insufficient_scope: authorization failed`, "myapp:latest"))
	for _, f := range imageRules(s) {
		if f.Code != CodeImageNotFound {
			continue
		}
		if !strings.HasPrefix(f.Fix[0], "crane ls myapp") {
			t.Errorf("missing-image reading starts with %q, want crane ls", f.Fix[0])
		}
		checkBefore(t, f.Fix, "either push it", "docker push")
		checkBefore(t, f.Fix, "docker push", "Or load the image")
		checkBefore(t, f.Fix, "Or load the image", "Or point container app at an image and tag that exist")
	}
}

// TestMissingPullSecret: a 401 after the kubelet could not retrieve the pull secret the pod
// names (FailedToRetrieveImagePullSecret) says the secret is missing and creates it under that
// name, without the ServiceAccount patch (the pod names it already).
func TestMissingPullSecret(t *testing.T) {
	pod := testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`), func(p *corev1.Pod) {
		p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	})
	s := testSnapshot(pod,
		ev(corev1.EventTypeWarning, "Failed", "app", `Failed to pull image "registry.example.com/shop/app:1.0": unexpected status from HEAD request: 401 Unauthorized`, 6, time.Minute),
		ev(corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret", "", "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed.", 6, time.Minute))
	f := checkCodes(t, imageRules, s, CodeImagePullUnauthorized)[0]
	if !strings.Contains(f.Summary, "could not retrieve the pod's pull secret regcred (FailedToRetrieveImagePullSecret") {
		t.Errorf("summary = %q, want the pull secret the kubelet could not retrieve", f.Summary)
	}
	fix := strings.Join(f.Fix, "\n")
	if !strings.Contains(fix, "kubectl create secret docker-registry regcred -n shop --docker-server=registry.example.com") || strings.Contains(fix, "patch serviceaccount") {
		t.Errorf("fix =\n%s\nwant regcred created, no ServiceAccount patch", fix)
	}
}

// TestMissingPullSecretExistsNow: the pull secret the kubelet could not retrieve is looked up
// in a live list: created since, it is not created again; listed missing, it is said plainly.
func TestMissingPullSecretExistsNow(t *testing.T) {
	snapshot := func(secrets map[string]time.Duration) *Snapshot {
		pod := testPod(pending("ImagePullBackOff", `Back-off pulling image "registry.example.com/shop/app:1.0"`), func(p *corev1.Pod) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
		})
		s := testSnapshot(pod,
			ev(corev1.EventTypeWarning, "Failed", "app", `Failed to pull image "registry.example.com/shop/app:1.0": unexpected status from HEAD request: 401 Unauthorized`, 6, time.Minute),
			ev(corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret", "", "Unable to retrieve some image pull secrets (regcred); attempting to pull the image may not succeed.", 6, time.Minute))
		if got := NeedsNames(s); !slices.Contains(got, "secrets") {
			t.Errorf("NeedsNames = %v, want secrets listed", got)
		}
		listed(s, "secrets", secrets)
		return s
	}
	f := checkCodes(t, imageRules, snapshot(map[string]time.Duration{"regcred": 30 * time.Second}), CodeImagePullUnauthorized)[0]
	if !strings.Contains(f.Summary, "but it exists in namespace shop now") {
		t.Errorf("created since: summary %q, want it said to exist", f.Summary)
	}
	for _, step := range f.Fix {
		if strings.Contains(step, "kubectl create secret") && !strings.Contains(step, "--dry-run=client -o yaml | kubectl apply -f -") {
			t.Errorf("created since: fix creates it again, which fails (AlreadyExists): %s", step)
		}
	}
	f = checkCodes(t, imageRules, snapshot(map[string]time.Duration{"other": time.Hour}), CodeImagePullUnauthorized)[0]
	if !strings.Contains(f.Summary, ": it does not exist in namespace shop.") {
		t.Errorf("listed missing: summary %q, want it said plainly", f.Summary)
	}
}
