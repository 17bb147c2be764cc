package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/triage"
)

// elsewhereTimeout bounds asking one other cluster whether it has a namespace.
const elsewhereTimeout = 20 * time.Second

// withNamespaceNotes returns a namespace-not-found answer a (from cluster c, about t) with
// notes for the person who asked: that the namespace is the channel's (channels.namespaces in
// the bot's config), and which other configured clusters have it. a itself is shared with
// concurrent askers and stays unchanged. Under per-user authorization (mode all) only the
// clusters where who may get pods in the namespace are asked about.
func (b *Bot) withNamespaceNotes(ctx context.Context, who chat.Principal, c *Cluster, channel string, t triage.Target, a *triage.Answer) *triage.Answer {
	var notes []string
	if !t.NamespaceGiven && b.channelNS[channel] == t.Namespace {
		notes = append(notes, fmt.Sprintf("This channel asks about namespace %s (channels.namespaces in the bot's config), which cluster %s does not have.", t.Namespace, c.Name))
	}
	var have []string // "staging (3 stuck pods)"
	var first string  // the first cluster that has it
	var others []string
	for _, o := range b.clusters {
		if o == c || o.Answerer == nil || o.health() != nil || !b.authz.Visible(ctx, who, o.Name, t.Namespace) {
			continue
		}
		others = append(others, o.Name)
		octx, cancel := context.WithTimeout(ctx, elsewhereTimeout)
		oa, err := o.Answerer.Answer(octx, triage.Target{All: true, Namespace: t.Namespace})
		cancel()
		if err != nil || oa.Namespace == nil || oa.Namespace.NotFound {
			continue
		}
		have = append(have, fmt.Sprintf("%s (%d stuck %s)", o.Name, oa.Namespace.Stuck, plural(oa.Namespace.Stuck, "pod", "pods")))
		if first == "" {
			first = o.Name
		}
	}
	switch {
	case len(have) > 0:
		notes = append(notes, fmt.Sprintf("Namespace %s exists on cluster %s, not on %s: ask with --cluster %s.",
			t.Namespace, strings.Join(have, ", "), c.Name, first))
	case len(others) > 0:
		notes = append(notes, fmt.Sprintf("No other configured cluster (%s) has namespace %s either.", strings.Join(others, ", "), t.Namespace))
	}
	if len(notes) == 0 {
		return a
	}
	out := *a
	out.Notes = append(notes, a.Notes...)
	return &out
}
