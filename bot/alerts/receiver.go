package alerts

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/whypending/whypending/chat"
	"github.com/whypending/whypending/ledger"
	"github.com/whypending/whypending/ledger/thread"
	"github.com/whypending/whypending/triage"
)

// Source is the ledger source of alert threads.
const Source = "alert"

// Path is where Alertmanager posts.
const Path = "/alertmanager"

// DefaultMaxBody is the largest body accepted (Alertmanager's max_alerts bounds it; an
// unbounded group of a few thousand alerts is far below this).
const DefaultMaxBody = 4 << 20

// Channel is one chat channel a receiver's groups are posted to.
type Channel struct {
	// Platform is "slack" or "discord".
	Platform string
	// ID is the platform's channel ID.
	ID string
}

// Diagnoser is the answer /why-pending gives for target t on cluster ("" is the default).
type Diagnoser func(ctx context.Context, cluster string, t triage.Target) (chat.Message, error)

// Options configures a Receiver.
type Options struct {
	// Token is the bearer token Alertmanager sends (http_config.authorization).
	Token string
	// Receivers maps an Alertmanager receiver name to the channels its groups go to.
	Receivers map[string][]Channel
	// ClusterLabel is the label naming the configured cluster of an alert ("" : the default
	// cluster for every alert).
	ClusterLabel string
	// ChannelNamespaces is channels.namespaces: a channel with an entry is answered only
	// for alerts of that namespace.
	ChannelNamespaces map[string]string
	// Store is the ledger; Platforms the connected chat platforms.
	Store     *ledger.Store
	Platforms thread.Platforms
	// AckStore, when set, is the same ledger through a client of its own
	// (fleet.Cluster.AckLedger): deliveries are recorded through it, so an acknowledgement
	// never waits behind the posting's requests on Store's client-side rate limit.
	AckStore *ledger.Store
	// Diagnose answers an alert's object.
	Diagnose Diagnoser
	// WaitCluster, when set, waits (bounded) until the named cluster ("" : the default) can be
	// asked, or is known not to answer (serve: until its first attempt to connect has ended,
	// at most fleet.Timing.FirstAttempts after start), so that a thread delivered while the
	// bot starts does not answer "still connecting" for a cluster about to connect. A thread
	// waits only for the clusters of the diagnoses it still has to post, before claiming any
	// message; it holds one of the worker's 4 places while it waits.
	WaitCluster func(ctx context.Context, cluster string)
	// RemindEvery is the least time between two "still firing" replies (0: no reminders).
	RemindEvery time.Duration
	// SeenEvery is the least time between two edits of the root that only move its "last
	// seen" (0: one minute), so a redelivery edits nothing.
	SeenEvery time.Duration
	// MaxBody is the largest body accepted (0: DefaultMaxBody).
	MaxBody int64
	// Silences, when set, puts Silence buttons on firing groups' roots (Receiver.Silence).
	Silences *Silences
	// SilenceCheck is how often silences made from chat are compared with Alertmanager's
	// (0: DefaultSilenceCheck).
	SilenceCheck time.Duration
	// Resync is how often pending threads are looked for (0: the ledger worker's default).
	Resync  time.Duration
	Metrics *Metrics
	Log     *slog.Logger
	Now     func() time.Time
}

// Receiver is the Alertmanager webhook receiver and the worker that keeps its threads.
type Receiver struct {
	o      Options
	worker *ledger.Worker
	recent recent
	// refusedLog bounds the log lines of refused deliveries (a misconfigured Alertmanager
	// retries for hours): a burst of 5, then one a minute; the metric counts every one.
	refusedLog *rate.Limiter
}

// New returns a Receiver; Run must run for the threads to be posted.
func New(o Options) *Receiver {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(prometheus.NewRegistry())
	}
	if o.SeenEvery <= 0 {
		o.SeenEvery = time.Minute
	}
	if o.SilenceCheck <= 0 {
		o.SilenceCheck = DefaultSilenceCheck
	}
	if o.AckStore == nil {
		o.AckStore = o.Store
	}
	r := &Receiver{o: o, refusedLog: rate.NewLimiter(rate.Every(time.Minute), 5)}
	r.worker = &ledger.Worker{Store: o.Store, Source: Source, Reconcile: r.reconcile, Resync: o.Resync, Workers: 4, Log: o.Log}
	return r
}

// Run posts and edits the threads until ctx ends, finishing what any replica left pending.
// With Silences set it also ends, every SilenceCheck, the silences that ended in
// Alertmanager (checkSilences).
func (r *Receiver) Run(ctx context.Context) {
	r.o.AckStore.Follow(ctx, Source, GroupSource)
	if r.o.Silences != nil {
		go func() {
			t := time.NewTicker(r.o.SilenceCheck)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					r.checkSilences(ctx)
				}
			}
		}()
	}
	r.worker.Run(ctx)
}

// ServeHTTP takes one webhook delivery. It answers 200 once the ledger entry of every
// channel is written, 4xx (counted, with the reason in the body) for a delivery a retry
// cannot make acceptable, and 503 when the ledger write failed (Alertmanager retries).
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	refuse := func(code int, reason, format string, args ...any) {
		r.o.Metrics.refused(reason)
		msg := fmt.Sprintf(format, args...)
		if r.refusedLog.Allow() {
			// The reason and the answer only: never the body or the Authorization header.
			r.o.Log.Warn("alertmanager: webhook delivery refused", "status", code, "reason", reason, "answer", chat.Cut(msg, 200),
				"remote", req.RemoteAddr, "user_agent", req.UserAgent())
		}
		http.Error(w, msg, code)
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, "method", "POST the Alertmanager webhook body")
		return
	}
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if !ok || r.o.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(r.o.Token)) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="whypending"`)
		refuse(http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token (set http_config.authorization.credentials to alertmanager.token)")
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, r.o.MaxBody+1))
	if err != nil {
		refuse(http.StatusBadRequest, "read", "read the body: %v", err)
		return
	}
	if int64(len(body)) > r.o.MaxBody {
		refuse(http.StatusRequestEntityTooLarge, "too_large", "body over %d bytes; lower max_alerts in webhook_configs", r.o.MaxBody)
		return
	}
	var hook Webhook
	if err := json.Unmarshal(body, &hook); err != nil {
		refuse(http.StatusBadRequest, "malformed", "not an Alertmanager webhook body: %v", err)
		return
	}
	switch {
	case hook.Version != "4":
		refuse(http.StatusBadRequest, "version", "webhook payload version %q is not supported (want \"4\")", hook.Version)
		return
	case hook.GroupKey == "" || (hook.Status != "firing" && hook.Status != "resolved"):
		refuse(http.StatusBadRequest, "malformed", "groupKey and status (firing or resolved) are required")
		return
	}
	if len(hook.Alerts) == 0 {
		// Nothing to show: no root for an empty group (it would say it fired since year 1).
		w.WriteHeader(http.StatusOK)
		return
	}
	channels, ok := r.o.Receivers[hook.Receiver]
	if !ok {
		refuse(http.StatusNotFound, "receiver", "receiver %q has no channels in whypending's alertmanager.receivers", hook.Receiver)
		return
	}
	r.o.Metrics.received(&hook, r.o.ClusterLabel)
	ctx := req.Context()
	digest := sha256.Sum256(body)
	for _, ch := range channels {
		k := ledger.Key{Source: Source, Platform: ch.Platform, Channel: ch.ID, Subject: hook.GroupKey}
		if r.recent.seen(k, digest, r.o.Now(), r.o.SeenEvery) {
			// Alertmanager's retry of a body this replica recorded moments ago: the entry
			// already holds all of it, so the ack needs no read of the API server.
			r.o.Metrics.Deduplicated.Inc()
			continue
		}
		if seesNone(&hook, r.o.ChannelNamespaces[ch.ID]) && !r.hasThread(ctx, k) {
			// Nothing the channel may see, and no thread to keep up to date: no root that
			// would show nothing (and offer a silence of what the channel cannot see).
			r.o.Metrics.NotShown.Inc()
			r.o.Log.Debug("alertmanager: no alert of the group is for the channel's namespace; no thread", "groupKey", hook.GroupKey, "channel", ch.ID)
			continue
		}
		e, news, err := r.record(ctx, k, ch, &hook)
		if err != nil && tooLarge(err) {
			// A retry would be refused the same: answer 4xx so Alertmanager does not retry.
			r.o.Log.Error("alertmanager: the group's entry is over the datastore's request size; not recorded", "groupKey", hook.GroupKey, "channel", ch.ID, "bytes", len(body), "err", err)
			refuse(http.StatusRequestEntityTooLarge, "entry_too_large", "the group's ledger entry is over the datastore's request size; lower max_alerts in webhook_configs")
			return
		}
		if err != nil {
			r.o.Log.Error("alertmanager: ledger write failed; Alertmanager will retry", "groupKey", hook.GroupKey, "channel", ch.ID, "err", err)
			http.Error(w, "could not record the notification; retry", http.StatusServiceUnavailable)
			return
		}
		if e.Pending {
			r.worker.Offer(e)
		}
		if !news {
			r.o.Metrics.Deduplicated.Inc()
		}
		r.recent.add(k, digest, r.o.Now(), r.o.SeenEvery)
	}
	w.WriteHeader(http.StatusOK)
}

// hasThread says the channel has an entry for the group already (also when that cannot be
// read: the record that follows then says why).
func (r *Receiver) hasThread(ctx context.Context, k ledger.Key) bool {
	_, err := r.o.AckStore.GetCached(ctx, k.Name())
	return !errors.Is(err, ledger.ErrNotFound)
}

// record merges hook into the entry of its group in channel ch. news is false when the
// delivery brought nothing to post (a redelivery, a repeat_interval re-send).
func (r *Receiver) record(ctx context.Context, k ledger.Key, ch Channel, hook *Webhook) (*ledger.Entry, bool, error) {
	var news bool
	// merge is monotone (an entry that holds a delivery holds it in every later version),
	// so the followed copy of the entry may decide that a retry brings nothing new.
	e, err := r.o.AckStore.UpdateCached(ctx, k, func(e *ledger.Entry) error {
		news = false
		var g group
		if err := e.DataInto(&g); err != nil {
			return err
		}
		first := len(g.Alerts) == 0 && g.Untracked == 0
		changed, n := g.merge(hook, r.o.Now().UTC(), r.o.ClusterLabel, r.o.ChannelNamespaces[ch.ID], r.o.SeenEvery, r.o.RemindEvery)
		news = n || first
		if !changed {
			// A redelivery or a re-send within SeenEvery: the entry already says all of it.
			return ledger.ErrUnchanged
		}
		posted := map[string]bool{}
		for k := range e.Messages {
			posted[k] = true
		}
		g.prune(posted, func(key string) { delete(e.Messages, key) })
		e.Revision++
		e.Pending = true
		e.State, e.Summary = g.Status, rootMessage(&g, "", r.o.Now()).Title
		return e.SetData(&g)
	})
	return e, news, err
}

// tooLarge says the datastore refused a write for its size (etcd's request size, the
// apiserver's 413): not retryable.
func tooLarge(err error) bool {
	msg := err.Error()
	return apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(msg, "request is too large") ||
		strings.Contains(msg, "ResourceExhausted") || strings.Contains(msg, "trying to send message larger than max")
}

// reconcile posts and edits what the entry's thread still lacks.
func (r *Receiver) reconcile(ctx context.Context, e *ledger.Entry) error {
	if r.o.WaitCluster != nil {
		for _, cluster := range unposted(e) {
			r.o.WaitCluster(ctx, cluster)
		}
	}
	cur, err := thread.Deliver(ctx, r.o.Store, r.o.Platforms, e, r.render)
	if err != nil || !cur.Pending {
		return err // an error, or done: the last record cleared the mark
	}
	// From the entry Deliver last wrote: one request when nobody wrote in between.
	_, err = r.o.Store.UpdateFrom(ctx, cur, func(e *ledger.Entry) error {
		switch {
		case !e.Pending:
			return ledger.ErrUnchanged
		case !thread.Done(e, r.render(e)):
			return fmt.Errorf("notification %s: not done yet", e.Name())
		}
		e.Pending = false
		return nil
	})
	return err
}

// unposted are the clusters (each once, "" for the default) named by the alerts of the
// diagnosis replies of e not posted yet.
func unposted(e *ledger.Entry) []string {
	var g group
	if e.DataInto(&g) != nil {
		return nil // render logs it
	}
	var out []string
	for _, rp := range g.Replies {
		if _, posted := e.Messages[rp.Key]; posted || rp.Alert == "" {
			continue
		}
		if a := g.alert(rp.Alert); a != nil && a.Object != nil && !slices.Contains(out, a.Object.Cluster) {
			out = append(out, a.Object.Cluster)
		}
	}
	return out
}

// render is what the thread of e shows.
func (r *Receiver) render(e *ledger.Entry) thread.Thread {
	var g group
	if err := e.DataInto(&g); err != nil {
		r.o.Log.Error("alertmanager: unreadable notification", "name", e.Name(), "err", err)
	}
	th := thread.Thread{Root: thread.Message{Key: ledger.RootKey, Render: func(ctx context.Context) (chat.Message, error) {
		if r.o.Silences != nil {
			// The silence is the group's, from any channel: read from its entry at each render.
			sl, err := r.groupSilence(ctx, g.Receiver, e.Subject)
			if err != nil {
				return chat.Message{}, err
			}
			g.Silence = sl
		}
		m := rootMessage(&g, e.Name(), r.o.Now())
		if r.o.Silences != nil {
			m.Buttons = silenceButtons(&g, e.Name(), r.o.ChannelNamespaces[e.Channel], r.o.Now())
		}
		return m, nil
	}}}
	for _, rp := range g.Replies {
		rp := rp
		th.Replies = append(th.Replies, thread.Message{Key: rp.Key, Render: func(ctx context.Context) (chat.Message, error) {
			r.o.Metrics.Posted.Inc()
			if rp.Alert == "" {
				return changeMessage(rp.Text), nil
			}
			m := r.diagnose(ctx, g.alert(rp.Alert))
			switch {
			case rp.Joined:
				m.Title = "Joined · " + m.Title
			case rp.Again:
				m.Title = "The group fires again · " + m.Title
			}
			return m, nil
		}})
	}
	return th
}

// diagnose is the reply about one alert: the /why-pending answer for its object, or why
// there is none.
func (r *Receiver) diagnose(ctx context.Context, a *alertState) chat.Message {
	if a == nil || a.Object == nil {
		return chat.Message{Title: "Not diagnosed", Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "The alert's labels name no Kubernetes object."}}}
	}
	t, err := triage.ParseTarget(a.Object.Arg(), a.Object.Namespace, false)
	if err == nil {
		t.NamespaceGiven = true
		var m chat.Message
		if m, err = r.o.Diagnose(ctx, a.Object.Cluster, t); err == nil {
			return diagnosisTitle(a, m)
		}
	}
	var ue *chat.UserError
	text := "The diagnosis failed: " + err.Error()
	if errors.As(err, &ue) {
		text = ue.Error()
	}
	return chat.Message{Title: a.Labels["alertname"] + " · " + a.Object.String() + ": no diagnosis", Severity: chat.SeverityWarning,
		Sections: []chat.Section{{Text: text}}}
}

// Metrics are the receiver's counters.
type Metrics struct {
	Received     prometheus.Counter
	Mapped       prometheus.Counter
	Unmapped     prometheus.Counter
	Posted       prometheus.Counter
	Deduplicated prometheus.Counter
	Silences     prometheus.Counter
	NotShown     prometheus.Counter
	Refused      *prometheus.CounterVec
}

// NewMetrics registers the receiver's metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	c := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: "whypending_alerts_" + name + "_total", Help: help})
		reg.MustRegister(x)
		return x
	}
	m := &Metrics{
		Received:     c("received", "Alerts received from Alertmanager (each alert of each accepted delivery)."),
		Mapped:       c("mapped", "Received alerts whose labels name a Kubernetes object."),
		Unmapped:     c("unmapped", "Received alerts whose labels name no Kubernetes object (shown, not diagnosed)."),
		Posted:       c("posted", "Thread replies rendered for posting (diagnoses and change lines)."),
		Deduplicated: c("deduplicated", "Deliveries (per channel) that brought nothing new: redeliveries, repeat_interval re-sends."),
		NotShown:     c("not_shown", "Deliveries (per channel) of a group none of whose alerts the channel answers for (channels.namespaces): no thread is started."),
		Silences:     prometheus.NewCounter(prometheus.CounterOpts{Name: "whypending_silences_made_total", Help: "Alertmanager silences made from chat."}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "whypending_alerts_refused_total",
			Help: "Webhook deliveries refused, by reason (unauthorized, malformed, version, too_large, entry_too_large, receiver, method, read)."}, []string{"reason"}),
	}
	reg.MustRegister(m.Refused, m.Silences)
	return m
}

func (m *Metrics) refused(reason string) {
	if m != nil {
		m.Refused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) received(h *Webhook, clusterLabel string) {
	if m == nil {
		return
	}
	for _, a := range h.Alerts {
		m.Received.Inc()
		if _, ok := ObjectOf(a.Labels, clusterLabel); ok {
			m.Mapped.Inc()
		} else {
			m.Unmapped.Inc()
		}
	}
}

// recent remembers, per ledger entry, the digest of the last body this replica recorded in
// it and when, so that Alertmanager's retries of that body within window (SeenEvery) are
// acknowledged without reading the entry again. It is only a shortcut: the entry in the
// cluster stays the state, and a body it has not seen, another replica's delivery or a
// restart take the ledger path. Skipping a body the entry already merged is the same as it
// arriving before whatever changed the entry since.
type recent struct {
	mu sync.Mutex
	m  map[ledger.Key]delivery
}

type delivery struct {
	digest [sha256.Size]byte
	at     time.Time
}

func (r *recent) seen(k ledger.Key, digest [sha256.Size]byte, now time.Time, window time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.m[k]
	return ok && d.digest == digest && now.Sub(d.at) < window && !now.Before(d.at)
}

// add records a body the ledger path just took (its merge brought the entry's "last seen" up
// to now); entries older than window are dropped once the map has grown.
func (r *recent) add(k ledger.Key, digest [sha256.Size]byte, now time.Time, window time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[ledger.Key]delivery{}
	}
	if len(r.m) >= 1024 {
		for k, d := range r.m {
			if now.Sub(d.at) >= window {
				delete(r.m, k)
			}
		}
		if len(r.m) >= 4096 {
			clear(r.m) // a storm of groups: the shortcut is not worth the memory
		}
	}
	r.m[k] = delivery{digest: digest, at: now}
}
