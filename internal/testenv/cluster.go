package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/whypending/whypending"
	"github.com/whypending/whypending/internal/clock"
)

// Options configures Start.
type Options struct {
	// Scheduler starts a kube-scheduler with the cluster. Leave it off for scenarios that
	// must load with no scheduler running; StartScheduler can start it later.
	Scheduler bool
	// Progress receives human-readable progress lines (the first-run binary build, process
	// starts). Nil discards them.
	Progress io.Writer
	// APIServerArgs are extra kube-apiserver flags appended to the defaults (a later flag
	// wins), e.g. "--feature-gates=...".
	APIServerArgs []string
	// ControllerManager starts a kube-controller-manager running only the workload controllers
	// (WorkloadControllers), so Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and
	// CronJobs create their pods and write their own events. It also turns the ServiceAccount
	// and PodSecurity admission plugins on, as on a real cluster: the controllers' pods are
	// admitted (or refused) for real. Scenario loading assumes them off, so leave it off there.
	ControllerManager bool
}

// CalicoCRDDir is the directory in whypending.CalicoCRDs (testdata/calico-crds in the
// repository, embedded in the binary) holding the Calico CRDs (crd.projectcalico.org/v1)
// that Start installs.
const CalicoCRDDir = "testdata/calico-crds"

// Admin identity of Cluster.Config: a static token for a user in system:masters.
const (
	AdminUser      = "whypending-admin"
	schedulerUser  = "system:kube-scheduler"
	kcmUser        = "system:kube-controller-manager"
	clientQPS      = 500
	clientBurst    = 1000
	apiserverReady = 60 * time.Second
)

// Cluster is one isolated control plane: its own kube-apiserver (RBAC on) over its own
// prefix of the shared etcd, optionally its own kube-scheduler and kube-controller-manager
// (workload controllers only). No kubelet runs, so pods change only when a test, the scheduler
// or a controller changes them.
type Cluster struct {
	// Name identifies the cluster within the process, e.g. "testenv-3"; it is also the
	// kubeconfig cluster/context name and part of the etcd prefix.
	Name string
	// Config is an admin (system:masters) client config for the cluster's kube-apiserver,
	// rate-limited at 500 QPS, burst 1000.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Dynamic is a dynamic client built from Config (Calico and other custom resources).
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources through the cluster's discovery; Reset it after
	// installing CRDs yourself (InstallCRDs does).
	Mapper meta.ResettableRESTMapper
	// KubeconfigPath is an admin kubeconfig file for the cluster (removed by Stop), for
	// kubectl or a whypending binary under test.
	KubeconfigPath string
	// StartupTime is how long Start took from call to return, including any binary build
	// or shared-etcd start this call had to do (a warm start is about 2.5-3s on 2 idle cores).
	StartupTime time.Duration

	binDir     string
	dir        string // temp dir holding certs, kubeconfigs and logs
	etcd       *Etcd
	etcdPrefix string
	server     string // https://127.0.0.1:<port>
	schedToken string
	progress   io.Writer
	caPEM      []byte   // the serving certificate, for readiness polls
	apiArgs    []string // the kube-apiserver command line, for StartAPIServer
	pki        *pki

	mu                sync.Mutex
	apiserver         *process
	scheduler         *process
	controllerManager *process
	stopped           bool
}

var (
	clusterSeq atomic.Int64
	liveMu     sync.Mutex
	live       = map[*Cluster]struct{}{}
)

// Start starts a fresh, isolated cluster on loopback: it builds the binaries if needed (see
// BinDir), starts the shared etcd if needed (see StartEtcd), starts a kube-apiserver with its
// own etcd prefix, installs and waits for the Calico CRDs from the repository's
// testdata/calico-crds, and starts a kube-scheduler when opts.Scheduler is set. ctx bounds
// startup only; the cluster runs until Stop (or process exit).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	begin := time.Now()
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	bin, err := BinDir(ctx, progress)
	if err != nil {
		return nil, err
	}
	etcd, err := StartEtcd(ctx, progress)
	if err != nil {
		return nil, err
	}
	etcdMu.Lock()
	pdir := procDir
	etcdMu.Unlock()
	if pdir == "" {
		return nil, errors.New("start cluster: shared etcd stopped concurrently")
	}
	name := "testenv-" + strconv.FormatInt(clusterSeq.Add(1), 10)
	dir, err := os.MkdirTemp(pdir, name+"-")
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	c := &Cluster{
		Name:       name,
		binDir:     bin,
		dir:        dir,
		etcd:       etcd,
		etcdPrefix: "/whypending/" + name,
		progress:   progress,
	}
	liveMu.Lock()
	live[c] = struct{}{}
	liveMu.Unlock()
	if err := c.start(ctx, opts); err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("start cluster %s: %w", name, err)
	}
	c.StartupTime = time.Since(begin)
	fmt.Fprintf(progress, "testenv: cluster %s ready at %s in %s\n", name, c.server, c.StartupTime.Round(time.Millisecond))
	return c, nil
}

func (c *Cluster) start(ctx context.Context, opts Options) error {
	pki, err := writePKI(c.dir)
	if err != nil {
		return err
	}
	c.pki = pki
	adminToken, schedToken, kcmToken := randomToken(), randomToken(), randomToken()
	c.schedToken = schedToken
	// The controller manager runs every controller under its own identity
	// (--use-service-account-credentials=false), so it gets system:masters.
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n%s,%s,%s\n%s,%s,%s,\"system:masters\"\n",
		adminToken, AdminUser, "uid-admin", schedToken, schedulerUser, "uid-scheduler", kcmToken, kcmUser, "uid-kcm")
	tokenFile := filepath.Join(c.dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("write token file: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pki.certPEM)
	httpClient := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   5 * time.Second,
	}
	defer httpClient.CloseIdleConnections()

	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		c.server = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		args := append(c.apiserverArgs(ports[0], pki, tokenFile, opts.ControllerManager), opts.APIServerArgs...)
		p, err := startProcess("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), args, filepath.Join(c.dir, "kube-apiserver.log"))
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.apiserver, c.apiArgs, c.caPEM = p, args, pki.certPEM
		c.mu.Unlock()
		lastErr = waitHTTP(ctx, p, httpClient, c.server+"/readyz", apiserverReady)
		if lastErr == nil {
			break
		}
		_ = p.stop()
		if ctx.Err() != nil || !p.exited() {
			return lastErr
		}
		// The process exited early: most likely the port was taken between freePorts and
		// bind. Try again on another port.
	}
	if lastErr != nil {
		return lastErr
	}

	c.Config = &rest.Config{
		Host:            c.server,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: pki.certPEM},
		QPS:             clientQPS,
		Burst:           clientBurst,
		UserAgent:       "whypending-testenv",
		// Loading real reports sends deprecated fields (beta.kubernetes.io/os selectors):
		// the API server's warnings about them are not the demo's output.
		WarningHandler: rest.NoWarnings{},
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("build clientset: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.Config); err != nil {
		return fmt.Errorf("build dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("build discovery client: %w", err)
	}
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))

	c.KubeconfigPath = filepath.Join(c.dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.Name, c.server, pki.certPEM, AdminUser, adminToken); err != nil {
		return err
	}
	if err := writeKubeconfig(filepath.Join(c.dir, "scheduler.kubeconfig"), c.Name, c.server, pki.certPEM, schedulerUser, schedToken); err != nil {
		return err
	}
	if err := writeKubeconfig(filepath.Join(c.dir, "controller-manager.kubeconfig"), c.Name, c.server, pki.certPEM, kcmUser, kcmToken); err != nil {
		return err
	}

	if err := c.InstallCRDs(ctx, whypending.CalicoCRDs, CalicoCRDDir); err != nil {
		return err
	}
	if opts.Scheduler {
		if err := c.StartScheduler(ctx); err != nil {
			return err
		}
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return err
		}
	}
	return nil
}

// apiserverArgs returns kube-apiserver flags tuned for a small, fast, throwaway cluster.
// With admission set, the ServiceAccount and PodSecurity admission plugins stay on (a cluster
// with a controller manager); otherwise they are off so copied real-world pods load as written.
func (c *Cluster) apiserverArgs(port int, p *pki, tokenFile string, admission bool) []string {
	disabled := "--disable-admission-plugins=ServiceAccount,PodSecurity"
	if admission {
		disabled = "--disable-admission-plugins="
	}
	return []string{
		"--etcd-servers=" + c.etcd.URL,
		"--etcd-prefix=" + c.etcdPrefix,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + c.dir,
		"--tls-cert-file=" + p.certFile,
		"--tls-private-key-file=" + p.keyFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.saKeyFile,
		"--service-account-signing-key-file=" + p.saKeyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		// Pods keep exactly the spec of their manifest: no token volume injected and no
		// ServiceAccount needed; no Pod Security rejections of copied real-world pods.
		disabled,
		"--allow-privileged=true",
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		"--event-ttl=168h", // scenario events must outlive a long demo session
		"--v=0",
	}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func writeKubeconfig(path, name, server string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// StartScheduler starts the cluster's kube-scheduler (as user system:kube-scheduler, no
// leader election) and waits until its informers have synced (/readyz). It is a no-op if the
// scheduler already runs.
func (c *Cluster) StartScheduler(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("start scheduler: cluster stopped")
	}
	if c.scheduler != nil && !c.scheduler.exited() {
		return nil
	}
	p, err := c.startComponent(ctx, "kube-scheduler", filepath.Join(c.dir, "scheduler.kubeconfig"), "/readyz", 60*time.Second)
	if err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	c.scheduler = p
	return nil
}

// startComponent starts a control-plane component that serves HTTPS on a loopback port
// (kube-scheduler, kube-controller-manager) with the flags they share (kubeconfig for the API,
// authentication and authorization; no leader election; loopback only) plus extra, and waits
// until path answers, up to ready. When the process exits early (most likely its port was
// taken between freePorts and bind) it tries again on another port, three times in all. The
// caller holds c.mu.
func (c *Cluster) startComponent(ctx context.Context, name, kubeconfig, path string, ready time.Duration, extra ...string) (*process, error) {
	httpClient := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, // self-signed, loopback only
		Timeout:   5 * time.Second,
	}
	defer httpClient.CloseIdleConnections()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			return nil, err
		}
		args := append([]string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--authentication-skip-lookup=true",
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(ports[0]),
			"--profiling=false",
			"--v=0",
		}, extra...)
		p, err := startProcess(name, filepath.Join(c.binDir, name), args, filepath.Join(c.dir, name+".log"))
		if err != nil {
			return nil, err
		}
		lastErr = waitHTTP(ctx, p, httpClient, "https://127.0.0.1:"+strconv.Itoa(ports[0])+path, ready)
		if lastErr == nil {
			return p, nil
		}
		_ = p.stop()
		if ctx.Err() != nil || !p.exited() {
			break
		}
	}
	return nil, lastErr
}

// StopAPIServer kills the cluster's kube-apiserver with SIGKILL, as a crash or an outage
// would: clients get "connection refused" until StartAPIServer. The cluster's objects stay
// in etcd. Idempotent.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.apiserver.stop()
	if err != nil {
		return fmt.Errorf("stop kube-apiserver of %s: %w", c.Name, err)
	}
	return nil
}

// StartAPIServer starts a stopped kube-apiserver again on the same address, with the same
// certificates and tokens, so Config, Client, KubeconfigPath and every client made from them
// work again; it waits until /readyz answers. It is a no-op if the API server runs.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("start kube-apiserver: cluster stopped")
	}
	if c.apiserver != nil && !c.apiserver.exited() {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.caPEM)
	httpClient := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		Timeout:   5 * time.Second,
	}
	defer httpClient.CloseIdleConnections()
	var err error
	// The port was ours a moment ago, but a client's connection in TIME_WAIT or another
	// process can hold it briefly: retry the start for a few seconds.
	for attempt := 0; attempt < 5; attempt++ {
		var p *process
		p, err = startProcess("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), c.apiArgs, filepath.Join(c.dir, "kube-apiserver.log"))
		if err != nil {
			return err
		}
		c.apiserver = p
		if err = waitHTTP(ctx, p, httpClient, c.server+"/readyz", apiserverReady); err == nil || !p.exited() || ctx.Err() != nil {
			break
		}
		if serr := clock.Sleep(ctx, time.Second); serr != nil {
			return serr
		}
	}
	if err != nil {
		return fmt.Errorf("start kube-apiserver of %s: %w", c.Name, err)
	}
	return nil
}

// PauseAPIServer stops the cluster's kube-apiserver with SIGSTOP (ResumeAPIServer continues
// it): its port still accepts connections, but nothing answers, not even the TLS handshake,
// as with a hung server or a black-holed network. Clients wait until their own timeouts.
func (c *Cluster) PauseAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apiserver.pause(true)
}

// ResumeAPIServer continues a kube-apiserver PauseAPIServer stopped.
func (c *Cluster) ResumeAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apiserver.pause(false)
}

// PauseEtcd stops the shared etcd behind every cluster of the process with SIGSTOP
// (ResumeEtcd continues it): the kube-apiservers still answer, but every read and write that
// needs etcd waits, and /readyz reports etcd failed. Tests that pause it must not run in
// parallel with other tests of the package.
func (c *Cluster) PauseEtcd() error { return c.etcd.proc.pause(true) }

// ResumeEtcd continues the etcd PauseEtcd stopped.
func (c *Cluster) ResumeEtcd() error { return c.etcd.proc.pause(false) }

// PIDs returns the process IDs of the cluster's kube-apiserver and of the shared etcd (0 for
// one that is not running), for benchmarks that read their CPU time from /proc or renice them.
func (c *Cluster) PIDs() (apiserver, etcd int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil && !c.apiserver.exited() {
		apiserver = c.apiserver.pid
	}
	if c.etcd != nil && c.etcd.proc != nil && !c.etcd.proc.exited() {
		etcd = c.etcd.proc.pid
	}
	return apiserver, etcd
}

// StopScheduler kills the cluster's kube-scheduler if it runs. Idempotent.
func (c *Cluster) StopScheduler() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.scheduler.stop()
	c.scheduler = nil
	return err
}

// SchedulerRunning reports whether the cluster's kube-scheduler process is alive.
func (c *Cluster) SchedulerRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scheduler != nil && !c.scheduler.exited()
}

// Stop kills the cluster's processes (whole process groups), deletes its keys from the
// shared etcd and removes its temp files. It is idempotent and safe on a partly started
// cluster. The shared etcd keeps running (see Shutdown).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	errs := []error{c.controllerManager.stop(), c.scheduler.stop(), c.apiserver.stop()}
	c.controllerManager, c.scheduler, c.apiserver = nil, nil, nil
	c.mu.Unlock()

	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
	if c.etcd != nil && !c.etcd.proc.exited() {
		_ = c.etcd.deletePrefix(c.etcdPrefix + "/") // best effort: only keeps etcd small
	}
	if err := os.RemoveAll(c.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove temp dir: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop cluster %s: %w", c.Name, err)
	}
	return nil
}

// LogTail returns the last n lines of a component's log ("kube-apiserver", "kube-scheduler" or
// "kube-controller-manager"), for test failure messages; empty once the cluster is stopped.
func (c *Cluster) LogTail(component string, n int) string {
	p := &process{name: component, logPath: filepath.Join(c.dir, component+".log")}
	return p.logTail(n)
}

// stopAll stops every live cluster (used by Shutdown paths).
func stopAll() error {
	liveMu.Lock()
	cs := make([]*Cluster, 0, len(live))
	for c := range live {
		cs = append(cs, c)
	}
	liveMu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Stop())
	}
	return errors.Join(errs...)
}
