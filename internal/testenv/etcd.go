package testenv

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Etcd is an etcd server on loopback shared by every Cluster of the process: each Cluster's
// kube-apiserver keeps its objects under its own --etcd-prefix, so clusters never see each
// other. Start starts it on first use; Shutdown stops it.
type Etcd struct {
	// URL is the client URL, e.g. http://127.0.0.1:41234.
	URL  string
	dir  string
	proc *process
}

var (
	etcdMu     sync.Mutex
	sharedEtcd *Etcd
	procDir    string // <tmp>/whypending-testenv-<pid>: every temp file of this process
)

const procDirPrefix = "whypending-testenv-"

// processDir returns the per-process temp dir, creating it (and sweeping the dirs of dead
// processes) on first use. Callers hold etcdMu.
func processDir() (string, error) {
	if procDir != "" {
		return procDir, nil
	}
	sweepStale()
	dir := filepath.Join(os.TempDir(), procDirPrefix+strconv.Itoa(os.Getpid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	procDir = dir
	return dir, nil
}

// sweepStale removes temp dirs left by test processes that died without Shutdown (their
// child processes died with them through Pdeathsig).
func sweepStale() {
	matches, _ := filepath.Glob(filepath.Join(os.TempDir(), procDirPrefix+"*"))
	for _, m := range matches {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m), procDirPrefix))
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(m)
	}
}

// StartEtcd returns the process's shared etcd, starting it (in a temp data dir, without fsync)
// if it is not running. Progress lines go to progress (may be nil).
func StartEtcd(ctx context.Context, progress io.Writer) (*Etcd, error) {
	bin, err := BinDir(ctx, progress)
	if err != nil {
		return nil, err
	}
	etcdMu.Lock()
	defer etcdMu.Unlock()
	if sharedEtcd != nil && !sharedEtcd.proc.exited() {
		return sharedEtcd, nil
	}
	if sharedEtcd != nil {
		_ = os.RemoveAll(sharedEtcd.dir)
		sharedEtcd = nil
	}
	pdir, err := processDir()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		e, err := startEtcd(ctx, filepath.Join(bin, "etcd"), pdir)
		if err == nil {
			sharedEtcd = e
			return e, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startEtcd(ctx context.Context, bin, pdir string) (*Etcd, error) {
	dir, err := os.MkdirTemp(pdir, "etcd-")
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	client := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(dir, "data"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync=true",
		"--quota-backend-bytes=" + strconv.Itoa(4<<30),
		"--log-level=warn",
	}
	p, err := startProcess("etcd", bin, args, filepath.Join(dir, "etcd.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &Etcd{URL: client, dir: dir, proc: p}
	if err := waitHTTP(ctx, p, http.DefaultClient, client+"/health", 30*time.Second); err != nil {
		_ = p.stop()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	return e, nil
}

// Shutdown stops every running Cluster and the shared etcd (if running) and removes the process's temp dir. Test packages call it from TestMain
// (see Main); if a process exits without it, etcd dies with it (Pdeathsig) and the next
// process sweeps the temp dir.
func Shutdown() error {
	err := stopAll()
	etcdMu.Lock()
	defer etcdMu.Unlock()
	if sharedEtcd != nil {
		if stopErr := sharedEtcd.proc.stop(); stopErr != nil && err == nil {
			err = stopErr
		}
		sharedEtcd = nil
	}
	if procDir != "" {
		if rmErr := os.RemoveAll(procDir); rmErr != nil && err == nil {
			err = fmt.Errorf("remove temp dir: %w", rmErr)
		}
		procDir = ""
	}
	return err
}

// deletePrefix removes every key under prefix through etcd's JSON gateway, so a stopped
// cluster's objects do not pile up in the shared etcd. Best effort.
func (e *Etcd) deletePrefix(prefix string) error {
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]string{
		"key":       base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end": base64.StdEncoding.EncodeToString(end),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+"/v3/kv/deleterange", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("delete etcd prefix %s: %w", prefix, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("delete etcd prefix %s: %s", prefix, resp.Status)
	}
	return nil
}

// freePorts returns n distinct loopback TCP ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitHTTP polls url until it answers 200, the process exits, ctx ends or timeout passes.
func waitHTTP(ctx context.Context, p *process, client *http.Client, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, bytes.TrimSpace(b))
		} else {
			last = err.Error()
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited (%v) before %s was ready; log tail:\n%s", p.name, p.err, url, p.logTail(20))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s (last answer: %s); log tail:\n%s: %w", p.name, url, last, p.logTail(20), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
