package alerts_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/whypending/whypending/bot/alerts"
)

// TestRefusalsAreLogged: a refused delivery (a wrong token, malformed JSON) leaves a warning
// with its reason in the log, so a misconfigured Alertmanager shows there and not only in
// /metrics; neither the token sent nor the body is in it, and a storm of refusals is bounded.
func TestRefusalsAreLogged(t *testing.T) {
	var logs bytes.Buffer
	r := alerts.New(alerts.Options{Token: token, Metrics: alerts.NewMetrics(prometheus.NewRegistry()),
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	post := func(auth, body string) int {
		req := httptest.NewRequest(http.MethodPost, alerts.Path, strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		return w.Code
	}
	if code := post("Bearer not-the-secret-token", `{}`); code != http.StatusUnauthorized {
		t.Fatalf("wrong token = %d, want 401", code)
	}
	if code := post("Bearer "+token, `{"version": "4", "alerts": [SECRET-BODY`); code != http.StatusBadRequest {
		t.Fatalf("malformed = %d, want 400", code)
	}
	out := logs.String()
	for _, want := range []string{"webhook delivery refused", "reason=unauthorized", "reason=malformed", "status=401"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{"not-the-secret-token", token, "SECRET-BODY"} {
		if strings.Contains(out, secret) {
			t.Errorf("log shows %q:\n%s", secret, out)
		}
	}
	for range 100 {
		post("", `{}`)
	}
	if n := strings.Count(logs.String(), "webhook delivery refused"); n > 5 {
		t.Errorf("%d refusal lines after 102 refusals, want a burst of at most 5", n)
	}
}
