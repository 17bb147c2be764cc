package triage

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/whypending/whypending/internal/testenv"
)

func TestZZDump(t *testing.T) {
	root, _ := testenv.RepoRoot()
	for _, n := range strings.Split(os.Getenv("DUMP"), ",") {
		dir, _ := testenv.FindScenario(n)
		sc, _ := testenv.LoadScenarioDir(dir)
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			c := testenv.StartT(t, testenv.Options{Scheduler: !sc.Expected.SchedulerMustBeStopped})
			testenv.LoadT(t, c, dir)
			ns, name, _ := strings.Cut(sc.Expected.Pod, "/")
			if sc.Expected.NeedsScheduler {
				c.WaitForScheduler(t.Context(), ns, name)
			}
			d, err := Diagnose(t.Context(), NewCollector(c.Client), ns, name)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.MarshalIndent(d, "", "  ")
			os.WriteFile(filepath.Join("/tmp/dump", n+".json"), b, 0o644)
		})
	}
	_ = root
}
