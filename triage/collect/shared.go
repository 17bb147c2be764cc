package collect

import (
	"context"
	"errors"
	"sync"

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

// clusterReads returns the cluster-wide reads: those ctx carries (AnswerEach), else fresh
// ones. A question that shares them notes their refused reads as its own.
func (c *Collector) clusterReads(ctx context.Context) *clusterReads {
	cr, _ := ctx.Value(sharedKey{}).(*clusterReads)
	if cr == nil {
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
		c.refused.note(cr.nodesErr, "list", "nodes", "")
		c.refused.note(cr.boundErr, "list", "pods", "")
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
