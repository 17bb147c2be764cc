package testenv

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/whypending/whypending/internal/clock"
)

// WorkloadControllers are the kube-controller-manager controllers Options.ControllerManager
// runs (their 1.37 names, with the -controller suffix): the workload controllers that create
// pods and write FailedCreate when the API server refuses one, the ServiceAccount controller
// (each namespace's "default" ServiceAccount, which the ServiceAccount admission plugin
// requires), the resource quota controller (it fills in status.used, which quota admission
// checks) and the garbage collector (owned objects go with their owner).
var WorkloadControllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"job-controller",
	"cronjob-controller",
	"serviceaccount-controller",
	"resourcequota-controller",
	"garbage-collector-controller",
}

// controllerManagerReady bounds the wait for the controller manager's first sync.
const controllerManagerReady = 90 * time.Second

// startControllerManager starts the cluster's kube-controller-manager (built from the same
// k8s.io/kubernetes module as the API server, see BinDir) with only WorkloadControllers, as a
// system:masters user, no leader election and no cloud provider, and waits until it serves
// /healthz and its ServiceAccount controller has created the "default" ServiceAccount of the
// "default" namespace (the sign its controllers run).
func (c *Cluster) startControllerManager(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("start controller manager: cluster stopped")
	}
	bin := filepath.Join(c.binDir, "kube-controller-manager")
	if err := checkExecutable(bin); err != nil {
		return fmt.Errorf("start controller manager: %w (hack/controlplane/build.sh builds it)", err)
	}
	p, err := c.startComponent(ctx, "kube-controller-manager", filepath.Join(c.dir, "controller-manager.kubeconfig"), "/healthz", controllerManagerReady,
		"--cert-dir="+filepath.Join(c.dir, "kcm-certs"),
		"--controllers="+strings.Join(WorkloadControllers, ","),
		"--use-service-account-credentials=false",
		"--service-account-private-key-file="+c.pki.saKeyFile,
		"--root-ca-file="+c.pki.certFile,
		"--concurrent-deployment-syncs=2",
		"--concurrent-replicaset-syncs=2",
	)
	if err != nil {
		return fmt.Errorf("start controller manager: %w", err)
	}
	c.controllerManager = p
	if err := c.waitServiceAccount(ctx, metav1.NamespaceDefault, "default", controllerManagerReady); err != nil {
		return fmt.Errorf("start controller manager: %w", err)
	}
	return nil
}

// ControllerManagerRunning reports whether the cluster's kube-controller-manager process is
// alive.
func (c *Cluster) ControllerManagerRunning() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.controllerManager != nil && !c.controllerManager.exited()
}

// WaitServiceAccount waits (polling every 100ms, up to a minute) until ServiceAccount
// namespace/name exists: with the controller manager running, a new namespace's "default"
// ServiceAccount appears within a second, and the ServiceAccount admission plugin refuses pods
// until it does.
func (c *Cluster) WaitServiceAccount(ctx context.Context, namespace, name string) error {
	return c.waitServiceAccount(ctx, namespace, name, time.Minute)
}

func (c *Cluster) waitServiceAccount(ctx context.Context, namespace, name string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		_, err := c.Client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			return nil
		case !apierrors.IsNotFound(err) && ctx.Err() == nil:
			return fmt.Errorf("wait for serviceaccount %s/%s: %w", namespace, name, err)
		}
		if err := clock.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("wait for serviceaccount %s/%s: %w", namespace, name, err)
		}
	}
}
