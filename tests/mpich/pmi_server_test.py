#!/usr/bin/env python3
"""A rank facing a PMI-1 server that misbehaves (libcoll/bootstrap/pmi_bootstrap.cpp).

usage: pmi_server_test.py LAUNCH_CHECK

Runs launch_check (tests/ompi) with PMI_FD naming one end of a socketpair
whose other end this script answers, as Hydra would or as a broken or
hostile server might. Each case must end within its bound with the status
and the message it names: a clear error, never a hang or a crash. The good
case is a whole job of one rank: it must succeed and say `finalize` when
the process exits (Hydra kills a job whose process exits without it).
"""
import os
import socket
import subprocess
import sys
import threading

CHECK = sys.argv[1]
TIMEOUT_S = 3  # COLL_TIMEOUT for the rank: the silent server's bound


def hydra_answers(request):
    """What Hydra answers to one request line (for a job of one)."""
    if request.startswith("cmd=init"):
        return "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
    if request == "cmd=get_maxes":
        return "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"
    if request == "cmd=get_my_kvsname":
        return "cmd=my_kvsname kvsname=kvs_test_0"
    if request.startswith("cmd=put"):
        return "cmd=put_result rc=0 msg=success"
    if request == "cmd=barrier_in":
        return "cmd=barrier_out"
    if request == "cmd=finalize":
        return "cmd=finalize_ack"
    return None


def serve(sock, mode, seen):
    stream = sock.makefile("rwb")
    try:
        answer_all(stream, mode, seen)
    except OSError:  # the rank closed its end: the case is over
        pass
    stream.close()
    sock.close()


def answer_all(stream, mode, seen):
    for raw in stream:
        request = raw.decode(errors="replace").rstrip("\n")
        seen.append(request)
        if mode == "good":
            answer = hydra_answers(request)
            if request.startswith("cmd=get kvsname"):
                answer = "cmd=get_result rc=-1 msg=no_such_key value=unknown"
        elif mode == "garbage":
            answer = "\x00\x01garbage\x7f"
        elif mode == "endless":  # a line that never ends
            stream.write(b"cmd=response_to_init " + b"x" * 10000)
            stream.flush()
            continue
        elif mode == "refuse":
            answer = "cmd=response_to_init rc=-1 msg=no_way"
        elif mode == "wrong-answer":
            answer = "cmd=barrier_out"
        elif mode == "close":
            break
        elif mode == "silent":
            continue
        elif mode == "no-barrier":  # the other rank never comes
            if request == "cmd=barrier_in":
                continue
            answer = hydra_answers(request)
        elif mode == "tiny-values":
            answer = hydra_answers(request)
            if request == "cmd=get_maxes":
                answer = "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=40"
        if answer is None:
            break
        stream.write((answer + "\n").encode())
        stream.flush()


def run(mode, size="1", env_extra=None):
    mine, theirs = socket.socketpair()
    env = dict(os.environ, PMI_FD=str(theirs.fileno()), PMI_RANK="0", PMI_SIZE=size,
               COLL_TIMEOUT=str(TIMEOUT_S))
    for name in ("COLL_BOOTSTRAP", "PMIX_RANK", "PMIX_NAMESPACE", "PMIX_SERVER_URI2"):
        env.pop(name, None)
    env.update(env_extra or {})
    seen = []
    server = threading.Thread(target=serve, args=(mine, mode, seen))
    server.start()
    proc = subprocess.run([CHECK, "pmi", size], env=env, pass_fds=[theirs.fileno()],
                          capture_output=True, text=True, timeout=60)
    theirs.close()
    server.join(timeout=10)
    return proc, seen


failures = 0


def expect(mode, status, message, **kwargs):
    global failures
    proc, seen = run(mode, **kwargs)
    out = proc.stdout + proc.stderr
    ok = proc.returncode == status and message in out
    print(f"{'ok' if ok else 'FAIL'}: {mode}: exit {proc.returncode}: {out.strip()[:300]}")
    if not ok:
        print(f"  expected exit {status} and '{message}'")
        failures += 1
    return seen


seen = expect("good", 0, "launch_check rank 0 of 1: bootstrap pmi")
if "cmd=finalize" not in seen:
    print("FAIL: good: the rank exited without saying finalize:", seen)
    failures += 1
expect("garbage", 1, "answered init with a line that is not PMI-1")
expect("endless", 1, "sent over 4096 bytes without a newline")
expect("refuse", 1, "refused init: rc=-1 msg=no_way")
expect("wrong-answer", 1, "answered init with cmd=barrier_out, not cmd=response_to_init")
expect("close", 1, "COLL_ERR_PEER_LOST")
expect("silent", 1, f"did not answer init within {TIMEOUT_S} s")
expect("tiny-values", 1, "too short to carry a blob (vallen_max=40)")
# A job of two whose other rank never comes: the barrier times out.
expect("no-barrier", 1, "a rank did not reach the bootstrap's barrier", size="2")

# Hydra's -pmi-port mode (PMI_PORT and PMI_ID, no PMI_FD, no size): refused
# at once, never a silent world of one.
env = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_", "COLL_BOOT"))}
env.update(PMI_PORT="localhost:1", PMI_ID="0")
proc = subprocess.run([CHECK, "pmi", "2"], env=env, capture_output=True, text=True, timeout=60)
out = proc.stdout + proc.stderr
ok = proc.returncode == 1 and "PMI_PORT is set" in out
print(f"{'ok' if ok else 'FAIL'}: pmi-port: exit {proc.returncode}: {out.strip()[:300]}")
failures += 0 if ok else 1

print(f"pmi_server_test: {failures} failed")
sys.exit(1 if failures else 0)
