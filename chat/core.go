package chat

import (
	"context"
	"net/http"
)

// Core is what a chat adapter needs from the bot; *Bot implements it.
type Core interface {
	// Command answers a slash command.
	Command(ctx context.Context, req Request) Reply
	// Click handles a button click; progress shows intermediate versions of the clicked
	// message (the "running" plan).
	Click(ctx context.Context, c Click, progress func(context.Context, Message)) Outcome
	// Attach records where a plan message was posted.
	Attach(ctx context.Context, planID, ref string) error
}

// Click is one button click on a message the bot posted.
type Click struct {
	// Principal is who clicked.
	Principal Principal
	// Channel is the channel ID of the message.
	Channel string
	// ActionID and Value are the button's (see Button).
	ActionID string
	Value    string
	// Refusal, when set, refuses the click whatever it asks, and is why (see
	// Decision.Refusal); a refused Approve or Deny is recorded in the plan's history.
	Refusal string
}

// Outcome is what a click leads to, for the adapter to show.
type Outcome struct {
	// Update, when set, replaces the message that holds the clicked button (the plan
	// message after a decision). Nil leaves it alone.
	Update *Message
	// UpdateRef, when Update is a plan message, is where the plan was posted (the reference
	// Attach recorded): an adapter that split the plan over several messages edits them all.
	UpdateRef string
	// Notice, when not empty, is shown to the clicker only (a refusal, "already approved").
	Notice string
	// Post, when set, is a new message to post in the channel (a plan made from a
	// "Release N leaked IPs" button).
	Post *Reply
	// InThread puts Post in the thread of the clicked message instead (a watch post's
	// follow-up answers): on Slack a reply whose thread_ts is the clicked message's ts, on
	// Discord a message in the thread started on it. Post.Public and PlanID do not apply.
	InThread bool
}

// Reply is a handler's answer to the person who typed the command.
type Reply struct {
	// Message is the answer.
	Message Message
	// Public makes the answer visible to the whole channel; otherwise only the person who
	// asked sees it where the platform allows (Slack ephemeral). Discord fixes visibility
	// when it acknowledges, before the answer exists: see adapters/discord.
	Public bool
	// Private marks an answer that must reach the person only, even where the platform made
	// the acknowledgement public (Discord): an authorization refusal, or a check that could
	// not be made. Such an adapter deletes the public acknowledgement and answers privately.
	Private bool
	// PlanID is set when Message shows a plan awaiting approval: the adapter posts it where
	// it can update it later and records where with Bot.Attach.
	PlanID string
}

// Mux is where an adapter in HTTP mode registers its routes (bot.Server, http.ServeMux).
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// Admitter is a Core that can tell, before a command is acknowledged, whether it refuses the
// command to the person who typed it (per-user authorization); *bot.Bot implements it. An
// adapter whose platform fixes a response's visibility when it acknowledges (Discord) asks
// first, and answers a refusal at once to that person only, so nothing the person may not see
// is answered in the channel.
type Admitter interface {
	// Admit returns the refusal to show the person, or nil when the command goes on. ctx
	// bounds the checks; when it ends first, Admit returns a reply asking to try again.
	Admit(ctx context.Context, req Request) *Reply
}
