#!/usr/bin/env python3
"""Time from starting `whypending demo` at a terminal (a pty) to its first prompt, then end it
with EOF (Ctrl-D) or Ctrl-C while clusters start in the background, and count the demo's
control-plane processes (etcd, kube-*) left behind.

Usage: [END=eof|int] [Q="/why-pending NS/POD"] [TMPDIR=fresh-dir] hack/demo-prompt-time.py BINARY demo [--only ...]
Q also times the answer to that first question; a fresh TMPDIR gives cold temp dirs."""
import os, pty, select, subprocess, sys, time, signal

def pgrep(demo_pid):
    # this demo's control-plane processes: their args name its temp dir
    r = subprocess.run(["pgrep", "-f", "whypending-testenv-%d" % demo_pid], capture_output=True, text=True)
    return set(r.stdout.split())

def run(argv, end):
    t0 = time.monotonic()
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    buf = b""
    first = None
    while first is None:
        r, _, _ = select.select([fd], [], [], 120)
        if not r:
            break
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        if b"whypending> " in buf:
            first = time.monotonic() - t0
    answer = None
    q = os.environ.get("Q")
    if q and first is not None:
        os.write(fd, q.encode() + b"\n")
        t2 = time.monotonic()
        buf = b""
        while True:
            r, _, _ = select.select([fd], [], [], 300)
            if not r:
                break
            chunk = os.read(fd, 65536)
            buf += chunk
            if buf.count(b"whypending> ") >= 1 and b"code " in buf:
                answer = time.monotonic() - t2
                break
    else:
        time.sleep(1.5)  # let the background starts get going
    during = len(pgrep(pid))
    if end == "eof":
        os.write(fd, b"\x04")
    else:
        os.write(fd, b"\x03")
    t1 = time.monotonic()
    while True:
        try:
            r, _, _ = select.select([fd], [], [], 60)
            if not r or not os.read(fd, 65536):
                break
        except OSError:
            break
    _, status = os.waitpid(pid, 0)
    exit_s = time.monotonic() - t1
    left = len(pgrep(pid))
    return first, answer, during, exit_s, left, os.waitstatus_to_exitcode(status)

if __name__ == "__main__":
    end = os.environ.get("END", "eof")
    first, answer, during, exit_s, left, code = run(sys.argv[1:], end)
    load = open("/proc/loadavg").read().split()[:3]
    print(f"prompt_after_s={first if first is None else round(first,2)} first_answer_s={answer if answer is None else round(answer,2)} procs_at_end={during} end={end} exit_after_s={exit_s:.2f} exit_code={code} procs_left={left} load={' '.join(load)}")
