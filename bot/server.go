package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/whypending/whypending/chat"
)

// ReadyCheck is one readiness condition for /readyz, e.g. "cluster prod-eu" or "store".
type ReadyCheck struct {
	// Name is shown in /readyz output.
	Name string
	// Check returns nil when ready, else why not (one line, shown in /readyz). An error
	// wrapping ErrNotChecked is shown but does not make the bot unready (nor its group). It
	// should honour ctx
	// (2 s budget).
	Check func(ctx context.Context) error
	// Group, when not empty, makes the checks that share it alternatives: they count as
	// ready when at least one of them is (the clusters: the bot is useful while any cluster
	// answers). Checks without a Group must all be ready.
	Group string
}

// ErrNotChecked is wrapped by a ReadyCheck error when the condition could not be checked for
// a reason another check already reports (the store's cluster is unavailable): /readyz shows
// it, but it does not make the bot unready.
var ErrNotChecked = errors.New("not checked")

// Server is the bot's HTTP listener: /healthz, /readyz, /metrics, plus whatever the adapters
// mount (Slack's /slack/commands and /slack/interactions, Discord's /discord/interactions).
type Server struct {
	mux    *http.ServeMux
	checks []ReadyCheck
	log    *slog.Logger

	mu   sync.Mutex
	last map[string]string // check name -> last result line, to log changes only
}

// NewServer returns a Server exposing gatherer on /metrics (nil: prometheus.DefaultGatherer)
// and checks on /readyz.
func NewServer(gatherer prometheus.Gatherer, log *slog.Logger, checks ...ReadyCheck) *Server {
	if gatherer == nil {
		gatherer = prometheus.DefaultGatherer
	}
	if log == nil {
		log = slog.Default()
	}
	s := &Server{mux: http.NewServeMux(), checks: checks, log: log, last: map[string]string{}}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return s
}

// Handle mounts h on pattern (http.ServeMux syntax, e.g. "POST /slack/commands").
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Handler returns the server's root handler.
func (s *Server) Handler() http.Handler { return s.mux }

// readyz answers 200 when every ungrouped check passes and each group has a passing check,
// else 503. The body has one line per check ("cluster a: ok", "cluster b: <why>"), one
// "<group>: N of M ready" line per group, then "ready" or "not ready". A check whose result
// changed is logged.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	type tally struct{ ok, total int }
	groups := map[string]*tally{}
	var order []string
	ready := true
	var b strings.Builder
	for _, c := range s.checks {
		err := c.Check(ctx)
		line := "ok"
		if err != nil {
			line = chat.JoinLines(err.Error())
		}
		fmt.Fprintf(&b, "%s: %s\n", c.Name, line)
		s.logChange(ctx, c.Name, line, err)
		if c.Group != "" {
			g := groups[c.Group]
			if g == nil {
				g = &tally{}
				groups[c.Group] = g
				order = append(order, c.Group)
			}
			g.total++
			if !failed(err) {
				g.ok++
			}
			continue
		}
		if failed(err) {
			ready = false
		}
	}
	for _, name := range order {
		g := groups[name]
		fmt.Fprintf(&b, "%s: %d of %d ready\n", name, g.ok, g.total)
		if g.ok == 0 {
			ready = false
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, b.String()+"not ready\n")
		return
	}
	fmt.Fprint(w, b.String()+"ready\n")
}

// failed says whether a check's error makes it not ready: one that wraps ErrNotChecked does not.
func failed(err error) bool { return err != nil && !errors.Is(err, ErrNotChecked) }

// logChange logs a readiness check whose result line differs from the last one.
func (s *Server) logChange(ctx context.Context, name, line string, err error) {
	s.mu.Lock()
	changed := s.last[name] != line
	s.last[name] = line
	s.mu.Unlock()
	switch {
	case !changed:
	case err != nil:
		s.log.WarnContext(ctx, "readiness check failed", slog.String("check", name), slog.String("why", line))
	default:
		s.log.InfoContext(ctx, "readiness check passes", slog.String("check", name))
	}
}

// Serve serves on ln until ctx is done, then shuts down gracefully (10 s for in-flight
// requests). It returns nil after a shutdown caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      15 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shut down http server: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// ListenAndServe listens on addr (host:port) and calls Serve.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}
