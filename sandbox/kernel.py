"""The persistent Python kernel that runs inside the sealed sandbox (stdlib only; no benchmark imports).

Protocol (framed, so agent code can neither forge nor desync it; see `sandbox/bwrap.py` `_Channel`):
  request  on stdin:  MAGIC + 8-byte big-endian length + JSON {"nonce": str, "code": str}
  reply    on stdout: MAGIC + 8-byte big-endian length + JSON {"nonce": str (echoed), "stdout": str,
                      "stderr": str, "error": str | null, "truncated": bool, "killed": int}
The host sends a fresh random nonce with every request and accepts only the reply that echoes it; anything else
on the channel (bytes agent code writes to the fd, forged or stale frames) is discarded and recorded. Agent code
runs in this process and can read its memory, so the nonce is not a secret: it only binds a reply to its request,
which is what keeps later cells in step whatever a cell did.

At start the kernel moves the channel to private close-on-exec descriptors and points fds 0/1/2 away from it:
0 reads /dev/null, 1 and 2 write to a capture file for output produced *between* cells (background threads),
which the next cell's stdout reports under a marker. During a cell, fds 1 and 2 go to the cell's own capture
files (subprocesses such as macs3 and samtools are captured too). After each cell every other process of the
sandbox's pid namespace (except its init, pid 1) is killed, so nothing keeps running unrecorded between cells.

Truncation policy: each stream keeps its first HEAD and last TAIL characters with a marker in between saying how
much was cut; only the head and tail are ever read back, so a 600 MB output costs no memory here.
"""
import io
import json
import os
import signal
import struct
import sys
import tempfile
import time
import traceback

HEAD = int(os.environ.get("KERNEL_OUTPUT_HEAD", "6000"))
TAIL = int(os.environ.get("KERNEL_OUTPUT_TAIL", "2000"))
MAGIC = b"\x00\x1eDISCERN-KERNEL-FRAME\x1f"
MAX_REQUEST = 64 << 20


def truncate(text: str) -> tuple[str, bool]:
    if len(text) <= HEAD + TAIL:
        return text, False
    cut = len(text) - HEAD - TAIL
    return f"{text[:HEAD]}\n... [{cut} characters truncated] ...\n{text[-TAIL:]}", True


def read_capture(fd: int) -> tuple[str, bool]:
    """Head and tail of a capture file, reading at most 4*(HEAD+TAIL) bytes of it."""
    size = os.fstat(fd).st_size
    budget = max(4 * (HEAD + TAIL), 1 << 20)
    if size <= budget:
        return truncate(os.pread(fd, size, 0).decode("utf-8", errors="replace"))
    head = os.pread(fd, 4 * HEAD, 0).decode("utf-8", errors="replace")[:HEAD]
    tail = os.pread(fd, 4 * TAIL, size - 4 * TAIL).decode("utf-8", errors="replace")[-TAIL:]
    cut = size - len(head.encode()) - len(tail.encode())
    return f"{head}\n... [{cut} bytes truncated] ...\n{tail}", True


def capture_file(scratch: str) -> int:
    """An unlinked append-only file: writes always land at its end, even after it is truncated to 0."""
    path = os.path.join(scratch, f".kernel-{os.getpid()}-{os.urandom(8).hex()}")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
    os.unlink(path)
    return fd


def read_exact(fd: int, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_request(fd: int) -> dict | None:
    """Next well-formed request; None at end of input."""
    while True:
        head = read_exact(fd, len(MAGIC) + 8)
        if head is None:
            return None
        if not head.startswith(MAGIC):
            continue  # only the host writes here; resynchronise on garbage rather than die
        (n,) = struct.unpack(">Q", head[len(MAGIC):])
        if n > MAX_REQUEST:
            return None
        body = read_exact(fd, n)
        if body is None:
            return None
        try:
            req = json.loads(body)
        except ValueError:
            continue
        if isinstance(req, dict):
            return req


def send(fd: int, obj: dict) -> None:
    body = json.dumps(obj).encode()
    data = MAGIC + struct.pack(">Q", len(body)) + body
    while data:
        n = os.write(fd, data)
        data = data[n:]


def kill_strays() -> int:
    """SIGKILL every process of this pid namespace but init (1) and the kernel; reap our children. Returns count."""
    me = os.getpid()
    killed: set[int] = set()
    for _ in range(100):
        others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        live = []
        for pid in others:
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if state in (b"Z", b"X"):
                continue
            live.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not live:
            break
        time.sleep(0.01)
    return len(killed)


def main() -> None:
    # RLIMIT_CPU must end a runaway cell with SIGXCPU even when the harness inherited an ignored disposition
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    kernel_pid = os.getpid()
    req_fd = os.dup(0)  # non-inheritable: subprocesses never hold the channel
    proto_fd = os.dup(1)
    scratch = os.environ.get("KERNEL_SCRATCH", tempfile.gettempdir())
    # created once: a full /tmp later must not stop the kernel from answering
    ambient, out_fd, err_fd = capture_file(scratch), capture_file(scratch), capture_file(scratch)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(ambient, 1)
    os.dup2(ambient, 2)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    env: dict = {"__name__": "__main__"}
    send(proto_fd, {"nonce": "ready", "ready": True, "pid": kernel_pid})
    while True:
        req = read_request(req_fd)
        if req is None:
            return
        nonce = str(req.get("nonce", ""))
        code = req.get("code", "")
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
        between, t0 = read_capture(ambient)
        os.ftruncate(ambient, 0)
        os.ftruncate(out_fd, 0)
        os.ftruncate(err_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        cell_out = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
        cell_err = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), encoding="utf-8", line_buffering=True)
        sys.stdout, sys.stderr = cell_out, cell_err
        error = None
        try:
            compiled = compile(str(code), "<cell>", "exec")
            exec(compiled, env)
        except SystemExit as exc:
            error = f"SystemExit({exc.code}) — the kernel keeps running"
        except BaseException as exc:  # noqa: BLE001 - any error is the agent's to see
            tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # hide the kernel's own frame
            error = "".join(traceback.format_exception(type(exc), exc, tb, limit=8))
        finally:
            if os.getpid() != kernel_pid:  # a forked child of the cell must never answer for the kernel
                os._exit(1)
            for s in (cell_out, cell_err):
                try:
                    s.flush()
                except Exception:  # noqa: BLE001
                    pass
            os.dup2(ambient, 1)
            os.dup2(ambient, 2)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        killed = kill_strays()
        stdout, t1 = read_capture(out_fd)
        stderr, t2 = read_capture(err_fd)
        os.ftruncate(out_fd, 0)
        os.ftruncate(err_fd, 0)
        if between:
            stdout = f"[output written between cells]\n{between}\n[this cell]\n{stdout}"
        if error:
            error, _ = truncate(error)
        send(proto_fd, {"nonce": nonce, "stdout": stdout, "stderr": stderr, "error": error,
                        "truncated": t0 or t1 or t2, "killed": killed})


if __name__ == "__main__":
    main()
