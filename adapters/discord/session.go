package discord

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/bwmarrin/discordgo"
)

// NewSession returns a discordgo session for the bot token (without "Bot "), for the REST
// API and, in gateway mode, the gateway. apiURL, when not empty, replaces Discord's base URL
// "https://discord.com/" (discord.apiURL: tests, egress proxies): discordgo computes its
// endpoints once at start-up, so the session's HTTP client rewrites each request instead.
// client is the HTTP client to send through (nil: HTTPClient()). The session waits out no
// rate limit itself: the adapter does (chat.Deliverer), so a wait never outlives its context.
func NewSession(token, apiURL string, client *http.Client) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + token)
	if err != nil {
		return nil, fmt.Errorf("discord session: %w", err)
	}
	if client == nil {
		client = HTTPClient()
	}
	if apiURL != "" {
		base, err := url.Parse(apiURL)
		if err != nil || base.Host == "" {
			return nil, fmt.Errorf("discord api URL %q: not an absolute URL", apiURL)
		}
		c := *client
		next := c.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		c.Transport = rewriteBase{base: base, next: next}
		client = &c
	}
	s.Client = client
	s.ShouldRetryOnRateLimit = false
	s.StateEnabled = false
	// Interactions reach a gateway connection whatever its intents; ask for no events.
	s.Identify.Intents = discordgo.IntentsNone
	return s, nil
}

// discordHost is the host of discordgo.EndpointDiscord.
const discordHost = "discord.com"

// rewriteBase sends requests for https://discord.com/… to base instead, keeping the path
// after the base's own path.
type rewriteBase struct {
	base *url.URL
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t rewriteBase) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != discordHost {
		return t.next.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme, r2.URL.Host = t.base.Scheme, t.base.Host
	r2.URL.Path = strings.TrimSuffix(t.base.Path, "/") + r.URL.Path
	r2.URL.RawPath = ""
	r2.Host = ""
	return t.next.RoundTrip(r2)
}
