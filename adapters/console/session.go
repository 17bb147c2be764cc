package console

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/whypending/whypending/chat"
)

// consoleChannel is the channel ID console requests carry.
const consoleChannel = "console"

// Session is a local chat with the bot: slash commands go to the core, the buttons of the
// last message that had any can be pressed with "/click N" (buttons with a confirm dialog
// ask first: "/click N confirm"), and "/as NAME" switches who is typing, so a demo can show
// a plan being requested by one person and approved by another. Its Handle method is a
// Handler for Run.
type Session struct {
	core chat.Core

	mu      sync.Mutex
	user    string
	buttons []chat.Button
	posted  int
}

// NewSession returns a Session typing as user (a user ID such as "alice").
func NewSession(core chat.Core, user string) *Session {
	return &Session{core: core, user: user}
}

// Handle answers one console line.
func (s *Session) Handle(ctx context.Context, line string) []chat.Message {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	switch fields[0] {
	case "/as":
		if len(fields) != 2 {
			return []chat.Message{{Title: "usage: /as NAME", Severity: chat.SeverityInfo}}
		}
		s.mu.Lock()
		s.user = fields[1]
		s.mu.Unlock()
		return []chat.Message{{Title: "you are now " + fields[1], Severity: chat.SeverityInfo}}
	case "/click":
		return s.click(ctx, fields[1:])
	}
	name, args := chat.ParseCommand(fields[0], strings.Join(fields[1:], " "))
	reply := s.core.Command(ctx, chat.Request{Principal: s.principal(), Channel: consoleChannel, Command: name, Args: args})
	if reply.PlanID != "" {
		s.mu.Lock()
		s.posted++
		ref := fmt.Sprintf("console:%d", s.posted)
		s.mu.Unlock()
		_ = s.core.Attach(ctx, reply.PlanID, ref) // the console has nothing to update later
	}
	return []chat.Message{s.remember(reply.Message)}
}

// click presses button N of the last message with buttons.
func (s *Session) click(ctx context.Context, args []string) []chat.Message {
	s.mu.Lock()
	buttons := s.buttons
	s.mu.Unlock()
	if len(args) == 0 || len(args) > 2 {
		return []chat.Message{{Title: "usage: /click N [confirm]", Severity: chat.SeverityInfo}}
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > len(buttons) {
		return []chat.Message{{Title: fmt.Sprintf("no button %s: the last message has %d", args[0], len(buttons)), Severity: chat.SeverityInfo}}
	}
	btn := buttons[n-1]
	if btn.Confirm != nil && (len(args) < 2 || args[1] != "confirm") {
		return []chat.Message{{Title: btn.Confirm.Title, Severity: chat.SeverityWarning,
			Sections: []chat.Section{{Text: btn.Confirm.Text}, {Text: fmt.Sprintf("Type /click %d confirm to %s, or anything else to cancel.", n, strings.ToLower(btn.Confirm.Confirm))}}}}
	}
	var out []chat.Message
	progress := func(_ context.Context, m chat.Message) { out = append(out, m) }
	o := s.core.Click(ctx, chat.Click{Principal: s.principal(), Channel: consoleChannel, ActionID: btn.ActionID, Value: btn.Value}, progress)
	if o.Notice != "" {
		out = append(out, chat.Message{Title: o.Notice, Severity: chat.SeverityInfo})
	}
	if o.Update != nil {
		out = append(out, s.remember(*o.Update))
	}
	if o.Post != nil {
		if o.Post.PlanID != "" {
			s.mu.Lock()
			s.posted++
			ref := fmt.Sprintf("console:%d", s.posted)
			s.mu.Unlock()
			_ = s.core.Attach(ctx, o.Post.PlanID, ref)
		}
		out = append(out, s.remember(o.Post.Message))
	}
	return out
}

// remember keeps a message's buttons for /click and adds the hint to its footer.
func (s *Session) remember(m chat.Message) chat.Message {
	if len(m.Buttons) == 0 {
		return m
	}
	s.mu.Lock()
	s.buttons = m.Buttons
	s.mu.Unlock()
	hint := "press a button with /click N"
	if m.Footer != "" {
		m.Footer += " · " + hint
	} else {
		m.Footer = hint
	}
	return m
}

func (s *Session) principal() chat.Principal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return chat.Principal{Platform: "console", ID: s.user, Name: s.user}
}

// User returns the user ID the session is typing as.
func (s *Session) User() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.user
}
