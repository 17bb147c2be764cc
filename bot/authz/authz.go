package authz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/whypending/whypending/chat"
)

// Mode says which actions are checked against Kubernetes RBAC.
type Mode string

const (
	// ModeOff checks nothing: the bot's own rules alone decide (the default).
	ModeOff Mode = "off"
	// ModeApprovals checks Changes: planning a repair, approving or denying one, a silence
	// or a snooze.
	ModeApprovals Mode = "approvals"
	// ModeAll checks Reads (answers) as well as Changes.
	ModeAll Mode = "all"
)

// Scope is what a check guards; the Mode decides whether it is checked.
type Scope string

const (
	// Reads are answers: /why-pending (get pods in the namespace, list pods for --all),
	// /ipam check and blocks. Checked in ModeAll.
	Reads Scope = "read"
	// Changes are what changes the cluster or what others are told: planning a repair,
	// deciding a plan, a silence, a snooze. Checked in ModeApprovals and ModeAll.
	Changes Scope = "change"
)

// Checks reports whether m checks scope s.
func (m Mode) Checks(s Scope) bool {
	switch m {
	case ModeAll:
		return true
	case ModeApprovals:
		return s == Changes
	}
	return false
}

// DefaultTTL is how long a SubjectAccessReview decision is reused: a RoleBinding added or
// removed takes effect within it.
const DefaultTTL = 30 * time.Second

// reviewTimeout bounds one SubjectAccessReview, whoever waits for it.
const reviewTimeout = 10 * time.Second

// cacheSize bounds the decisions kept (least recently used go first).
const cacheSize = 4096

// Reviewer sends SubjectAccessReviews to one cluster's API server (fleet.Cluster does, with
// its current connection).
type Reviewer interface {
	// ReviewAccess creates a SubjectAccessReview with spec and returns its status.
	ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error)
}

// Options configures New.
type Options struct {
	// Mode says what is checked (ModeOff: New returns nil).
	Mode Mode
	// Mappings map each platform's people (by chat.Principal.Platform) to Kubernetes
	// identities.
	Mappings map[string]Mapping
	// Directories resolve platform group membership (Slack user groups), by platform.
	Directories map[string]Directory
	// Profiles read verified emails (Slack users.info), by platform.
	Profiles map[string]Profiles
	// Clusters send the reviews of each configured cluster, by name.
	Clusters map[string]Reviewer
	// TTL is how long a decision is reused (0: DefaultTTL).
	TTL time.Duration
	// Metrics counts reviews and refusals (nil: not counted).
	Metrics *Metrics
	// Log receives the audit records of refusals (nil: slog.Default()).
	Log *slog.Logger
	// Now is the cache's clock (nil: time.Now).
	Now func() time.Time
}

// Authorizer checks people against Kubernetes RBAC. A nil *Authorizer is ModeOff: it allows
// everything without asking. It is safe for concurrent use.
type Authorizer struct {
	mode        Mode
	mappings    map[string]Mapping
	directories map[string]Directory
	profiles    map[string]Profiles
	clusters    map[string]Reviewer
	ttl         time.Duration
	metrics     *Metrics
	log         *slog.Logger
	cache       *cache.LRUExpireCache
	inflight    singleflight.Group
	// brokenGroups holds the "platform/group: error" of group lookups already logged.
	brokenGroups sync.Map
}

// New returns an Authorizer, or nil for ModeOff (or an empty Mode).
func New(o Options) *Authorizer {
	if o.Mode == "" || o.Mode == ModeOff {
		return nil
	}
	a := &Authorizer{mode: o.Mode, mappings: o.Mappings, directories: o.Directories, profiles: o.Profiles,
		clusters: o.Clusters, ttl: o.TTL, metrics: o.Metrics, log: o.Log}
	if a.ttl <= 0 {
		a.ttl = DefaultTTL
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	a.cache = cache.NewLRUExpireCacheWithClock(cacheSize, clockFunc(now))
	return a
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// Mode is the authorizer's mode (ModeOff for nil).
func (a *Authorizer) Mode() Mode {
	if a == nil {
		return ModeOff
	}
	return a.mode
}

// Request is one question: may Who do every one of Permissions on Cluster.
type Request struct {
	// Who is the person in the chat.
	Who chat.Principal
	// Scope is what the permissions guard (the Mode decides whether it is checked).
	Scope Scope
	// Cluster is the configured name of the cluster whose RBAC decides.
	Cluster string
	// What names the action for the audit record: "/why-pending", "plan release-leaked-ips",
	// "approve rr-…", "silence".
	What string
	// Permissions are what the action needs; each must be allowed.
	Permissions []authorizationv1.ResourceAttributes
}

// Allow answers r: may the person do every permission on the cluster? It maps r.Who to a
// Kubernetes identity and asks the cluster's API server with one SubjectAccessReview per
// permission (each decision cached for the TTL), in order, stopping at the first denial.
//
// It returns the identity checked as when every permission is allowed; nil and no error when
// the mode does not check r.Scope (or a is nil). A refusal is a *Refusal (Text for the person:
// the exact verb, resource and namespace denied, or what the mapping lacks), counted and
// written to the log as an audit record. Any other error means the question could not be
// answered (the API server or the chat platform's directory did not answer): treat it as a
// refusal, and do not cache it.
func (a *Authorizer) Allow(ctx context.Context, r Request) (*Identity, error) {
	if a == nil || !a.mode.Checks(r.Scope) {
		return nil, nil
	}
	id, err := a.identify(ctx, r.Who)
	if err == nil {
		var denied *authorizationv1.ResourceAttributes
		if denied, err = a.first(ctx, r.Cluster, id, r.Permissions); err == nil && denied != nil {
			err = &Refusal{Reason: ReasonDenied, Principal: r.Who, As: &id, Cluster: r.Cluster, Denied: denied,
				Text: fmt.Sprintf("Kubernetes RBAC does not allow you to %s on cluster %s (checked as %s). Nothing was done.",
					Describe(*denied), r.Cluster, id)}
		}
	}
	var ref *Refusal
	switch {
	case errors.As(err, &ref):
		a.audit(ctx, r, ref)
		return nil, err
	case err != nil:
		a.metrics.refused(r.Scope, "error")
		return nil, &CheckError{Cluster: r.Cluster, Err: fmt.Errorf("check what %s may do on cluster %s: %w", r.Who, r.Cluster, err)}
	}
	return &id, nil
}

// CheckError is a question Allow could not answer: a SubjectAccessReview failed (the API
// server did not answer, or the bot's ServiceAccount may not create them) or the person's
// identity could not be read. Nothing may go on; Text says so, for the person only.
type CheckError struct {
	Cluster string
	Err     error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// Text is what the person is told: the check could not be made, and, when the API server
// refused the SubjectAccessReview itself, what the bot's ServiceAccount lacks.
func (e *CheckError) Text() string {
	if apierrors.IsForbidden(e.Err) {
		return fmt.Sprintf("whypending could not check what Kubernetes RBAC allows you on cluster %s, so nothing was done: "+
			"the bot's ServiceAccount may not create subjectaccessreviews.authorization.k8s.io there "+
			"(the chart grants it when authorization.mode is not off). Ask the bot's admins.", e.Cluster)
	}
	return fmt.Sprintf("whypending could not check what Kubernetes RBAC allows you on cluster %s (the check failed), so nothing was done. Please try again in a moment.", e.Cluster)
}

// Visible reports whether who may get pods in namespace of cluster, without an audit record:
// what an answer may mention of another namespace than the one asked about (pod and workload
// names a typo is close to). True when the mode does not check Reads; false when it cannot be
// decided.
func (a *Authorizer) Visible(ctx context.Context, who chat.Principal, cluster, namespace string) bool {
	if a == nil || !a.mode.Checks(Reads) {
		return true
	}
	id, err := a.identify(ctx, who)
	if err != nil {
		return false
	}
	denied, err := a.first(ctx, cluster, id, []authorizationv1.ResourceAttributes{InNamespace("get", "", "pods", namespace)})
	return err == nil && denied == nil
}

// first returns the first of perms that cluster's RBAC denies id, nil when it allows all.
func (a *Authorizer) first(ctx context.Context, cluster string, id Identity, perms []authorizationv1.ResourceAttributes) (*authorizationv1.ResourceAttributes, error) {
	rv := a.clusters[cluster]
	if rv == nil {
		return nil, fmt.Errorf("cluster %q has no access reviewer", cluster)
	}
	for i := range perms {
		ok, err := a.review(ctx, rv, cluster, id, perms[i])
		if err != nil {
			return nil, err
		}
		if !ok {
			p := perms[i]
			return &p, nil
		}
	}
	return nil, nil
}

// review asks whether id may do p on the cluster, from the cache while the decision is
// younger than the TTL. Concurrent misses for the same question share one review, which
// outlives the askers' contexts (bounded by reviewTimeout) so that its decision is cached.
func (a *Authorizer) review(ctx context.Context, rv Reviewer, cluster string, id Identity, p authorizationv1.ResourceAttributes) (bool, error) {
	key := cluster + "\x00" + id.key() + "\x00" + p.Verb + "\x00" + p.Group + "\x00" + p.Resource + "\x00" + p.Subresource + "\x00" + p.Namespace + "\x00" + p.Name
	if v, ok := a.cache.Get(key); ok {
		a.metrics.reviewed("cache", decision(v.(bool)))
		return v.(bool), nil
	}
	ch := a.inflight.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		st, err := rv.ReviewAccess(rctx, authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &p, User: id.User, Groups: id.Groups})
		if err != nil {
			a.metrics.reviewed("api", "error")
			return false, err
		}
		// Allowed is the answer: Denied only says no other authorizer was asked, and an
		// EvaluationError that still denies is a denial.
		a.cache.Add(key, st.Allowed, a.ttl)
		a.metrics.reviewed("api", decision(st.Allowed))
		return st.Allowed, nil
	})
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return false, fmt.Errorf("SubjectAccessReview on cluster %s: %w", cluster, res.Err)
		}
		return res.Val.(bool), nil
	}
}

// audit counts a refusal and writes its audit record.
func (a *Authorizer) audit(ctx context.Context, r Request, ref *Refusal) {
	a.metrics.refused(r.Scope, string(ref.Reason))
	attrs := []any{slog.Bool("audit", true), slog.String("actor", r.Who.String()), slog.String("what", r.What),
		slog.String("cluster", r.Cluster), slog.String("reason", string(ref.Reason))}
	if ref.As != nil {
		attrs = append(attrs, slog.String("as", ref.As.String()))
	}
	if d := ref.Denied; d != nil {
		attrs = append(attrs, slog.String("verb", d.Verb), slog.String("group", d.Group), slog.String("resource", d.Resource),
			slog.String("namespace", d.Namespace))
	}
	a.log.WarnContext(ctx, "authorization refused", attrs...)
}

// Reason is why a Refusal refused.
type Reason string

const (
	// ReasonUnmapped: the person maps to no Kubernetes user or group.
	ReasonUnmapped Reason = "unmapped"
	// ReasonDenied: the API server did not allow a permission to their identity.
	ReasonDenied Reason = "denied"
)

// Refusal is a person refused by Allow.
type Refusal struct {
	// Reason is why.
	Reason Reason
	// Principal is who was refused.
	Principal chat.Principal
	// As is the identity checked (nil when unmapped).
	As *Identity
	// Cluster is the cluster whose RBAC denied (empty when unmapped).
	Cluster string
	// Denied is the permission denied (nil when unmapped).
	Denied *authorizationv1.ResourceAttributes
	// Text is for the person, complete sentences: what was denied (the verb, the resource
	// and the namespace, or what their mapping lacks) and that nothing was done. It says
	// nothing of the namespace or cluster beyond what they asked.
	Text string
}

// Error returns Text.
func (r *Refusal) Error() string { return r.Text }

// InNamespace is the permission verb on resource (of group, "" for the core group) in
// namespace ("" for cluster-wide).
func InNamespace(verb, group, resource, namespace string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace}
}

// Describe says a permission the way a refusal does: "get pods in namespace shop", "update
// ipamblocks.crd.projectcalico.org (cluster-wide)".
func Describe(p authorizationv1.ResourceAttributes) string {
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	if p.Group != "" {
		res += "." + p.Group
	}
	if p.Name != "" {
		res += " " + p.Name
	}
	if p.Namespace == "" {
		return p.Verb + " " + res + " (cluster-wide)"
	}
	return p.Verb + " " + res + " in namespace " + p.Namespace
}

// Metrics count the authorizer's work for /metrics.
type Metrics struct {
	// reviews counts permission decisions by source ("cache", "api") and decision
	// ("allowed", "denied", "error").
	reviews *prometheus.CounterVec
	// refusals counts refused requests by scope and reason ("unmapped", "denied", "error").
	refusals *prometheus.CounterVec
	// groupErrors counts platform group lookups that failed and were skipped, by platform.
	groupErrors *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_authorization_reviews_total",
			Help: "Per-user permission decisions (SubjectAccessReviews), by source (cache or api) and decision (allowed, denied, error).",
		}, []string{"source", "decision"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_authorization_refusals_total",
			Help: "Requests refused by per-user authorization, by scope (read, change) and reason (unmapped, denied, error).",
		}, []string{"scope", "reason"}),
		groupErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "whypending_authorization_group_lookup_errors_total",
			Help: "Lookups of a mapped platform group (Slack usergroups.users.list) that failed and were skipped, by platform.",
		}, []string{"platform"}),
	}
	if reg != nil {
		reg.MustRegister(m.reviews, m.refusals, m.groupErrors)
	}
	return m
}

func (m *Metrics) reviewed(source, decision string) {
	if m != nil {
		m.reviews.WithLabelValues(source, decision).Inc()
	}
}

func (m *Metrics) groupFailed(platform string) {
	if m != nil {
		m.groupErrors.WithLabelValues(platform).Inc()
	}
}

func decision(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

func (m *Metrics) refused(scope Scope, reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(string(scope), reason).Inc()
}
