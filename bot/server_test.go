package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/chat"
)

func TestReadyz(t *testing.T) {
	ok := func(context.Context) error { return nil }
	down := func(context.Context) error {
		return errors.New("unavailable since 2026-11-30T12:00:00Z: cannot reach the Kubernetes API server at https://10.0.9.1:6443:\nconnection refused")
	}
	notChecked := func(context.Context) error { return fmt.Errorf("%w: cluster a is unavailable", ErrNotChecked) }
	noNamespace := func(context.Context) error {
		return &chat.UnavailableError{Text: `The approval store is not ready: namespace "whypending" does not exist (create it, or set store.namespace).`}
	}
	tests := []struct {
		name     string
		checks   []ReadyCheck
		wantCode int
		wantBody string
	}{
		{
			name: "one cluster of two answers: ready, and the body names the other and its error in one line",
			checks: []ReadyCheck{
				{Name: "cluster a", Group: "clusters", Check: ok},
				{Name: "cluster b", Group: "clusters", Check: down},
				{Name: "store", Check: ok},
			},
			wantCode: 200,
			wantBody: "cluster a: ok\n" +
				"cluster b: unavailable since 2026-11-30T12:00:00Z: cannot reach the Kubernetes API server at https://10.0.9.1:6443:; connection refused\n" +
				"store: ok\nclusters: 1 of 2 ready\nready\n",
		},
		{
			name: "no cluster answers: not ready",
			checks: []ReadyCheck{
				{Name: "cluster a", Group: "clusters", Check: down},
				{Name: "store", Check: notChecked},
			},
			wantCode: 503,
			wantBody: "cluster a: unavailable since 2026-11-30T12:00:00Z: cannot reach the Kubernetes API server at https://10.0.9.1:6443:; connection refused\n" +
				"store: not checked: cluster a is unavailable\nclusters: 0 of 1 ready\nnot ready\n",
		},
		{
			name: "a store that is not checked because its cluster is down does not make the bot unready",
			checks: []ReadyCheck{
				{Name: "cluster a", Group: "clusters", Check: down},
				{Name: "cluster b", Group: "clusters", Check: ok},
				{Name: "store", Check: notChecked},
			},
			wantCode: 200,
		},
		{
			name: "a chat platform whose bot token got no answer (not checked) counts as ready in its group",
			checks: []ReadyCheck{
				{Name: "cluster a", Group: "clusters", Check: ok},
				{Name: "slack", Group: "chat platforms", Check: func(context.Context) error {
					return fmt.Errorf("cannot check the bot token: auth.test: slack server error: 500 Internal Server Error; %w until Slack answers", ErrNotChecked)
				}},
			},
			wantCode: 200,
			wantBody: "cluster a: ok\n" +
				"slack: cannot check the bot token: auth.test: slack server error: 500 Internal Server Error; not checked until Slack answers\n" +
				"clusters: 1 of 1 ready\nchat platforms: 1 of 1 ready\nready\n",
		},
		{
			name: "a missing store namespace makes the bot unready and is named",
			checks: []ReadyCheck{
				{Name: "cluster a", Group: "clusters", Check: ok},
				{Name: "store", Check: noNamespace},
			},
			wantCode: 503,
			wantBody: "cluster a: ok\n" +
				`store: The approval store is not ready: namespace "whypending" does not exist (create it, or set store.namespace).` + "\n" +
				"clusters: 1 of 1 ready\nnot ready\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(prometheus.NewRegistry(), quietLog, tt.checks...)
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.wantCode {
				t.Errorf("GET /readyz = %d, want %d\n%s", rec.Code, tt.wantCode, body)
			}
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("GET /readyz body =\n%s\nwant\n%s", body, tt.wantBody)
			}
		})
	}
}
