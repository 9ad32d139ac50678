"""Starts NP ranks of a torch script the way torchrun does, without any
launcher of libcoll's: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
MASTER_ADDR and MASTER_PORT (a free port) in each rank's environment, and
no COLL_* variable (libcoll bootstraps through torch's store).

    python3 env_launch.py NP TIMEOUT_S [--init tcp|file] script.py [args...]

--init tcp / file: TORCH_LIBCOLL_INIT_METHOD=tcp://127.0.0.1:PORT or
file:///tmp/... for the script (init_process_group's init_method) instead
of env://. Exits 0 when every rank did; otherwise kills the rest and exits 1
(also after TIMEOUT_S seconds: a hang is a failure, not a wait)."""
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    np, timeout = int(sys.argv[1]), float(sys.argv[2])
    args = sys.argv[3:]
    init = None
    if args[0] == "--init":
        init, args = args[1], args[2:]
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLL_")}
    env.update(WORLD_SIZE=str(np), LOCAL_WORLD_SIZE=str(np), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port))
    store_file = None
    if init == "tcp":
        env["TORCH_LIBCOLL_INIT_METHOD"] = f"tcp://127.0.0.1:{port}"
    elif init == "file":
        fd, store_file = tempfile.mkstemp(prefix="torch-libcoll-store-")
        os.close(fd)
        os.unlink(store_file)  # torch's FileStore makes it
        env["TORCH_LIBCOLL_INIT_METHOD"] = f"file://{store_file}"
    procs = []
    for rank in range(np):
        procs.append(subprocess.Popen([sys.executable] + args,
                                      env=dict(env, RANK=str(rank), LOCAL_RANK=str(rank))))
    deadline = time.time() + timeout
    status = 0
    while procs:
        for p in list(procs):
            code = p.poll()
            if code is None:
                continue
            procs.remove(p)
            if code != 0:
                print(f"env_launch: rank {p.args} ended with status {code}", file=sys.stderr)
                status = 1
        if status or time.time() > deadline:
            if not status:
                print(f"env_launch: ranks still running after {timeout} s: killed", file=sys.stderr)
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
            status = 1
            break
        time.sleep(0.05)
    if store_file and os.path.exists(store_file):
        os.unlink(store_file)
    sys.exit(status)


if __name__ == "__main__":
    main()
