package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/whypending/whypending/bot/authz"
	"github.com/whypending/whypending/chat"
)

// Handler answers one command. A *UserError is shown to the user as it is, with the usage; an
// *UnavailableError as one line; any other error is logged and shown as a generic failure with
// a log reference.
type Handler func(ctx context.Context, req chat.Request) (chat.Reply, error)

// Command describes a registered command for help texts.
type Command struct {
	// Name is the command without its slash, e.g. "why-pending".
	Name string
	// Usage is the argument synopsis, e.g. "[ns/]pod [--cluster C]".
	Usage string
	// Summary is one sentence.
	Summary string
}

// Router maps a command name to its handler.
type Router struct {
	routes   map[string]route
	channels map[string][]string
	metrics  *Metrics
	log      *slog.Logger
}

type route struct {
	cmd Command
	h   Handler
}

// RouterOptions configures NewRouter.
type RouterOptions struct {
	// AllowedChannels limits commands to these channel IDs, per platform
	// (Principal.Platform); a platform with no entry allows every channel.
	AllowedChannels map[string][]string
	// Metrics may be nil.
	Metrics *Metrics
	// Log receives handler errors (nil: slog.Default()).
	Log *slog.Logger
}

// NewRouter returns a Router with no commands.
func NewRouter(o RouterOptions) *Router {
	r := &Router{routes: map[string]route{}, channels: o.AllowedChannels, metrics: o.Metrics, log: o.Log}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Handle registers h for the command named cmd.Name, replacing any earlier handler.
func (r *Router) Handle(cmd Command, h Handler) {
	r.routes[cmd.Name] = route{cmd: cmd, h: h}
}

// Commands lists the registered commands sorted by name.
func (r *Router) Commands() []Command {
	out := make([]Command, 0, len(r.routes))
	for _, rt := range r.routes {
		out = append(out, rt.cmd)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Serve answers req. It never fails: unknown commands, refused channels and handler errors
// all come back as a Reply that says what happened.
func (r *Router) Serve(ctx context.Context, req chat.Request) chat.Reply {
	start := time.Now()
	rt, ok := r.routes[req.Command]
	if !ok {
		r.count("unknown", "user-error", start)
		return chat.Reply{Message: chat.Message{
			Title:    fmt.Sprintf("Unknown command /%s", req.Command),
			Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "Nothing was done. These commands exist:", Lines: r.usageLines()}},
		}}
	}
	if allowed := r.channels[req.Principal.Platform]; len(allowed) > 0 && !slices.Contains(allowed, req.Channel) {
		r.count(req.Command, "user-error", start)
		return chat.Reply{Message: chat.Message{
			Title:    "whypending is not enabled in this channel",
			Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "Ask in one of the channels the bot is configured for; nothing was done."}},
		}}
	}
	reply, err := rt.h(ctx, req)
	var ue *chat.UserError
	var unavailable *chat.UnavailableError
	var refusal *authz.Refusal
	var checkFailed *authz.CheckError
	switch {
	case err == nil:
		r.count(req.Command, "ok", start)
		return reply
	case errors.As(err, &refusal):
		// Per-user authorization: for the asker only, with no usage hint and nothing about
		// the namespace beyond what was denied (the refusal is already audited).
		r.count(req.Command, "refused", start)
		return chat.Reply{Message: refusalMessage(refusal), Private: true}
	case errors.As(err, &checkFailed):
		r.count(req.Command, "error", start)
		r.log.WarnContext(ctx, "authorization check failed", slog.String("command", req.Command),
			slog.String("user", req.Principal.String()), slog.Any("err", err))
		return chat.Reply{Message: checkFailedMessage(checkFailed), Private: true}
	case errors.As(err, &unavailable):
		r.count(req.Command, "unavailable", start)
		return chat.Reply{Message: chat.Message{Title: unavailable.Text + " Nothing was done.", Severity: chat.SeverityWarning}}
	case errors.As(err, &ue):
		r.count(req.Command, "user-error", start)
		return chat.Reply{Message: chat.Message{
			Title:    fmt.Sprintf("/%s: %s", req.Command, ue.Text),
			Severity: chat.SeverityInfo,
			Sections: []chat.Section{{Text: "Usage: /" + rt.cmd.Name + " " + rt.cmd.Usage}},
		}}
	default:
		r.count(req.Command, "error", start)
		ref := chat.ErrorRef()
		r.log.ErrorContext(ctx, "command failed", slog.String("command", req.Command),
			slog.String("user", req.Principal.String()), slog.String("ref", ref), slog.Any("err", err))
		return chat.Reply{Message: chat.Message{
			Title:    fmt.Sprintf("/%s failed", req.Command),
			Severity: chat.SeverityWarning,
			Sections: []chat.Section{{Text: "Something went wrong; nothing was changed. The bot's log has the details under ref " + ref + "."}},
		}}
	}
}

func (r *Router) usageLines() []string {
	var lines []string
	for _, c := range r.Commands() {
		lines = append(lines, fmt.Sprintf("/%s %s: %s", c.Name, c.Usage, c.Summary))
	}
	return lines
}

func (r *Router) count(command, outcome string, start time.Time) {
	if r.metrics == nil {
		return
	}
	r.metrics.commands.WithLabelValues(command, outcome).Inc()
	if command != "unknown" {
		r.metrics.commandSeconds.WithLabelValues(command).Observe(time.Since(start).Seconds())
	}
}
