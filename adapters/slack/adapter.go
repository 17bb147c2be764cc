package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/slack-go/slack"

	"github.com/whypending/whypending/chat"
)

// Options configures New.
type Options struct {
	// Core answers commands and clicks (required).
	Core chat.Core
	// API is the Web API client built with the bot token (chat.postMessage, chat.update).
	API *slack.Client
	// SigningSecret verifies HTTP requests (HTTP mode; unused in Socket Mode).
	SigningSecret string
	// HTTPClient posts to response_url (default: 10 s timeout).
	HTTPClient *http.Client
	// Workers is how many commands and clicks are worked on at once (default 8).
	Workers int
	// QueueSize is how many acknowledged requests may wait for a worker (default 1024);
	// beyond it requests are acknowledged with a "busy" reply and dropped.
	QueueSize int
	// JobTimeout bounds one command or click, including execution of an approved plan
	// (default 10 min).
	JobTimeout time.Duration
	// Metrics may be nil.
	Metrics *chat.Metrics
	// Log is the operational log (nil: slog.Default()). Tokens and secrets are never logged.
	Log *slog.Logger
	// TokenRefused (nil: nobody) is told when Slack answers a Web API call the adapter makes
	// (chat.postMessage, chat.update, conversations.history/replies) with one of its token
	// errors (invalid_auth, token_revoked, account_inactive …): the bot token no longer
	// works. It is called on the goroutine that made the call, which also returns the error.
	TokenRefused func(*TokenRefusedError)
}

// Adapter connects the bot (a chat.Core) to Slack. Requests are acknowledged at once and answered by a
// bounded pool of workers started by Run.
type Adapter struct {
	core       chat.Core
	api        *slack.Client
	secret     string
	httpClient *http.Client
	queue      *chat.Queue
	deliver    chat.Deliverer
	metrics    *chat.Metrics
	log        *slog.Logger
	refused    func(*TokenRefusedError)
}

// job is one acknowledged request waiting for a worker.
type job struct {
	command *commandJob
	click   *clickJob
}

// commandJob is a slash command to answer.
type commandJob struct {
	req         chat.Request
	responseURL string
}

// clickJob is a button click to handle.
type clickJob struct {
	click       chat.Click
	responseURL string
	// channelID and messageTS locate the clicked message for chat.update; empty for
	// ephemeral messages (only response_url can replace those).
	channelID, messageTS string
}

// New returns an Adapter; call Run to start its workers.
func New(o Options) *Adapter {
	a := &Adapter{
		core: o.Core, api: o.API, secret: o.SigningSecret, httpClient: o.HTTPClient,
		queue:   chat.NewQueue(chat.QueueOptions{Workers: o.Workers, Size: o.QueueSize, JobTimeout: o.JobTimeout}),
		metrics: o.Metrics, log: o.Log, refused: o.TokenRefused,
	}
	if a.httpClient == nil {
		a.httpClient = &http.Client{Timeout: 10 * time.Second}
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.deliver = chat.Deliverer{Platform: "slack", RetryAfter: retryAfter, Metrics: a.metrics, Log: a.log}
	return a
}

// Run works on acknowledged requests until ctx is done, then waits for jobs in progress.
func (a *Adapter) Run(ctx context.Context) error { return a.queue.Run(ctx) }

// reserve takes a place in the work queue; false means the queue is full.
func (a *Adapter) reserve() bool { return a.queue.Reserve() }

// submit hands j to the workers in the place reserve took; it never blocks.
func (a *Adapter) submit(j job) { a.queue.Submit(func(ctx context.Context) { a.work(ctx, j) }) }

// enqueue reserves a place and submits j; false means the queue is full.
func (a *Adapter) enqueue(j job) bool {
	if !a.reserve() {
		return false
	}
	a.submit(j)
	return true
}

func (a *Adapter) work(ctx context.Context, j job) {
	switch {
	case j.command != nil:
		a.answerCommand(ctx, j.command)
	case j.click != nil:
		a.handleClick(ctx, j.click)
	}
}

// answerCommand runs a command and delivers the reply: plans are posted to the channel with
// chat.postMessage (so they can be updated with chat.update) and attached to their record;
// everything else goes to response_url.
func (a *Adapter) answerCommand(ctx context.Context, cj *commandJob) {
	reply := a.core.Command(ctx, cj.req)
	if reply.PlanID != "" {
		a.postPlan(ctx, cj.req.Channel, cj.responseURL, reply)
		return
	}
	a.respond(ctx, cj.responseURL, reply.Message, reply.Public, false)
}

// handleClick runs a click and shows its outcome.
func (a *Adapter) handleClick(ctx context.Context, cj *clickJob) {
	progress := func(ctx context.Context, m chat.Message) { a.updateClicked(ctx, cj, m) }
	out := a.core.Click(ctx, cj.click, progress)
	if out.Update != nil {
		a.updateClicked(ctx, cj, *out.Update)
	}
	if out.Notice != "" {
		// A section, not a header: notices can be longer than a header's 150 characters.
		a.respond(ctx, cj.responseURL, chat.Message{Sections: []chat.Section{{Text: out.Notice}}}, false, false)
	}
	switch {
	case out.Post != nil && out.InThread:
		a.postInThread(ctx, cj, out.Post.Message)
	case out.Post != nil:
		a.postPlan(ctx, cj.click.Channel, cj.responseURL, *out.Post)
	}
}

// postInThread posts m as a reply in the thread of the clicked message (chat.Outcome
// .InThread), marked like the thread messages the bot posts (Threads.Post) with a mark of its
// own; if that fails, the clicker alone gets m through response_url.
func (a *Adapter) postInThread(ctx context.Context, cj *clickJob, m chat.Message) {
	if cj.channelID != "" && cj.messageTS != "" {
		mark := fmt.Sprintf("%s/%s/%d", cj.click.ActionID, cj.messageTS, time.Now().UnixNano())
		_, err := a.Threads().Post(ctx, cj.channelID, cj.messageTS, mark, m)
		if err == nil {
			return
		}
		a.log.WarnContext(ctx, "post in the clicked message's thread; showing it to the clicker", slog.Any("err", err))
	}
	a.respond(ctx, cj.responseURL, m, false, false)
}

// postPlan posts a plan message to the channel and attaches its reference; if the bot cannot
// post there (not in the channel), it falls back to an in-channel response_url reply, which
// clicks can still replace.
func (a *Adapter) postPlan(ctx context.Context, channel, responseURL string, reply chat.Reply) {
	ref, err := a.post(ctx, channel, reply.Message)
	if err != nil {
		a.log.WarnContext(ctx, "post plan message; falling back to response_url",
			slog.String("plan", reply.PlanID), slog.String("channel", channel), slog.Any("err", err))
		a.respond(ctx, responseURL, reply.Message, true, false)
		return
	}
	if err := a.core.Attach(ctx, reply.PlanID, ref); err != nil {
		a.log.WarnContext(ctx, "attach plan message", slog.String("plan", reply.PlanID), slog.Any("err", err))
	}
}

// updateClicked replaces the clicked message: chat.update when it is a channel message,
// else (or if that fails) response_url with replace_original.
func (a *Adapter) updateClicked(ctx context.Context, cj *clickJob, m chat.Message) {
	if cj.channelID != "" && cj.messageTS != "" {
		if err := a.update(ctx, cj.channelID, cj.messageTS, m); err == nil {
			return
		} else {
			a.log.WarnContext(ctx, "chat.update failed; replacing through response_url", slog.Any("err", err))
		}
	}
	a.respond(ctx, cj.responseURL, m, true, true)
}

// UpdateMessage replaces a message the adapter posted, given the reference it attached
// ("slack:<channel>/<ts>"). The plan sweeper (expired and interrupted plans) uses it.
func (a *Adapter) UpdateMessage(ctx context.Context, ref string, m chat.Message) error {
	channel, ts, ok := parseRef(ref)
	if !ok {
		return errBadRef
	}
	return a.update(ctx, channel, ts, m)
}
