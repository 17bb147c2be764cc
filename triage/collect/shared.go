package collect

import (
	"context"
	"errors"
	"sync"
	"time"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/whypending/whypending/triage"
)

// clusterReads are the reads of the whole cluster that the Snapshots of unscheduled pods
// share: every node, the pods bound to each (read node by node, triage.NodePods), what they
// request per node, and the node tables of the pods judged against them
// (triage.NodeTables). One question reads them once for all the pods it diagnoses (podBatch);
// AnswerEach reads them once for all its questions.
type clusterReads struct {
	once       sync.Once
	nodes      []*corev1.Node // sorted by name
	nodeByName map[string]*corev1.Node
	bound      triage.NodePods
	requested  map[string]corev1.ResourceList
	// nodesErr and boundErr are why nodes or bound could not be read.
	nodesErr, boundErr error
	tables             *triage.NodeTables
}

// sharedKey carries the clusterReads of AnswerEach through its questions.
type sharedKey struct{}

// recentReads lets the questions that run at the same time share one clusterReads: in a mass
// event the bot answers several chat questions about unscheduled pods at once, and each would
// otherwise group every cached pod by node for itself. A question takes the latest reads if
// they were made at most readsFresh ago and another question still holds them (a weak
// pointer: they go with the last question that uses them), else makes new ones.
type recentReads struct {
	mu   sync.Mutex
	last weak.Pointer[clusterReads]
	at   time.Time
}

// readsFresh is how old shared cluster reads may be: about what the informer caches lag.
const readsFresh = time.Second

// get returns the reads to use at now.
func (r *recentReads) get(now time.Time) *clusterReads {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cr := r.last.Value(); cr != nil && now.Sub(r.at) < readsFresh {
		return cr
	}
	cr := &clusterReads{}
	r.last, r.at = weak.Make(cr), now
	return cr
}

// clusterReads returns the cluster-wide reads: those ctx carries (AnswerEach), else recent
// ones another question holds (recentReads; not for a question limited to what one identity
// may see, which AnswerEach answers alone too), else fresh ones. A question that shares them
// notes their refused reads as its own.
func (c *Collector) clusterReads(ctx context.Context) *clusterReads {
	cr, _ := ctx.Value(sharedKey{}).(*clusterReads)
	_, limited := ctx.Value(visibleKey{}).(func(context.Context, string) bool)
	switch {
	case cr != nil:
	case c.recent != nil && !limited:
		cr = c.recent.get(c.now())
	default:
		cr = &clusterReads{}
	}
	cr.once.Do(func() {
		cr.nodes, cr.nodesErr = c.allNodes(ctx)
		cr.bound, cr.requested, cr.boundErr = c.read.allBound(ctx)
		if cr.bound == nil {
			cr.bound = triage.PodMap(nil)
		}
		cr.nodeByName = make(map[string]*corev1.Node, len(cr.nodes))
		for _, n := range cr.nodes {
			cr.nodeByName[n.Name] = n
		}
		cr.tables = triage.NewNodeTables()
	})
	if c.refused != nil {
		c.refused.note(cr.nodesErr, time.Time{}, "list", "nodes", "")
		c.refused.note(cr.boundErr, time.Time{}, "list", "pods", "")
	}
	return cr
}

// err is NodesErr of a Snapshot that reads cr.
func (cr *clusterReads) err() error { return errors.Join(cr.nodesErr, cr.boundErr) }

// AnswerEach answers many why-pending questions together, the way Answer answers each: for
// a watch that diagnoses every stuck pod and workload of an incident at once. The reads that
// the answers about unscheduled pods share (every node, the pods bound to each, what they
// request, and the node table of each distinct demand: the Pending pods of one workload share
// one) are made once for all of them, so a mass event of hundreds of Pending pods costs about
// what one question costs in memory. Questions limited to what one identity may see
// (Target.Visible) are answered alone. answers[i] and errs[i] are Answer's results for
// targets[i]; up to answerEachConcurrency questions run at once.
func AnswerEach(ctx context.Context, c *Collector, targets []triage.Target) (answers []*triage.Answer, errs []error) {
	answers, errs = make([]*triage.Answer, len(targets)), make([]error, len(targets))
	shared := context.WithValue(ctx, sharedKey{}, &clusterReads{})
	var wg sync.WaitGroup
	sem := make(chan struct{}, answerEachConcurrency)
	for i, t := range targets {
		qctx := shared
		if t.Visible != nil {
			qctx = ctx
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			answers[i], errs[i] = Answer(qctx, c, t)
		})
	}
	wg.Wait()
	return answers, errs
}

// answerEachConcurrency is how many questions AnswerEach answers at once.
const answerEachConcurrency = 4
