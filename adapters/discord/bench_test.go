package discord_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/whypending/whypending/adapters/discord"
	"github.com/whypending/whypending/internal/chattest"
	"github.com/whypending/whypending/internal/discordfake"
)

// concurrentInteractions is how many signed interactions are sent at once.
const concurrentInteractions = 200

// burst sends n signed /why-pending interactions at once to replica 0 of e, asking about
// targets round-robin, and waits for every answer. It returns each interaction's ack latency
// (request sent to deferred response read) and follow-up latency (request sent to the edit of
// the deferred response reaching the fake Discord), sorted.
func burst(t testing.TB, e *e2eEnv, client *http.Client, targets []string, n int) (acks, followUps []time.Duration) {
	t.Helper()
	tokens := make([]string, n)
	reqs := make([]*http.Request, n)
	for i := range n {
		var body []byte
		tokens[i], body = discordfake.InteractionJSON(t, discordgo.InteractionApplicationCommand,
			discordfake.CommandData("why-pending", "", "pod", targets[i%len(targets)]), alice, nil)
		e.fake.Expect(tokens[i], discordfake.ChannelID)
		reqs[i] = e.sign.Request(t, e.urls[0], time.Now(), body)
	}
	starts, acks := chattest.Burst(t, client, reqs)
	chattest.WaitFor(t, 120*time.Second, fmt.Sprintf("%d answers", n), func() bool {
		for _, token := range tokens {
			if len(e.fake.CallsFor(token)) == 0 {
				return false
			}
		}
		return true
	})
	for i, token := range tokens {
		got := e.fake.CallsFor(token)
		if len(got) != 1 || got[0].Route != "webhook-edit" {
			t.Fatalf("%s: %d calls, want exactly one edit of the deferred response", token, len(got))
		}
		followUps = append(followUps, got[0].At.Sub(starts[i]))
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	return acks, followUps
}

// BenchmarkServe200ConcurrentInteractions measures ack latency (p50/p99, target p99 <= 100
// ms) and follow-up latency for bursts of 200 concurrent signed /why-pending interactions to
// the interactions endpoint (real bot, cached triage collector, real control plane).
func BenchmarkServe200ConcurrentInteractions(b *testing.B) {
	e := newE2E(b, e2eOptions{scenario: "seed-ipam-leaked", cached: true})
	client := chattest.BenchClient(concurrentInteractions)
	targets := e.Pods(b, "seed-ipam-leaked")
	burst(b, e, client, targets, 20) // warm the caches and connections
	var acks, followUps []time.Duration
	b.ResetTimer()
	for b.Loop() {
		a, f := burst(b, e, client, targets, concurrentInteractions)
		acks, followUps = append(acks, a...), append(followUps, f...)
	}
	slices.Sort(acks)
	slices.Sort(followUps)
	chattest.BurstMetrics(b, acks, followUps)
}

// BenchmarkAckHandler measures the CPU cost of acknowledging one signed slash command
// (read the body, verify the Ed25519 signature and the timestamp, parse the interaction,
// reserve a queue place, write the deferred response), without the network: a
// load-independent figure for the ack path.
func BenchmarkAckHandler(b *testing.B) {
	s := discordfake.NewSigner(b)
	a := discord.New(discord.Options{Core: &chattest.RecordingCore{}, PublicKey: s.Pub, Log: chattest.QuietLog, QueueSize: 1 << 20})
	_, body := discordfake.InteractionJSON(b, discordgo.InteractionApplicationCommand, discordfake.CommandData("why-pending", "", "pod", "shop/web-7f9c"), alice, nil)
	signed := s.Request(b, "/discord/interactions", time.Now(), body)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/discord/interactions", bytes.NewReader(body))
		req.Header = signed.Header.Clone()
		w := httptest.NewRecorder()
		a.ServeInteraction(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
