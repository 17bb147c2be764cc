package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadyCheck is one readiness condition for /readyz, e.g. "the store cluster answers".
type ReadyCheck struct {
	// Name is shown in /readyz output.
	Name string
	// Check returns nil when ready; it should honour ctx (2 s budget).
	Check func(ctx context.Context) error
}

// Server is the bot's HTTP listener: /healthz, /readyz, /metrics, plus whatever the adapters
// mount (Slack's /slack/commands and /slack/interactions).
type Server struct {
	mux    *http.ServeMux
	checks []ReadyCheck
	log    *slog.Logger
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
	s := &Server{mux: http.NewServeMux(), checks: checks, log: log}
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

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var failed []string
	for _, c := range s.checks {
		if err := c.Check(ctx); err != nil {
			failed = append(failed, c.Name)
			s.log.WarnContext(ctx, "readiness check failed", slog.String("check", c.Name), slog.Any("err", err))
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not ready: "+strings.Join(failed, ", "))
		return
	}
	fmt.Fprintln(w, "ok")
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
