package calico

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/whypending/whypending/internal/proc"
)

func lockStatus(t *testing.T, cl *Client) *LockStatus {
	t.Helper()
	s, err := cl.LockStatus(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// setClusterInfo rewrites ClusterInformation default: datastoreReady and the marker (nil
// removes it).
func setClusterInfo(t *testing.T, cl *Client, ready bool, m *LockMarker) {
	t.Helper()
	obj, err := cl.res(resClusterInfo).Get(t.Context(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := setLockState(obj, ready, m); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.res(resClusterInfo).Update(t.Context(), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLockUnlock(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	// Fields of ClusterInformation we do not model survive lock and unlock.
	obj, _ := w.cl.res(resClusterInfo).Get(ctx, "default", metav1.GetOptions{})
	obj.SetLabels(map[string]string{"keep": "me"})
	w.cl.res(resClusterInfo).Update(ctx, obj, metav1.UpdateOptions{})

	l, err := w.cl.Lock(ctx, LockOptions{Owner: "tester", Operation: "release-ips", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	s := lockStatus(t, w.cl)
	if s.Ready || s.Marker == nil || s.Marker.Owner != "tester" || s.Marker.Operation != "release-ips" || s.Marker.PID != os.Getpid() {
		t.Errorf("after Lock: %+v %+v", s, s.Marker)
	}
	if s.Revision != l.Revision {
		t.Errorf("Lock.Revision = %s, want %s", l.Revision, s.Revision)
	}
	if d := time.Until(s.Marker.Deadline); d < 50*time.Second || d > time.Minute+time.Second {
		t.Errorf("deadline in %s, want about 1m", d)
	}
	// Another owner, and another (live) process of the same owner, are refused.
	if _, err := w.cl.Lock(ctx, LockOptions{Owner: "someone-else"}); !errors.Is(err, ErrDatastoreLocked) {
		t.Errorf("Lock by another owner: %v, want ErrDatastoreLocked", err)
	}
	if _, err := w.cl.Lock(ctx, LockOptions{Owner: "tester"}); !errors.Is(err, ErrDatastoreLocked) {
		t.Errorf("second Lock by a live owner: %v, want ErrDatastoreLocked", err)
	}
	// A live lock is not recovered.
	if rec, err := w.cl.RecoverLocks(ctx, "tester"); rec || err != nil {
		t.Errorf("RecoverLocks(live) = %t, %v", rec, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	s = lockStatus(t, w.cl)
	if !s.Ready || s.Marker != nil {
		t.Errorf("after Unlock: ready %t marker %+v", s.Ready, s.Marker)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("second Unlock: %v", err)
	}
	obj, _ = w.cl.res(resClusterInfo).Get(ctx, "default", metav1.GetOptions{})
	if obj.GetLabels()["keep"] != "me" {
		t.Error("label lost")
	}
	if guid, _, _ := unstructured.NestedString(obj.Object, "spec", "clusterGUID"); guid != "test-guid" {
		t.Errorf("clusterGUID = %q", guid)
	}
}

func TestLockRefusesForeignLocks(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	// calicoctl datastore migrate lock: datastoreReady=false, no marker.
	setClusterInfo(t, w.cl, false, nil)
	if _, err := w.cl.Lock(ctx, LockOptions{Owner: "tester"}); !errors.Is(err, ErrDatastoreLocked) {
		t.Errorf("Lock over a calicoctl lock: %v, want ErrDatastoreLocked", err)
	}
	if rec, err := w.cl.RecoverLocks(ctx, "tester"); rec || err != nil {
		t.Errorf("RecoverLocks(calicoctl lock) = %t, %v; want false, nil", rec, err)
	}
	if lockStatus(t, w.cl).Ready {
		t.Error("foreign lock was undone")
	}
	// An expired marker of another owner is not ours to recover.
	setClusterInfo(t, w.cl, false, &LockMarker{Owner: "other", Deadline: time.Now().Add(-time.Hour)})
	if rec, _ := w.cl.RecoverLocks(ctx, "tester"); rec {
		t.Error("recovered another owner's lock")
	}
	if err := w.cl.ForceUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if s := lockStatus(t, w.cl); !s.Ready || s.Marker != nil {
		t.Errorf("after ForceUnlock: %+v", s)
	}
}

func TestUnlockAfterLockLost(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	l, err := w.cl.Lock(ctx, LockOptions{Owner: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone force-unlocked and another owner locked.
	setClusterInfo(t, w.cl, false, &LockMarker{Owner: "other", Deadline: time.Now().Add(time.Hour)})
	if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Errorf("Unlock = %v, want ErrLockLost", err)
	}
	if lockStatus(t, w.cl).Ready {
		t.Error("Unlock undid another owner's lock")
	}
}

func TestRecoverExpiredLock(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	// Our owner's lock from another host whose deadline passed.
	setClusterInfo(t, w.cl, false, &LockMarker{Owner: "tester", Operation: "release-ips", Identity: proc.Identity{Host: "elsewhere", PID: 1}, Deadline: time.Now().Add(-time.Second)})
	rec, err := w.cl.RecoverLocks(ctx, "tester")
	if err != nil || !rec {
		t.Fatalf("RecoverLocks = %t, %v; want true", rec, err)
	}
	if s := lockStatus(t, w.cl); !s.Ready || s.Marker != nil {
		t.Errorf("after recovery: %+v", s)
	}
	// Before its deadline, a lock from another host is left alone.
	setClusterInfo(t, w.cl, false, &LockMarker{Owner: "tester", Identity: proc.Identity{Host: "elsewhere", PID: 1}, Deadline: time.Now().Add(time.Hour)})
	if rec, _ := w.cl.RecoverLocks(ctx, "tester"); rec {
		t.Error("recovered a live lock of another host")
	}
	// Our own expired lock is taken over by Lock.
	setClusterInfo(t, w.cl, false, &LockMarker{Owner: "tester", Identity: proc.Identity{Host: "elsewhere", PID: 1}, Deadline: time.Now().Add(-time.Second)})
	l, err := w.cl.Lock(ctx, LockOptions{Owner: "tester"})
	if err != nil {
		t.Fatalf("Lock over own expired lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCrashBetweenLockAndUnlock: a process that locked is SIGKILLed before it unlocks; the
// next start of a process with the same owner unlocks.
func TestCrashBetweenLockAndUnlock(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=lock", "KUBECONFIG="+w.c.KubeconfigPath, "WHYPENDING_LOCK_OWNER=crash-owner")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "locked\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q; stderr: %s", line, stderr.String())
	}
	s := lockStatus(t, w.cl)
	if s.Ready || s.Marker == nil || s.Marker.PID != cmd.Process.Pid {
		t.Fatalf("helper's lock: %+v", s)
	}
	// While the helper lives, its lock is not recovered (deadline is an hour away).
	if rec, _ := w.cl.RecoverLocks(ctx, "crash-owner"); rec {
		t.Fatal("recovered the lock of a live process")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if lockStatus(t, w.cl).Ready {
		t.Fatal("datastore unlocked by itself?")
	}

	// The next start: a fresh client of the same owner.
	cl, err := NewClient(ctx, w.c.Config)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := cl.RecoverLocks(ctx, "crash-owner")
	if err != nil || !rec {
		t.Fatalf("RecoverLocks after SIGKILL = %t, %v; want true", rec, err)
	}
	s = lockStatus(t, cl)
	if !s.Ready || s.Marker != nil {
		raw, _ := json.Marshal(s)
		t.Errorf("after recovery: %s", raw)
	}
}

// TestLockMarkerFormat keeps the marker's JSON keys: a marker written by an older binary
// (Host, PID and PIDStart fields of their own) is read the same, and a new one is written with
// the same keys.
func TestLockMarkerFormat(t *testing.T) {
	const old = `{"owner":"whypending-cli:alice@box","operation":"release-ips","acquired":"2026-11-30T21:00:00Z","deadline":"2026-11-30T21:05:00Z","host":"box","pid":4242,"pidStart":987654}`
	var m LockMarker
	if err := json.Unmarshal([]byte(old), &m); err != nil {
		t.Fatal(err)
	}
	if m.Owner != "whypending-cli:alice@box" || m.Host != "box" || m.PID != 4242 || m.Start != 987654 ||
		!m.Deadline.Equal(time.Date(2026, 11, 30, 21, 5, 0, 0, time.UTC)) {
		t.Errorf("old marker read as %+v", m)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != old {
		t.Errorf("marker written as\n%s\nwant\n%s", raw, old)
	}
}
