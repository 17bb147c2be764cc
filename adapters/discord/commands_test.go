package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"
)

// TestRequestForTakesSlackSyntaxInPod checks that the pod option accepts what Slack's
// /why-pending takes after the command, so the usage the bot shows works on Discord too.
func TestRequestForTakesSlackSyntaxInPod(t *testing.T) {
	option := func(name string, value any) map[string]any {
		return map[string]any{"name": name, "type": 3, "value": value}
	}
	command := func(name string, options ...map[string]any) map[string]any {
		return map[string]any{"id": "1500000000000000001", "name": name, "type": 1, "options": options}
	}
	tests := []struct {
		data map[string]any
		want []string
	}{
		{command("why-pending", option("pod", "shop/web-7f9c")), []string{"shop/web-7f9c"}},
		{command("why-pending", option("pod", " ds/agent  -n dsns ")), []string{"ds/agent", "-n", "dsns"}},
		{command("why-pending", option("pod", "--all"), option("namespace", "shop")), []string{"--all", "--namespace", "shop"}},
		{command("ipam", map[string]any{"name": "release-ips", "type": 1, "options": []any{option("node", "n1")}}), []string{"release-ips", "--node", "n1"}},
	}
	for _, tt := range tests {
		raw, err := json.Marshal(map[string]any{"type": discordgo.InteractionApplicationCommand, "data": tt.data, "channel_id": "1190000000000000001"})
		if err != nil {
			t.Fatal(err)
		}
		var i discordgo.Interaction
		if err := json.Unmarshal(raw, &i); err != nil {
			t.Fatal(err)
		}
		req, _, _ := requestFor(&i)
		if !slices.Equal(req.Args, tt.want) {
			t.Errorf("requestFor(%v).Args = %q, want %q", tt.data, req.Args, tt.want)
		}
	}
}

// TestRegisterHintNamesTheSetting checks that a refused registration points at the setting to
// fix, from Discord's HTTP status.
func TestRegisterHintNamesTheSetting(t *testing.T) {
	tests := []struct {
		status int
		guild  string
		want   string
	}{
		{http.StatusUnauthorized, "", "discord.botToken"},
		{http.StatusNotFound, "", "discord.applicationID"},
		{http.StatusForbidden, "1170000000000000001", "guild 1170000000000000001"},
		{http.StatusForbidden, "", "applications.commands"},
	}
	for _, tt := range tests {
		err := fmt.Errorf("wrapped: %w", &discordgo.RESTError{Response: &http.Response{StatusCode: tt.status}})
		if got := registerHint(err, "1180000000000000001", tt.guild); !strings.Contains(got, tt.want) {
			t.Errorf("registerHint(%d, guild %q) = %q, want it to name %q", tt.status, tt.guild, got, tt.want)
		}
	}
	if got := registerHint(errors.New("dial tcp: connection refused"), "1", ""); got != "" {
		t.Errorf("registerHint(network error) = %q, want none", got)
	}
}
