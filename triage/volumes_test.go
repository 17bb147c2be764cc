package triage

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestVolumeRules(t *testing.T) {
	creating := testPod(pending("ContainerCreating", ""), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}}
	})
	generic := warning("FailedMount", "Unable to attach or mount volumes: unmounted volumes=[config], unattached volumes=[config kube-api-access-x]: timed out waiting for the condition", 13, time.Second)
	tests := []struct {
		name string
		snap *Snapshot
		want []Code
	}{
		{"no mount events", testSnapshot(creating), nil},
		{"configmap not found, behind a newer generic timeout", testSnapshot(creating, generic, warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`, 23, time.Minute)), []Code{CodeConfigMapNotFound}},
		{"secret not found", testSnapshot(creating, warning("FailedMount", `MountVolume.SetUp failed for volume "tls" : secret "app-tls" not found`, 3, time.Minute)), []Code{CodeSecretNotFound}},
		{"multi-attach", testSnapshot(creating, warning("FailedAttachVolume", `Multi-Attach error for volume "pvc-1" Volume is already used by pod(s) db-0`, 3, time.Minute)), []Code{CodeMultiAttachRWO}},
		{"only the generic timeout", testSnapshot(creating, generic), []Code{CodeVolumeMountFailed}},
		{"a running pod's old mount events are ignored", testSnapshot(testPod(), generic), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkCodes(t, volumeRules, tt.snap, tt.want...) })
	}
}

// claimPod returns the ContainerCreating pod with a volume "data" on claim "data-0" (in
// s.PVCs as pvc; nil means it does not exist) and the StorageClasses given.
func claimSnapshot(pvc *corev1.PersistentVolumeClaim, classes []*storagev1.StorageClass, events ...Event) *Snapshot {
	pod := testPod(pending("ContainerCreating", ""), func(p *corev1.Pod) {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-0"}}}}
	})
	s := testSnapshot(pod, events...)
	s.PVCs = map[string]*corev1.PersistentVolumeClaim{"data-0": pvc}
	if classes != nil {
		s.StorageClasses = map[string]*storagev1.StorageClass{}
		for _, c := range classes {
			s.StorageClasses[c.Name] = c
		}
	}
	return s
}

func pendingClaim(class *string, annotations map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "shop", Annotations: annotations},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: class},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
}

func storageClass(name, provisioner string, mode storagev1.VolumeBindingMode, isDefault bool) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
	if isDefault {
		sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	}
	return sc
}

// TestMountTimeoutsLookAtTheClaim is issue 12's kind 7: a FailedMount timeout on a claim that is
// not bound names the claim and says why it is not bound.
func TestMountTimeoutsLookAtTheClaim(t *testing.T) {
	const (
		wffc      = storagev1.VolumeBindingWaitForFirstConsumer
		immediate = storagev1.VolumeBindingImmediate
	)
	timeout := warning("FailedMount", "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data kube-api-access-fgwmk]: timed out waiting for the condition", 4, 40*time.Second)
	oldTimeout := warning("FailedMount", `Unable to mount volumes for pod "app_shop(uid-app)": timeout expired waiting for volumes to attach or mount for pod "shop"/"app". list of unmounted volumes=[data]. list of unattached volumes=[data default-token-x]`, 9, time.Minute)
	tests := []struct {
		name      string
		snap      *Snapshot
		want      Code
		stuck     string // a substring the summary must have
		uncertain bool
	}{
		{
			name:  "local-path (WaitForFirstConsumer) and a pod created with spec.nodeName: the scheduler never selected a node",
			snap:  claimSnapshot(pendingClaim(ptr.To("local-path"), nil), []*storagev1.StorageClass{storageClass("local-path", "rancher.io/local-path", wffc, true)}, timeout),
			want:  CodePVCUnbound,
			stuck: "spec.nodeName",
		},
		{
			name:  "OpenEBS hostpath, older kubelet wording, same nodeName cause",
			snap:  claimSnapshot(pendingClaim(ptr.To("openebs-hostpath"), nil), []*storagev1.StorageClass{storageClass("openebs-hostpath", "openebs.io/local", wffc, false)}, oldTimeout),
			want:  CodePVCUnbound,
			stuck: "no node was ever selected",
		},
		{
			name:  "a storageClassName that does not exist, with the near miss named",
			snap:  claimSnapshot(pendingClaim(ptr.To("gp2"), nil), []*storagev1.StorageClass{storageClass("gp3", "ebs.csi.aws.com", wffc, true)}, timeout),
			want:  CodePVCUnbound,
			stuck: `did you mean gp3`,
		},
		{
			name:  "no class named and no default class",
			snap:  claimSnapshot(pendingClaim(nil, nil), []*storagev1.StorageClass{storageClass("standard", "kubernetes.io/gce-pd", immediate, false)}, timeout),
			want:  CodePVCUnbound,
			stuck: "no default StorageClass",
		},
		{
			name:  "a class without a provisioner (local volumes) and no matching PV",
			snap:  claimSnapshot(pendingClaim(ptr.To("local-storage"), nil), []*storagev1.StorageClass{storageClass("local-storage", noProvisioner, wffc, false)}, timeout),
			want:  CodePVCUnbound,
			stuck: "no provisioner",
		},
		{
			name: "the provisioner's own error is quoted",
			snap: func() *Snapshot {
				s := claimSnapshot(pendingClaim(ptr.To("rook-ceph-block"), nil), []*storagev1.StorageClass{storageClass("rook-ceph-block", "rook-ceph.rbd.csi.ceph.com", immediate, false)}, timeout)
				s.ClaimEvents = map[string][]Event{"data-0": {warning("ProvisioningFailed", `failed to provision volume with StorageClass "rook-ceph-block": rpc error: code = DeadlineExceeded desc = context deadline exceeded`, 12, time.Minute)}}
				return s
			}(),
			want:  CodePVCUnbound,
			stuck: "DeadlineExceeded",
		},
		{
			name:      "StorageClasses that could not be read: unbound, and unsure why",
			snap:      claimSnapshot(pendingClaim(ptr.To("fast"), nil), nil, timeout),
			want:      CodePVCUnbound,
			stuck:     "could not be read",
			uncertain: true,
		},
		{
			name: "a bound claim: the timeout is in attach or mount, not binding",
			snap: claimSnapshot(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-0", Namespace: "shop"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}, nil, timeout),
			want:  CodeVolumeMountFailed,
			stuck: `"data"`,
		},
		{
			name:  "a claim that does not exist",
			snap:  claimSnapshot(nil, nil, timeout),
			want:  CodePVCNotFound,
			stuck: "does not exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, volumeRules, tt.snap, tt.want)
			if !strings.Contains(got[0].Summary, tt.stuck) {
				t.Errorf("summary lacks %q: %s", tt.stuck, got[0].Summary)
			}
			if got[0].Uncertain != tt.uncertain {
				t.Errorf("uncertain = %t, want %t", got[0].Uncertain, tt.uncertain)
			}
			if strings.Contains(got[0].Summary, "unnamed") {
				t.Errorf("summary does not name the volume: %s", got[0].Summary)
			}
		})
	}
}

// TestMissingObjectsSuggestNearNames is issue 12's kind 9: a missing ConfigMap, Secret or PVC
// gets the closest existing names, and a Helm hook gets the hook-ordering note.
func TestMissingObjectsSuggestNearNames(t *testing.T) {
	withVolume := func(v corev1.Volume) podOpt {
		return func(p *corev1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v) }
	}
	cmVol := corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-conifg"}}}}
	secretVol := corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-creds"}}}
	tests := []struct {
		name    string
		snap    *Snapshot
		want    Code
		summary string // substring the summary must have ("" for none of the notes)
		notSaid string // substring it must not have
	}{
		{
			name: "a ConfigMap name with a typo",
			snap: func() *Snapshot {
				s := testSnapshot(testPod(pending("ContainerCreating", ""), withVolume(cmVol)),
					warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-conifg" not found`, 5, time.Minute))
				s.NamesInNamespace = map[string][]string{"configmaps": {"app-config", "kube-root-ca.crt"}}
				return s
			}(),
			want: CodeConfigMapNotFound, summary: "Did you mean ConfigMap app-config?",
		},
		{
			name: "a Secret whose real name has a suffix",
			snap: func() *Snapshot {
				s := testSnapshot(testPod(pending("ContainerCreating", ""), withVolume(secretVol)),
					warning("FailedMount", `MountVolume.SetUp failed for volume "creds" : secret "db-creds" not found`, 5, time.Minute))
				s.NamesInNamespace = map[string][]string{"secrets": {"db-creds-v2", "default-token-abcde"}}
				return s
			}(),
			want: CodeSecretNotFound, summary: "db-creds-v2", notSaid: "default-token",
		},
		{
			name: "a Helm pre-install hook Job mounting a ConfigMap its release creates later",
			snap: func() *Snapshot {
				s := testSnapshot(testPod(pending("ContainerCreating", ""), withVolume(cmVol), func(p *corev1.Pod) {
					p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "migrate", Controller: ptr.To(true)}}
				}), warning("FailedMount", `MountVolume.SetUp failed for volume "config" : configmap "app-conifg" not found`, 5, time.Minute))
				s.NamesInNamespace = map[string][]string{"configmaps": {"kube-root-ca.crt"}}
				s.Controller = &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "Job"},
					ObjectMeta: metav1.ObjectMeta{Name: "migrate", Annotations: map[string]string{helmHookAnnotation: "pre-install,pre-upgrade"}}}
				return s
			}(),
			want: CodeConfigMapNotFound, summary: "Helm pre-install,pre-upgrade hook", notSaid: "Did you mean",
		},
		{
			name: "nothing close: no suggestion",
			snap: func() *Snapshot {
				s := testSnapshot(testPod(pending("ContainerCreating", ""), withVolume(secretVol)),
					warning("FailedMount", `MountVolume.SetUp failed for volume "creds" : secret "db-creds" not found`, 5, time.Minute))
				s.NamesInNamespace = map[string][]string{"secrets": {"tls", "registry-pull"}}
				return s
			}(),
			want: CodeSecretNotFound, notSaid: "Did you mean",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkCodes(t, volumeRules, tt.snap, tt.want)
			if !strings.Contains(got[0].Summary, tt.summary) {
				t.Errorf("summary lacks %q: %s", tt.summary, got[0].Summary)
			}
			if tt.notSaid != "" && strings.Contains(got[0].Summary, tt.notSaid) {
				t.Errorf("summary has %q: %s", tt.notSaid, got[0].Summary)
			}
			if want := NeedsNames(tt.snap); len(want) == 0 {
				t.Errorf("NeedsNames() = none, want the missing object's resource")
			}
			if !looksFirst(got[0].Fix) {
				t.Errorf("fix acts before it looks: %q", got[0].Fix)
			}
		})
	}
}

// TestMissingObjectFixDecidesBeforeItCreates: the object created by hand comes last, after what
// would make it wrong: a Helm hook whose release creates the object (a copy made by hand then
// clashes with the release's), and a near name that may be the one meant, said as the other of
// two alternatives when the creation is a command to paste.
func TestMissingObjectFixDecidesBeforeItCreates(t *testing.T) {
	pod := testPod(waiting("app", "CreateContainerConfigError", `secret "db-creds" not found`), func(p *corev1.Pod) {
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db-creds"}, Key: "password"}}}}
		p.Annotations = map[string]string{helmHookAnnotation: "pre-install"}
	})
	s := testSnapshot(pod)
	s.NamesInNamespace = map[string][]string{"secrets": {"db-creds-v2"}}
	got := checkCodes(t, containerConfigRules, s, CodeSecretNotFound)
	fix := got[0].Fix
	if !strings.HasPrefix(fix[0], "kubectl get secrets -n shop") {
		t.Errorf("fix[0] = %q, want the namespace's Secrets", fix[0])
	}
	checkBefore(t, fix, "If the release itself creates the Secret", "kubectl create secret generic db-creds")
	checkBefore(t, fix, "Either, if db-creds-v2 is the one meant", "kubectl create secret generic db-creds")
	if last := fix[len(fix)-1]; !strings.HasPrefix(last, "kubectl create secret generic db-creds") {
		t.Errorf("fix ends with %q, want the creation last", last)
	}
}
