// Package testenv runs a real local Kubernetes control plane (etcd, kube-apiserver and
// kube-scheduler built from the Go module proxy by hack/controlplane) with the Calico CRDs
// installed, and loads scenarios (plain manifests plus expected.yaml) into it. go test and
// whypending demo use it.
//
// # Shape
//
// One etcd per process (StartEtcd, started on first use, stopped by Shutdown) serves every
// cluster; each Start launches its own kube-apiserver (RBAC on, loopback, a fresh self-signed
// certificate and static tokens) over its own --etcd-prefix, so clusters are isolated and a
// fresh one costs about 2.5-3s on 2 idle cores. No controller-manager or kubelet runs: objects
// only change when a test, Load or the optional kube-scheduler changes them. The
// ServiceAccount and PodSecurity admission plugins are off so copied real-world pods load as
// written.
//
// # Use in tests
//
//	func TestMain(m *testing.M) { testcluster.Main(m) }
//
//	func TestX(t *testing.T) {
//		c := testcluster.Start(t, testenv.Options{Scheduler: true})
//		s := testcluster.Load(t, c, "seed-nginx-taint")
//		ns, name, _ := strings.Cut(s.Expected.Pod, "/")
//		if err := c.WaitForScheduler(t.Context(), ns, name); err != nil {
//			t.Fatal(err)
//		}
//		// c.Client, c.Dynamic, c.Config, c.KubeconfigPath ...
//	}
//
// # Binaries and processes
//
// BinDir builds the binaries on first use (about 6 minutes on 2 cores, cached under
// <repo>/.cache) or takes them from $WHYPENDING_CONTROLPLANE_BIN. Helm does the same for the
// pinned helm (hack/helm; $WHYPENDING_HELM), which the chart tests run; Cluster.Apply sends
// rendered manifests with server-side apply (optionally as a dry run). Every child runs in its own
// process group and, on Linux, is killed when the test process dies (Pdeathsig); Stop and
// Shutdown kill the groups and remove the temp dirs (<tmp>/whypending-testenv-<pid>), and a
// later process sweeps the dirs of processes that died without Shutdown.
package testenv
