"""The persistent Python kernel that runs inside the sealed sandbox (stdlib only; no benchmark imports).

Two processes, so that agent code can neither forge a reply nor keep running between cells:
  * the supervisor (this script's first process, the host's `_kernel_pid`) holds the host's channel, a pair of
    pipes passed on descriptors given in argv (never fds 0/1/2, which the sandbox's init also holds and which
    agent code could reopen through /proc/1/fd). It makes itself non-dumpable (no /proc/PID/fd, mem or ptrace for
    the same uid; the seccomp filter denies ptrace and process_vm_* besides) and never runs agent code;
  * the worker, forked before any agent code runs, closes its copies of the channel and runs every cell in one
    persistent namespace. It reports the end of a cell to the supervisor on a private pipe.

Protocol with the host (framed, see `sandbox/bwrap.py` `_Channel`):
  request  on REQ_FD: MAGIC + 8-byte big-endian length + JSON {"nonce": str, "code": str}
  reply    on REP_FD: MAGIC + 8-byte big-endian length + JSON {"nonce": str (echoed), "stdout": str,
                      "stderr": str, "error": str | null, "truncated": bool, "killed": int, "threads": int,
                      "forged": int}
  put      on REQ_FD: {"nonce": str, "put": [{"path": rel, "dir": true} | {"path": rel, "data": base64, "append": bool}]}
           sent by the host only to a warm sandbox's kernel before the world's first cell (`put_files`); the reply
           is {"nonce": str, "put": entries written, "error": str (only on failure)}, and no cell runs.
The nonce binds a reply to its request, and only the supervisor ever sees it: agent code has no descriptor on
the reply pipe and cannot read the supervisor's memory, so a reply on the host's channel is the supervisor's.
The worker's word is taken for one thing only, when its cell ended ("done" with the cell's sequence number and
its error text). A "done" the agent forges ends its cell early: its code is stopped like any thread left over,
and the reply says `early` when the worker's main thread was not back in read() on its command pipe within a
second (checked through /proc/PID/syscall before the SIGSTOP). A "done" with a wrong sequence number and
unframed bytes on the worker's pipe are counted as `forged`.

Cell end (stops what outlives the cell): once the worker says "done", the supervisor SIGSTOPs it (every thread of
the worker stops; none can resist or catch SIGSTOP), kills every other process of the sandbox's pid namespace but
its init (pid 1), counts the worker's threads besides its main one (`threads`: threads that outlived their cell,
paused until the next cell), and only then replies. The next request SIGCONTs the worker. Between cells and
while the host collects the workspace, no agent code runs at all.

If the worker dies (RLIMIT_CPU's SIGXCPU, the OOM killer, os._exit), the supervisor exits with 128 + signal (or
the worker's exit code), which bwrap passes on to the host exactly as a dead single-process kernel did.

Output: fds 0/1/2 of the worker read /dev/null and write a capture file for output produced *between* cells (the
moment between a cell's end and its SIGSTOP), reported by the next cell under a marker; during a cell, fds 1 and 2
go to the cell's own capture files (subprocesses such as macs3 and samtools are captured too).

Truncation policy: each stream keeps its first HEAD and last TAIL characters with a marker in between saying how
much was cut; only the head and tail are ever read back, so a 600 MB output costs no memory here. A cut stdout is
also copied whole (up to KEEP_WHOLE_BYTES) to /tmp/cell_<n>_stdout.txt, which the marker names, so the agent can
read it back in pieces (a long report printed once would otherwise reach it, and its answer, with the marker inside).
"""
import base64
import ctypes
import io
import json
import os
import re
import selectors
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


KEEP_WHOLE_BYTES = 64 << 20  # a cut stdout is kept whole up to this size, for the agent to read back in pieces


def keep_whole(fd: int, scratch: str, seq: int) -> str | None:
    """Copy a capture that was cut to `scratch`/cell_<seq>_stdout.txt (at most KEEP_WHOLE_BYTES), so the agent can
    read the whole output back in pieces, as it would page a long log; None when it cannot be written (a full /tmp)."""
    path = os.path.join(scratch, f"cell_{seq}_stdout.txt")
    try:
        size = min(os.fstat(fd).st_size, KEEP_WHOLE_BYTES)
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            done = 0
            while done < size:
                chunk = os.pread(fd, min(1 << 20, size - done), done)
                if not chunk:
                    break
                os.write(out, chunk)
                done += len(chunk)
        finally:
            os.close(out)
    except OSError:
        return None
    return path


def note_whole(text: str, path: str | None) -> str:
    """The cut marker, naming the file that holds the whole output when there is one."""
    if path is None:
        return text
    return re.sub(r"\[(\d+) (characters|bytes) truncated\]",
                  lambda m: f"[{m.group(1)} {m.group(2)} truncated; the whole stdout is in {path}]", text, count=1)


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


def kill_strays(keep: set[int]) -> int:
    """SIGKILL every process of this pid namespace but init (1) and `keep`. Returns how many. Reaps nothing: the
    supervisor's only child is the worker, and orphans go to init."""
    keep = keep | {1}
    killed: set[int] = set()
    for _ in range(100):
        live = []
        for p in os.listdir("/proc"):
            if not p.isdigit() or int(p) in keep:
                continue
            pid = int(p)
            try:
                with open(f"/proc/{pid}/stat", "rb") as fh:
                    state = fh.read().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state in (b"Z", b"X"):
                continue
            live.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except OSError:
                pass
        if not live:
            break
        time.sleep(0.01)
    return len(killed)


def _state(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _prctl_dumpable(on: bool) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 1 if on else 0, 0, 0, 0)  # PR_SET_DUMPABLE
    except Exception:  # noqa: BLE001 - no libc prctl: the seccomp filter still denies ptrace
        pass


class _Frames:
    """A framed reader on a pipe agent code can also write to (the worker's "done" pipe, and the worker's command
    pipe, which agent code can reopen for writing through /proc/self/fd): frames only, bounded, garbage counted,
    and a forged header never swallows the real frame after it (a JSON body never holds the raw MAGIC)."""

    def __init__(self, fd: int, max_len: int = 1 << 20):
        self.fd, self.buf, self.junk, self.MAX = fd, bytearray(), 0, max_len

    def next(self) -> dict | None:
        """Block for the next well-formed frame; None at end of input."""
        while True:
            for obj in self.frames(b""):
                return obj
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def frames(self, chunk: bytes):
        self.buf += chunk
        hl = len(MAGIC) + 8
        while True:
            i = self.buf.find(MAGIC)
            if i < 0:
                keep = len(MAGIC) - 1
                if len(self.buf) > keep:
                    self.junk += 1
                    del self.buf[:-keep]
                return
            if i:
                self.junk += 1
                del self.buf[:i]
            if len(self.buf) < hl:
                return
            (n,) = struct.unpack(">Q", bytes(self.buf[len(MAGIC):hl]))
            j = self.buf.find(MAGIC, len(MAGIC), hl + min(n, self.MAX))
            if n > self.MAX or j > 0:
                self.junk += 1
                del self.buf[:j if j > 0 else len(MAGIC)]
                continue
            if len(self.buf) < hl + n:
                return
            body = bytes(self.buf[hl:hl + n])
            del self.buf[:hl + n]
            try:
                obj = json.loads(body)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                yield obj
            else:
                self.junk += 1


_IGNORED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
            "SIGTSTP", "SIGTTIN", "SIGTTOU", "SIGPIPE", "SIGXFSZ")


def worker(cmd_fd: int, done_fd: int, ambient: int, out_fd: int, err_fd: int, saved: dict) -> None:  # noqa: C901
    """Run cells forever: read {"seq", "code"} from the supervisor, run it, answer {"seq", "error"}."""
    for num, handler in saved.items():
        try:
            signal.signal(num, handler)
        except (OSError, ValueError, TypeError):
            pass
    _prctl_dumpable(True)
    me = os.getpid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(ambient, 1)
    os.dup2(ambient, 2)
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(os.fdopen(1, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(os.fdopen(2, "wb", closefd=False), encoding="utf-8", line_buffering=True)
    env: dict = {"__name__": "__main__"}
    cmds = _Frames(cmd_fd, MAX_REQUEST)
    while True:
        req = cmds.next()
        if req is None:
            os._exit(0)
        seq, code = req.get("seq"), req.get("code", "")
        while True:  # reap the children the supervisor killed at the last cell's end (we were stopped then)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001
            pass
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
            if os.getpid() != me:  # a forked child of the cell must never answer for the worker
                os._exit(1)
            for s in (cell_out, cell_err):
                try:
                    s.flush()
                except Exception:  # noqa: BLE001
                    pass
            os.dup2(ambient, 1)
            os.dup2(ambient, 2)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        if error:
            error, _ = truncate(error)
        send(done_fd, {"seq": seq, "error": error})


def put_files(entries) -> dict:
    """Write the world's files into /workspace (a warm sandbox's, before any agent cell): the host's `put` request,
    a list of {"path": relative, "dir": true} or {"path": relative, "data": base64, "append": bool}. Folders 0755 and
    files 0644 of this uid, created with O_EXCL|O_NOFOLLOW from their parent folder's descriptor (never through a
    link); a chunk with "append" extends the file the previous entry created."""
    made = 0
    dirs = {"": os.open("/workspace", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)}
    try:
        for e in entries:
            parts = str(e.get("path", "")).split("/")
            if any(part in ("", ".", "..") or "\0" in part for part in parts):
                raise ValueError(f"bad path {e.get('path')!r}")
            parent, name = "/".join(parts[:-1]), parts[-1]
            if parent not in dirs:  # made by an earlier request: walk to it, never through a link
                at = ""
                for part in parts[:-1]:
                    nxt = f"{at}/{part}" if at else part
                    if nxt not in dirs:
                        dirs[nxt] = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirs[at])
                    at = nxt
            pfd = dirs[parent]
            if e.get("dir"):
                os.mkdir(name, 0o755, dir_fd=pfd)
                dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
                os.fchmod(dfd, 0o755)
                dirs["/".join(parts)] = dfd
            else:
                data = base64.b64decode(e.get("data", ""), validate=True)
                flags = os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if e.get("append") else os.O_CREAT | os.O_EXCL)
                fd = os.open(name, flags, 0o644, dir_fd=pfd)
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    os.fchmod(fd, 0o644)
                finally:
                    os.close(fd)
            made += 1
        return {"put": made}
    except Exception as exc:  # noqa: BLE001 - reported to the host, which falls back to a cold start
        return {"put": made, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        for fd in dirs.values():
            os.close(fd)


def _awaits(wpid: int, fd: int, wait_s: float = 1.0) -> bool:
    """Whether the worker's main thread is back in read() on its command pipe, i.e. its cell really returned (a
    "done" forged by agent code mid-cell leaves it elsewhere). True when /proc/PID/syscall cannot be read."""
    want = f"0 {hex(fd)} ".encode()  # x86_64 read(2) is 0; elsewhere the check is skipped
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(f"/proc/{wpid}/syscall", "rb") as fh:
                line = fh.read()
        except OSError:
            return True
        if os.uname().machine != "x86_64" or line.startswith(want):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)


def _exit_like(status: int) -> None:
    """Leave as the worker did, so bwrap's exit status tells the host what killed it."""
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) and os.WEXITSTATUS(status) else 1)


def main() -> None:
    # RLIMIT_CPU must end a runaway cell with SIGXCPU even when the harness inherited an ignored disposition
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    req_in, rep_in = int(sys.argv[1]), int(sys.argv[2])
    req_fd = os.dup(req_in)  # non-inheritable copies; the inherited numbers are closed
    rep_fd = os.dup(rep_in)
    os.close(req_in)
    os.close(rep_in)
    _prctl_dumpable(False)
    saved = {}
    for name in _IGNORED:
        num = getattr(signal, name, None)
        if num is not None:
            saved[num] = signal.getsignal(num)
            signal.signal(num, signal.SIG_IGN)  # agent code may signal us; only SIGKILL/SIGSTOP stop us
    scratch = os.environ.get("KERNEL_SCRATCH", tempfile.gettempdir())
    # created once: a full /tmp later must not stop the kernel from answering
    ambient, out_fd, err_fd = capture_file(scratch), capture_file(scratch), capture_file(scratch)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    cmd_r, cmd_w = os.pipe()
    done_r, done_w = os.pipe()
    wpid = os.fork()
    if wpid == 0:
        try:
            for fd in (req_fd, rep_fd, cmd_w, done_r):
                os.close(fd)
            worker(cmd_r, done_w, ambient, out_fd, err_fd, saved)
        finally:
            os._exit(1)
    cmd_fd_in_worker = cmd_r
    os.close(cmd_r)
    os.close(done_w)
    me = os.getpid()
    pidfd = os.pidfd_open(wpid)
    wpipe = _Frames(done_r)
    send(rep_fd, {"nonce": "ready", "ready": True, "pid": me, "worker": wpid})
    seq = 0
    while True:
        req = read_request(req_fd)
        if req is None:
            os.kill(wpid, signal.SIGKILL)
            return
        nonce, code = str(req.get("nonce", "")), req.get("code", "")
        if "put" in req:  # the host fills a warm sandbox's /workspace; the worker stays stopped
            send(rep_fd, {"nonce": nonce, **put_files(req["put"])})
            continue
        seq += 1
        between, t0 = read_capture(ambient)
        os.ftruncate(ambient, 0)
        os.ftruncate(out_fd, 0)
        os.ftruncate(err_fd, 0)
        junk0, forged = wpipe.junk, 0
        try:
            os.kill(wpid, signal.SIGCONT)
            send(cmd_w, {"seq": seq, "code": code})
        except OSError:
            pass  # the worker is gone: its status is read below
        done = None
        sel = selectors.DefaultSelector()
        sel.register(done_r, selectors.EVENT_READ, "done")
        sel.register(pidfd, selectors.EVENT_READ, "dead")
        while done is None:
            for key, _ in sel.select():
                if key.data == "dead":
                    _, status = os.waitpid(wpid, 0)
                    _exit_like(status)
                chunk = os.read(done_r, 1 << 16)
                if not chunk:
                    _, status = os.waitpid(wpid, 0)
                    _exit_like(status)
                for msg in wpipe.frames(chunk):
                    if msg.get("seq") == seq and done is None:
                        done = msg
                    else:
                        forged += 1
        sel.close()
        early = not _awaits(wpid, cmd_fd_in_worker)
        try:
            os.kill(wpid, signal.SIGSTOP)  # the cell has ended: nothing of it runs until the next request
        except OSError:
            pass
        pause, stop_by = 0.0001, time.monotonic() + 1.0  # SIGSTOP lands within microseconds: poll finely, then back off
        while _state(wpid) not in (b"T", b"t", b"Z", b"X", None) and time.monotonic() < stop_by:
            time.sleep(pause)
            pause = min(pause * 2, 0.005)
        killed = kill_strays({me, wpid})
        try:
            threads = max(0, len(os.listdir(f"/proc/{wpid}/task")) - 1)
        except OSError:
            threads = 0
        stdout, t1 = read_capture(out_fd)
        stderr, t2 = read_capture(err_fd)
        if t1:
            stdout = note_whole(stdout, keep_whole(out_fd, scratch, seq))
        os.ftruncate(out_fd, 0)
        os.ftruncate(err_fd, 0)
        if between:
            stdout = f"[output written between cells]\n{between}\n[this cell]\n{stdout}"
        error = done.get("error")
        error = None if error is None else truncate(str(error))[0]
        send(rep_fd, {"nonce": nonce, "stdout": stdout, "stderr": stderr, "error": error,
                      "truncated": t0 or t1 or t2, "killed": killed, "threads": threads,
                      "forged": forged + (wpipe.junk - junk0), "early": early})


if __name__ == "__main__":
    main()
