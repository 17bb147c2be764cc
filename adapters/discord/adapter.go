package discord

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/chat"
)

// Platform is the chat.Principal platform name of Discord users.
const Platform = "discord"

// Options configures New.
type Options struct {
	// Core answers commands and clicks (required).
	Core chat.Core
	// Session is the REST client, built with NewSession from the bot token. HTTP mode never
	// opens it; gateway mode (RunGateway) does.
	Session *discordgo.Session
	// ApplicationID is the application's ID (commands are registered under it).
	ApplicationID string
	// PublicKey verifies interactions in HTTP mode (the application's Public Key).
	PublicKey ed25519.PublicKey
	// Guilds are the guild IDs Register puts the commands in; empty registers them globally.
	Guilds []string
	// Clusters are the configured cluster names, offered as the cluster option's choices.
	Clusters []string
	// Workers, QueueSize and JobTimeout size the worker pool (chat.QueueOptions).
	Workers, QueueSize int
	JobTimeout         time.Duration
	// Metrics may be nil.
	Metrics *chat.Metrics
	// Log is the operational log (nil: slog.Default()). Tokens are never logged.
	Log *slog.Logger
	// Now is the clock for the signature timestamp window (nil: time.Now).
	Now func() time.Time
}

// Adapter connects the bot (a chat.Core) to Discord. Interactions are acknowledged at once (a deferred
// response) and answered by a bounded pool of workers started by Run, which edit the
// deferred response.
type Adapter struct {
	core     chat.Core
	session  *discordgo.Session
	appID    string
	key      ed25519.PublicKey
	guilds   []string
	clusters []string
	queue    *chat.Queue
	deliver  chat.Deliverer
	metrics  *chat.Metrics
	log      *slog.Logger
	now      func() time.Time
}

// New returns an Adapter; call Run to start its workers.
func New(o Options) *Adapter {
	a := &Adapter{
		core: o.Core, session: o.Session, appID: o.ApplicationID, key: o.PublicKey, guilds: o.Guilds,
		clusters: o.Clusters, metrics: o.Metrics, log: o.Log, now: o.Now,
		queue: chat.NewQueue(chat.QueueOptions{Workers: o.Workers, Size: o.QueueSize, JobTimeout: o.JobTimeout}),
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.deliver = chat.Deliverer{Platform: Platform, RetryAfter: retryAfter, Metrics: a.metrics, Log: a.log}
	return a
}

// Run works on acknowledged interactions until ctx is done, then waits for jobs in progress.
func (a *Adapter) Run(ctx context.Context) error { return a.queue.Run(ctx) }

// busyText is the reply when the work queue is full.
const busyText = "whypending is busy right now; nothing was done. Please try again in a minute."

// dmRefusal answers a repair button or a repair command outside a server.
const dmRefusal = "Repairs are planned and approved in a server channel, where Discord tells the bot your roles; in a direct message nothing was done."

// dmDecision is why an Approve or Deny in a direct message is refused (and recorded).
const dmDecision = "Plans are approved or denied in a server channel, where Discord tells the bot your roles, not in a direct message."

// dispatch decides the initial response to an interaction (within Discord's 3 seconds) and
// the work to do once it is sent: nil work means the response is all. kind labels the ack
// metric. Work returned has its queue place reserved; the caller submits it after responding.
func (a *Adapter) dispatch(i *discordgo.Interaction) (resp *discordgo.InteractionResponse, work func(context.Context), kind string) {
	switch i.Type {
	case discordgo.InteractionPing:
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponsePong}, nil, "ping"
	case discordgo.InteractionApplicationCommand:
		return a.dispatchCommand(i)
	case discordgo.InteractionMessageComponent:
		return a.dispatchClick(i)
	case discordgo.InteractionApplicationCommandAutocomplete:
		return &discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult,
			Data: &discordgo.InteractionResponseData{Choices: []*discordgo.ApplicationCommandOptionChoice{}}}, nil, "autocomplete"
	}
	return message(textPage("whypending does not handle this kind of interaction; nothing was done."), true), nil, "other"
}

// admitTimeout bounds the authorization checks a command waits for before it is
// acknowledged, well inside Discord's 3 seconds.
const admitTimeout = 1500 * time.Millisecond

// dispatchCommand defers a slash command (ephemeral for help) and queues its answer. A
// command the bot refuses to this person (per-user authorization, chat.Admitter) is answered
// at once, ephemeral: a deferred response's visibility cannot change afterwards.
func (a *Adapter) dispatchCommand(i *discordgo.Interaction) (*discordgo.InteractionResponse, func(context.Context), string) {
	req, ephemeral, plans := requestFor(i)
	if plans && i.Member == nil {
		return message(textPage(dmRefusal), true), nil, "command"
	}
	if ad, ok := a.core.(chat.Admitter); ok {
		ctx, cancel := context.WithTimeout(context.Background(), admitTimeout)
		refusal := ad.Admit(ctx, req)
		cancel()
		if refusal != nil {
			return message(RenderOne(refusal.Message), true), nil, "command"
		}
	}
	if !a.queue.Reserve() {
		return message(textPage(busyText), true), nil, "command"
	}
	data := &discordgo.InteractionResponseData{AllowedMentions: noMentions()}
	if ephemeral {
		data.Flags = discordgo.MessageFlagsEphemeral
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource, Data: data}
	return resp, func(ctx context.Context) { a.answerCommand(ctx, i, req, ephemeral) }, "command"
}

// dispatchClick answers a button: a confirmation is shown at once, a cancel closes it,
// anything else is deferred (the clicked message is updated later) and queued.
func (a *Adapter) dispatchClick(i *discordgo.Interaction) (*discordgo.InteractionResponse, func(context.Context), string) {
	id := i.MessageComponentData().CustomID
	if id == cancelID {
		p := textPage("Cancelled; nothing was changed.")
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseUpdateMessage, Data: &discordgo.InteractionResponseData{
			Embeds: []*discordgo.MessageEmbed{p.Embed}, Components: []discordgo.MessageComponent{}, AllowedMentions: noMentions()}}, nil, "interaction"
	}
	c, ok := decodeCustomID(id)
	if !ok {
		return message(textPage("This button is not one of whypending's; nothing was done."), true), nil, "interaction"
	}
	decision := c.action == chat.ActionApprove || c.action == chat.ActionDeny
	if i.Member == nil && !decision && strings.HasPrefix(c.action, chat.ActionPlanPrefix) {
		return message(textPage(dmRefusal), true), nil, "interaction"
	}
	click := chat.Click{Principal: principalOf(i), Channel: i.ChannelID, ActionID: c.action, Value: c.value}
	if i.Member == nil && decision {
		// Refused without asking first; the bot records the refusal in the plan's history.
		click.Refusal, c.ask, c.confirmed = dmDecision, false, false
	}
	if c.ask {
		label, about, messageID := clickedButton(i, id)
		return message(confirmPage(c, label, about, messageID), true), nil, "interaction"
	}
	if !a.queue.Reserve() {
		return message(textPage(busyText), true), nil, "interaction"
	}
	resp := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredMessageUpdate}
	return resp, func(ctx context.Context) { a.handleClick(ctx, i, click, c) }, "interaction"
}

// clickedButton finds the label of the button id on the clicked message, the message's title
// (what the confirmation is about) and the message's ID.
func clickedButton(i *discordgo.Interaction, id string) (label, about, messageID string) {
	if i.Message == nil {
		return "Go ahead", "", ""
	}
	label = "Go ahead"
	for _, row := range i.Message.Components {
		r, ok := row.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, c := range r.Components {
			if b, ok := c.(*discordgo.Button); ok && b.CustomID == id {
				label = b.Label
			}
		}
	}
	if len(i.Message.Embeds) > 0 {
		about = i.Message.Embeds[0].Title
	}
	return label, about, i.Message.ID
}

// message is an immediate message response; ephemeral ones only the clicker sees.
func message(p Page, ephemeral bool) *discordgo.InteractionResponse {
	data := &discordgo.InteractionResponseData{
		Embeds: []*discordgo.MessageEmbed{p.Embed}, Components: p.Components, AllowedMentions: noMentions(),
	}
	if data.Components == nil {
		data.Components = []discordgo.MessageComponent{}
	}
	if ephemeral {
		data.Flags = discordgo.MessageFlagsEphemeral
	}
	return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: data}
}

// principalOf is who sent the interaction: a guild member with their roles, or in a DM the
// user alone (no guild, no roles).
func principalOf(i *discordgo.Interaction) chat.Principal {
	if i.Member != nil && i.Member.User != nil {
		name := i.Member.Nick
		if name == "" {
			name = i.Member.User.DisplayName()
		}
		return chat.Principal{Platform: Platform, Team: i.GuildID, ID: i.Member.User.ID, Name: name, Groups: i.Member.Roles}
	}
	if i.User != nil {
		return chat.Principal{Platform: Platform, ID: i.User.ID, Name: i.User.DisplayName()}
	}
	return chat.Principal{Platform: Platform}
}

// answerCommand runs a command and edits the deferred response with the answer (pages past
// the first go in follow-ups). A plan's message is attached to its record so decisions and
// the expiry sweeper can update it.
func (a *Adapter) answerCommand(ctx context.Context, i *discordgo.Interaction, req chat.Request, ephemeral bool) {
	reply := a.core.Command(ctx, req)
	pages := Render(reply.Message)
	if !ephemeral && reply.Private {
		a.answerPrivately(ctx, i, req, pages)
		return
	}
	msg, err := a.editOriginal(ctx, i, pages[0])
	if err != nil {
		a.log.WarnContext(ctx, "deliver answer", slog.String("command", req.Command), slog.Any("err", err))
		return
	}
	var more []*discordgo.Message
	for _, p := range pages[1:] {
		m, err := a.followup(ctx, i, p, ephemeral)
		if err != nil {
			a.log.WarnContext(ctx, "deliver answer page", slog.String("command", req.Command), slog.Any("err", err))
		}
		more = append(more, m)
	}
	if reply.PlanID != "" {
		a.attach(ctx, reply.PlanID, i.ChannelID, msg, more...)
	}
}

// answerPrivately shows pages, an answer only the person may see (a refusal, a check that
// could not be made: Reply.Private), for a command whose deferred response is public (its visibility
// was fixed when it was acknowledged): the deferred response is deleted, so nothing is
// published, and the pages are ephemeral follow-ups. A check the early Admit passed can still
// refuse here (a decision's TTL ran out in between).
func (a *Adapter) answerPrivately(ctx context.Context, i *discordgo.Interaction, req chat.Request, pages []Page) {
	if err := a.deliver.Do(ctx, "delete the interaction response", func() error {
		return a.session.InteractionResponseDelete(i, discordgo.WithContext(ctx))
	}); err != nil {
		// The public "thinking" response stays; never put the private answer in it.
		a.log.WarnContext(ctx, "delete the deferred response of a private answer", slog.String("command", req.Command), slog.Any("err", err))
	}
	for _, p := range pages {
		if _, err := a.followup(ctx, i, p, true); err != nil {
			a.log.WarnContext(ctx, "deliver private answer", slog.String("command", req.Command), slog.Any("err", err))
			return
		}
	}
}

// handleClick runs a click and shows its outcome: updates replace the clicked message (for a
// confirmed click, the message the confirmation was about), notices go to the clicker only,
// a new plan is posted in the channel.
func (a *Adapter) handleClick(ctx context.Context, i *discordgo.Interaction, click chat.Click, c customID) {
	update := func(ctx context.Context, m chat.Message) {
		p := RenderOne(m)
		if c.confirmed && c.message != "" {
			err := a.editChannelMessage(ctx, i.ChannelID, c.message, p)
			if err == nil {
				return
			}
			a.log.WarnContext(ctx, "update the confirmed message; showing the outcome to the clicker", slog.Any("err", err))
		}
		if _, err := a.editOriginal(ctx, i, p); err != nil {
			a.log.WarnContext(ctx, "update the clicked message", slog.Any("err", err))
		}
	}
	out := a.core.Click(ctx, click, update)
	if out.Update != nil {
		update(ctx, *out.Update)
		a.editContinuations(ctx, out.UpdateRef, *out.Update)
	}
	switch {
	case c.confirmed && out.Notice != "":
		_, err := a.editOriginal(ctx, i, textPage(out.Notice))
		a.logErr(ctx, "show notice", err)
	case c.confirmed && out.Update != nil && c.message != "":
		_, err := a.editOriginal(ctx, i, textPage(out.Update.Title))
		a.logErr(ctx, "close confirmation", err)
	case out.Notice != "":
		_, err := a.followup(ctx, i, textPage(out.Notice), true)
		a.logErr(ctx, "show notice", err)
	}
	if out.Post != nil && out.InThread {
		a.postInThread(ctx, i, c, out.Post.Message)
		return
	}
	if out.Post != nil {
		pages := Render(out.Post.Message)
		msg, err := a.followup(ctx, i, pages[0], !out.Post.Public)
		if err != nil {
			a.logErr(ctx, "post message", err)
			return
		}
		var more []*discordgo.Message
		for _, p := range pages[1:] {
			m, err := a.followup(ctx, i, p, !out.Post.Public)
			a.logErr(ctx, "post message page", err)
			more = append(more, m)
		}
		if out.Post.PlanID != "" {
			a.attach(ctx, out.Post.PlanID, i.ChannelID, msg, more...)
		}
	}
}

// postInThread posts m in the thread started on the clicked message (chat.Outcome.InThread;
// Threads.Post starts it if the message has none yet), marked with a mark of its own; if that
// fails, the clicker alone gets m as an ephemeral follow-up.
func (a *Adapter) postInThread(ctx context.Context, i *discordgo.Interaction, c customID, m chat.Message) {
	root := c.message
	if root == "" && i.Message != nil {
		root = i.Message.ID
	}
	if root != "" {
		mark := fmt.Sprintf("%s/%s/%d", c.action, root, time.Now().UnixNano())
		_, err := a.Threads().Post(ctx, i.ChannelID, root, mark, m)
		if err == nil {
			return
		}
		a.logErr(ctx, "post in the clicked message's thread; showing it to the clicker", err)
	}
	for _, p := range Render(m) {
		if _, err := a.followup(ctx, i, p, true); err != nil {
			a.logErr(ctx, "post message page", err)
			return
		}
	}
}

// attach records where a plan was posted: msg, and the messages more that continue it (a plan
// split over several messages), so that every one of them is edited when the plan changes.
func (a *Adapter) attach(ctx context.Context, planID, channel string, msg *discordgo.Message, more ...*discordgo.Message) {
	if msg == nil || msg.ID == "" {
		a.log.WarnContext(ctx, "plan message has no ID; it cannot be updated later", slog.String("plan", planID))
		return
	}
	if msg.ChannelID != "" {
		channel = msg.ChannelID
	}
	ids := []string{msg.ID}
	for _, m := range more {
		if m != nil && m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	if err := a.core.Attach(ctx, planID, ref(channel, ids...)); err != nil {
		a.log.WarnContext(ctx, "attach plan message", slog.String("plan", planID), slog.Any("err", err))
	}
}

func (a *Adapter) logErr(ctx context.Context, what string, err error) {
	if err != nil {
		a.log.WarnContext(ctx, what, slog.Any("err", err))
	}
}

func (a *Adapter) observeAck(kind string, start time.Time) {
	if a.metrics != nil {
		a.metrics.AckSeconds.WithLabelValues(Platform, kind).Observe(time.Since(start).Seconds())
	}
}

// ref formats a message reference for approval.Record.MessageRef:
// "discord:<channel>/<message>", with ",<message>" for each message that continues it.
func ref(channel string, messages ...string) string {
	return Platform + ":" + channel + "/" + strings.Join(messages, ",")
}

// parseRef reads a reference ref made: the channel, the first message and the messages that
// continue it.
func parseRef(r string) (channel, message string, more []string, err error) {
	rest, ok := strings.CutPrefix(r, Platform+":")
	var ids string
	if ok {
		channel, ids, ok = strings.Cut(rest, "/")
	}
	parts := strings.Split(ids, ",")
	if !ok || channel == "" || parts[0] == "" {
		return "", "", nil, fmt.Errorf("%q is not a discord message reference", r)
	}
	return channel, parts[0], parts[1:], nil
}

// editContinuations edits the messages that continue a plan message (see attach) when the
// plan changes: the first message holds the whole new version (RenderOne), so each
// continuation becomes one line pointing at it, and a decided plan's second message never
// still says "Approval needed … (continued)".
func (a *Adapter) editContinuations(ctx context.Context, r string, m chat.Message) {
	if r == "" {
		return
	}
	channel, _, more, err := parseRef(r)
	if err != nil {
		return
	}
	for _, id := range more {
		p := textPage(chat.OneLine(m.Title) + " (continued): see the message above.")
		a.logErr(ctx, "update a plan message's continuation", a.editChannelMessage(ctx, channel, id, p))
	}
}

// HTTPClient is the client NewSession uses when given none: REST calls time out after 15 s.
func HTTPClient() *http.Client { return &http.Client{Timeout: 15 * time.Second} }
