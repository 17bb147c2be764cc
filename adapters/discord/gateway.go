package discord

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/bwmarrin/discordgo"
)

// RunGateway connects to Discord's gateway with the session (no public URL needed; the
// application's Interactions Endpoint URL must be empty, or Discord sends interactions
// there instead) and handles interactions as ServeInteraction does, until ctx is done. Run
// must be running too.
func (a *Adapter) RunGateway(ctx context.Context) error {
	remove := a.session.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		a.HandleGatewayInteraction(ctx, s, ic)
	})
	defer remove()
	if err := a.session.Open(); err != nil {
		return fmt.Errorf("open discord gateway: %w", err)
	}
	<-ctx.Done()
	if err := a.session.Close(); err != nil {
		return fmt.Errorf("close discord gateway: %w", err)
	}
	return nil
}

// HandleGatewayInteraction handles one INTERACTION_CREATE from the gateway: the initial
// response goes to the REST callback (Create Interaction Response) within Discord's 3
// seconds, and the work to the same workers as HTTP mode. The work is done only if the
// callback succeeded: with several replicas on the gateway each receives the interaction,
// Discord accepts one response (the others get "already acknowledged"), and only that
// replica answers.
func (a *Adapter) HandleGatewayInteraction(ctx context.Context, s *discordgo.Session, ic *discordgo.InteractionCreate) {
	start := time.Now()
	resp, work, kind := a.dispatch(ic.Interaction)
	rctx, cancel := context.WithTimeout(ctx, discordgo.InteractionDeadline)
	err := s.InteractionRespond(ic.Interaction, resp, discordgo.WithContext(rctx))
	cancel()
	a.observeAck(kind, start)
	if err != nil {
		a.log.InfoContext(ctx, "interaction not ours to answer: its response failed", slog.String("kind", kind), slog.Any("err", err))
		if work != nil {
			a.queue.Submit(func(context.Context) {}) // give the reserved place back
		}
		return
	}
	if work != nil {
		a.queue.Submit(work)
	}
}
