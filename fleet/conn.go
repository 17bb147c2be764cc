package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/whypending/whypending/actions"
	"github.com/whypending/whypending/calico"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/triage"
	"github.com/whypending/whypending/triage/collect"
)

// conn is one connection to a cluster, from a successful connect until the API server stops
// answering.
type conn struct {
	collector *collect.Collector // the pod, node, event and storage reads (cached in serve)
	ipam      *calico.Client     // live Calico IPAM reads and writes; nil without Calico
	ipamCache *calico.Cache      // Calico IPAM from the collector's caches; nil without Calico or uncached
	// ipamRead answers /ipam check, /ipam blocks and the digest: ipamCache when there is
	// one, else ipam; nil without Calico.
	ipamRead interface {
		Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error)
		Utilization(ctx context.Context) (*calico.Utilization, error)
	}
	runner *actions.Runner // plans and repairs, always live through ipam; nil without Calico

	client kubernetes.Interface // probes (never for a Wire'd cluster) and SubjectAccessReviews
	dyn    dynamic.Interface    // for Options.Check; nil without one
	// ledger and ackLedger are the Notification clients, each with its own rate limit (Ledger,
	// AckLedger); nil without Options.Check.
	ledger, ackLedger *ledger.Client
	cancel            context.CancelFunc // stops the caches
	checkErr          error              // the last Options.Check; guarded by Cluster.mu
}

// wire makes one connection over collector: /why-pending through it, and, when Calico is
// installed, /ipam and repairs through calico/ and actions/ (recovering a datastore lock an
// earlier run of this owner left behind). A cluster without Calico still answers /why-pending.
//
// With a cached collector (serve), Calico IPAM is read from a calico.Cache that shares the
// collector's pods and nodes: /ipam check, /ipam blocks, the digest and diagnoses answer from
// it, and wire waits until it has synced (bound it with ctx). Plans and repairs always read and
// write live through the *calico.Client.
func wire(ctx context.Context, name string, restCfg *rest.Config, collector *collect.Collector, lock Lock, log *slog.Logger) (*conn, error) {
	collector.WithCalico(restCfg)
	c := &conn{collector: collector, cancel: func() {}}
	ipam, err := calico.NewClient(ctx, restCfg)
	if errors.Is(err, calico.ErrCalicoNotInstalled) {
		log.Warn("calico is not installed: /ipam is off for this cluster", slog.String("cluster", name))
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("connect to calico: %w", err)
	}
	if recovered, err := ipam.RecoverLocks(ctx, lock.Owner); err != nil {
		log.Warn("recover datastore lock", slog.String("cluster", name), slog.Any("err", err))
	} else if recovered {
		log.Warn("unlocked a calico datastore lock an earlier run left behind", slog.String("cluster", name))
	}
	c.ipam, c.ipamRead = ipam, ipam
	c.runner = &actions.Runner{Cluster: name, IPAM: ipam, LockPolicy: lock.Policy, LockTTL: lock.TTL, LockOwner: lock.Owner}
	users := collector.AddressUsers()
	if users == nil {
		collector.WithIPAM(ipam)
		return c, nil
	}
	cache := calico.NewCache(ctx, ipam, users)
	if err := cache.WaitForSync(ctx); err != nil {
		return nil, err
	}
	collector.WithIPAM(cache)
	c.ipamCache, c.ipamRead = cache, cache
	return c, nil
}

// Wire makes a Cluster connected once through collector and restCfg, never probed or
// reconnected: whypending demo (an uncached collector per scenario cluster) and tests use it
// to drive the same calls as serve. ctx bounds the Calico cache sync and, for a cached
// collector, lives as long as the caches.
func Wire(ctx context.Context, name string, restCfg *rest.Config, collector *collect.Collector, lock Lock, log *slog.Logger) (*Cluster, error) {
	cn, err := wire(ctx, name, restCfg, collector, lock, log)
	if err != nil {
		return nil, err
	}
	if cn.client, err = kubernetes.NewForConfig(restCfg); err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	c := New(Options{Name: name, Lock: lock, Log: log})
	c.conn, c.restCfg, c.err = cn, restCfg, nil
	close(c.tried)
	return c, nil
}

// errNoCalico is returned by the IPAM calls of a cluster without Calico.
func (c *Cluster) errNoCalico() error {
	return fmt.Errorf("cluster %s: %w", c.name, calico.ErrCalicoNotInstalled)
}

// Answer answers a why-pending question about a pod, a workload or a namespace
// (bot.Answerer).
func (c *Cluster) Answer(ctx context.Context, t triage.Target) (*triage.Answer, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	a, err := collect.Answer(ctx, cn.collector, t)
	return a, c.Unavailable(err)
}

// AnswerEach answers many why-pending questions together (collect.AnswerEach): what a watch
// diagnoses in one pass, the reads the answers share (the nodes, the pods bound to each, the
// node table of each distinct Pending demand) made once. answers[i] and errs[i] are Answer's
// results for targets[i].
func (c *Cluster) AnswerEach(ctx context.Context, targets []triage.Target) (answers []*triage.Answer, errs []error) {
	cn, err := c.current()
	if err != nil {
		errs = make([]error, len(targets))
		for i := range errs {
			errs[i] = err
		}
		return make([]*triage.Answer, len(targets)), errs
	}
	answers, errs = collect.AnswerEach(ctx, cn.collector, targets)
	for i := range errs {
		errs[i] = c.Unavailable(errs[i])
	}
	return answers, errs
}

// Check is the IPAM check, like calicoctl ipam check (bot.IPAM).
func (c *Cluster) Check(ctx context.Context, opts calico.CheckOptions) (*calico.CheckResult, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	if cn.ipamRead == nil {
		return nil, c.errNoCalico()
	}
	r, err := cn.ipamRead.Check(ctx, opts)
	return r, c.Unavailable(err)
}

// Utilization is the IPAM utilization, like calicoctl ipam show --show-blocks (bot.IPAM).
func (c *Cluster) Utilization(ctx context.Context) (*calico.Utilization, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	if cn.ipamRead == nil {
		return nil, c.errNoCalico()
	}
	u, err := cn.ipamRead.Utilization(ctx)
	return u, c.Unavailable(err)
}

// Plan makes a plan (a dry run) with the actions runner (bot.Planner).
func (c *Cluster) Plan(ctx context.Context, kind actions.Kind, opts actions.PlanOptions) (actions.Plan, error) {
	cn, err := c.current()
	if err != nil {
		return actions.Plan{}, err
	}
	if cn.runner == nil {
		return actions.Plan{}, c.errNoCalico()
	}
	p, err := cn.runner.Plan(ctx, kind, opts)
	return p, c.Unavailable(err)
}

// Execute runs an approved plan with the actions runner (approval.Executor).
func (c *Cluster) Execute(ctx context.Context, ap actions.Approved) (actions.Result, error) {
	cn, err := c.current()
	if err != nil {
		return actions.Result{PlanID: ap.Plan.ID, Kind: ap.Plan.Kind, Planned: len(ap.Plan.Items), Remaining: -1}, err
	}
	if cn.runner == nil {
		return actions.Result{}, c.errNoCalico()
	}
	r, err := cn.runner.Execute(ctx, ap)
	return r, c.Unavailable(err)
}

// Recover cleans up after a plan whose executing process died (approval.Recoverer).
func (c *Cluster) Recover(ctx context.Context, p actions.Plan) (actions.Recovery, error) {
	cn, err := c.current()
	if err != nil {
		return actions.Recovery{}, err
	}
	if cn.runner == nil {
		return actions.Recovery{}, c.errNoCalico()
	}
	r, err := cn.runner.Recover(ctx, p)
	return r, c.Unavailable(err)
}

// ReviewAccess asks the cluster's API server whether spec's user and groups may do spec's
// resource attributes, with a SubjectAccessReview (authz.Reviewer). The bot's credentials
// need create on subjectaccessreviews.authorization.k8s.io.
func (c *Cluster) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	cn, err := c.current()
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	out, err := cn.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, c.Unavailable(err)
	}
	return out.Status, nil
}

// RepairAccess lists the permissions an execution of kind uses on the cluster's Calico kinds
// (actions.Runner.Access), for bot.Access.
func (c *Cluster) RepairAccess(kind actions.Kind) ([]authorizationv1.ResourceAttributes, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	if cn.runner == nil {
		return nil, c.errNoCalico()
	}
	return cn.runner.Access(kind)
}

// CheckAccess is the permission behind an IPAM check or utilization (calico.Client.CheckAccess),
// for bot.Access.
func (c *Cluster) CheckAccess() (authorizationv1.ResourceAttributes, error) {
	cn, err := c.current()
	if err != nil {
		return authorizationv1.ResourceAttributes{}, err
	}
	if cn.ipam == nil {
		return authorizationv1.ResourceAttributes{}, c.errNoCalico()
	}
	return cn.ipam.CheckAccess(), nil
}

// Collector is the current connection's collector, whose informer caches the watch reads
// (bot/watch); a reconnect replaces it, with fresh caches. It returns the cluster's
// *chat.UnavailableError while it is unavailable.
func (c *Cluster) Collector() (*collect.Collector, error) {
	cn, err := c.current()
	if err != nil {
		return nil, err
	}
	return cn.collector, nil
}
