package bot

import (
	"context"
	"strings"
	"time"

	"github.com/whypending/whypending/triage"
)

// diagnoseTimeout bounds one diagnosis.
const diagnoseTimeout = 2 * time.Minute

// whyPending answers "/why-pending [ns/]pod [--cluster C]" with the diagnosis, visible to the
// channel. Remediation buttons get the cluster added to their value.
func (b *Bot) whyPending(ctx context.Context, req Request) (Reply, error) {
	f, err := parseFlags(req.Args, "cluster", "namespace", "n")
	if err != nil {
		return Reply{}, err
	}
	if len(f.positional) != 1 {
		return Reply{}, userErrorf("name one pod, e.g. /why-pending shop/web-7f9c")
	}
	c, err := b.cluster(f.values["cluster"])
	if err != nil {
		return Reply{}, err
	}
	ns, name, hasNS := strings.Cut(f.positional[0], "/")
	if !hasNS {
		ns, name = "", f.positional[0]
	}
	if ns == "" {
		ns = firstNonEmpty(f.values["namespace"], f.values["n"], c.Namespace, "default")
	}
	if err := triage.CheckPodRef(ns, name); err != nil {
		return Reply{}, userErrorf("%v", err)
	}
	if c.Diagnoser == nil {
		return Reply{}, userErrorf("cluster %s cannot diagnose pods (not configured)", c.Name)
	}
	// Concurrent questions about the same pod (an incident channel) share one diagnosis; it
	// must not die with the first asker's context, so it gets its own deadline.
	v, err, _ := b.inflight.Do(c.Name+"/"+ns+"/"+name, func() (any, error) {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout)
		defer cancel()
		return c.Diagnoser.Diagnose(dctx, ns, name)
	})
	if err != nil {
		return Reply{}, err
	}
	d := v.(*triage.Diagnosis)
	m := DiagnosisMessage(d)
	for i := range m.Buttons {
		if strings.HasPrefix(m.Buttons[i].ActionID, ActionPlanPrefix) {
			m.Buttons[i].Value += ";cluster=" + c.Name
		}
	}
	m.Footer = joinFooter(m.Footer, "cluster "+c.Name)
	return Reply{Message: m, Public: true}, nil
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func joinFooter(a, b string) string {
	if a == "" {
		return b
	}
	return a + " · " + b
}
