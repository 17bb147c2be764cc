package bot

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/whypending/whypending/chat"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		command, text string
		wantName      string
		wantArgs      []string
	}{
		{"/why-pending", "shop/web-7f9c", "why-pending", []string{"shop/web-7f9c"}},
		{"/ipam", "  check   --cluster prod ", "ipam", []string{"check", "--cluster", "prod"}},
		{"/ipam", "check \u2014cluster prod", "ipam", []string{"check", "--cluster", "prod"}},
		{"/whypending", "", "whypending", nil},
	}
	for _, tt := range tests {
		t.Run(tt.command+" "+tt.text, func(t *testing.T) {
			name, args := chat.ParseCommand(tt.command, tt.text)
			if name != tt.wantName || !cmp.Equal(args, tt.wantArgs) {
				t.Errorf("ParseCommand(%q, %q) = %q, %q, want %q, %q", tt.command, tt.text, name, args, tt.wantName, tt.wantArgs)
			}
		})
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantPos []string
		wantVal map[string]string
		wantErr string
	}{
		{"separate value", []string{"check", "--cluster", "prod"}, []string{"check"}, map[string]string{"cluster": "prod"}, ""},
		{"equals value", []string{"--cluster=prod", "check"}, []string{"check"}, map[string]string{"cluster": "prod"}, ""},
		{"unknown flag", []string{"--force"}, nil, nil, `unknown flag "--force" (flags: --cluster, -n)`},
		{"missing value", []string{"check", "--cluster"}, nil, nil, "flag --cluster needs a value"},
		{"one-letter flags have one dash", []string{"-x"}, nil, nil, `unknown flag "-x" (flags: --cluster, -n)`},
		{"a one-letter flag without its value", []string{"check", "-n"}, nil, nil, "flag -n needs a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseFlags(tt.args, "cluster", "n")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseFlags(%q) error = %v, want %q", tt.args, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cmp.Equal(f.positional, tt.wantPos) || !cmp.Equal(f.values, tt.wantVal) {
				t.Errorf("parseFlags(%q) = %q %v, want %q %v", tt.args, f.positional, f.values, tt.wantPos, tt.wantVal)
			}
		})
	}
}

func TestRouterServe(t *testing.T) {
	slackUser := chat.Principal{Platform: "slack", ID: "UALICE"}
	discordUser := chat.Principal{Platform: "discord", ID: "80351110224678912"}
	r := NewRouter(RouterOptions{AllowedChannels: map[string][]string{"slack": {"COPS"}}, Log: quietLog})
	r.Handle(Command{Name: "ok", Usage: "x"}, func(context.Context, chat.Request) (chat.Reply, error) {
		return chat.Reply{Message: chat.Message{Title: "fine"}, Public: true}, nil
	})
	r.Handle(Command{Name: "usage", Usage: "thing"}, func(context.Context, chat.Request) (chat.Reply, error) {
		return chat.Reply{}, userErrorf("name one thing")
	})
	r.Handle(Command{Name: "boom", Usage: ""}, func(context.Context, chat.Request) (chat.Reply, error) {
		return chat.Reply{}, errors.New("dial tcp 10.0.0.1:6443: connection refused")
	})
	tests := []struct {
		name       string
		req        chat.Request
		wantTitle  string
		wantPublic bool
		notIn      string // text that must not reach the user
	}{
		{"a known command answers", chat.Request{Principal: slackUser, Command: "ok", Channel: "COPS"}, "fine", true, ""},
		{"an unknown command lists the commands", chat.Request{Principal: slackUser, Command: "nope", Channel: "COPS"}, "Unknown command /nope", false, ""},
		{"a channel not allowed is refused", chat.Request{Principal: slackUser, Command: "ok", Channel: "CRANDOM"}, "whypending is not enabled in this channel", false, ""},
		{"a platform without allowed channels answers everywhere", chat.Request{Principal: discordUser, Command: "ok", Channel: "1234567890123456789"}, "fine", true, ""},
		{"a user error is shown with usage", chat.Request{Principal: slackUser, Command: "usage", Channel: "COPS"}, "/usage: name one thing", false, ""},
		{"an internal error hides its text", chat.Request{Principal: slackUser, Command: "boom", Channel: "COPS"}, "/boom failed", false, "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Serve(t.Context(), tt.req)
			if got.Message.Title != tt.wantTitle || got.Public != tt.wantPublic {
				t.Errorf("Serve(%s) = %q public=%v, want %q public=%v", tt.req.Command, got.Message.Title, got.Public, tt.wantTitle, tt.wantPublic)
			}
			if tt.notIn != "" && strings.Contains(renderedText(got.Message), tt.notIn) {
				t.Errorf("Serve(%s) shows %q to the user", tt.req.Command, tt.notIn)
			}
		})
	}
}

// renderedText flattens a message for substring checks of what a user would see.
func renderedText(m chat.Message) string {
	parts := []string{m.Title, m.Footer}
	for _, s := range m.Sections {
		parts = append(parts, s.Heading, s.Text, s.Code)
		parts = append(parts, s.Lines...)
	}
	return strings.Join(parts, "\n")
}
