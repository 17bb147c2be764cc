package fleet

import "k8s.io/client-go/rest"

// The client-side rate limit of every client serve and the CLI build (client-go's default of
// 5 QPS is too low for a bot that reads and writes in bursts; the API server's priority and
// fairness still protects the server).
const (
	ClientQPS   = 50
	ClientBurst = 100
)

// RateLimit sets cfg's client-side rate limit to ClientQPS and ClientBurst.
func RateLimit(cfg *rest.Config) { cfg.QPS, cfg.Burst = ClientQPS, ClientBurst }
