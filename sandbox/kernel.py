"""The persistent Python kernel that runs inside the sealed sandbox (stdlib only; no benchmark imports).

Protocol: one JSON object per line on stdin, {"code": "..."}; one JSON reply per line on the protocol fd,
{"stdout": str, "stderr": str, "error": str | null, "truncated": bool}. State (globals) persists between cells.
Cell output is captured at the file-descriptor level, so subprocesses (macs3, samtools) are captured too.

Truncation policy: each stream keeps its first HEAD and last TAIL characters with a marker in between saying how
many characters were cut, so an agent always sees how a long output started and how it ended.
"""
import io
import json
import os
import sys
import tempfile
import traceback

HEAD = int(os.environ.get("KERNEL_OUTPUT_HEAD", "6000"))
TAIL = int(os.environ.get("KERNEL_OUTPUT_TAIL", "2000"))


def truncate(text: str) -> tuple[str, bool]:
    if len(text) <= HEAD + TAIL:
        return text, False
    cut = len(text) - HEAD - TAIL
    return f"{text[:HEAD]}\n... [{cut} characters truncated] ...\n{text[-TAIL:]}", True


def main() -> None:
    kernel_pid = os.getpid()
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    cmd_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    scratch = os.environ.get("KERNEL_SCRATCH", tempfile.gettempdir())
    src = os.environ.get("KERNEL_COPY_FROM")
    if src and os.path.isdir(src):
        import shutil

        shutil.copytree(src, os.getcwd(), dirs_exist_ok=True)
    env: dict = {"__name__": "__main__"}
    proto.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in cmd_in:
        try:
            req = json.loads(line)
        except json.JSONDecodeError:
            continue
        code = req.get("code", "")
        out_f = tempfile.TemporaryFile(dir=scratch)
        err_f = tempfile.TemporaryFile(dir=scratch)
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_f.fileno(), 1)
        os.dup2(err_f.fileno(), 2)
        sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", line_buffering=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), encoding="utf-8", line_buffering=True)
        error = None
        try:
            compiled = compile(code, "<cell>", "exec")
            exec(compiled, env)
        except SystemExit as exc:
            error = f"SystemExit({exc.code}) — the kernel keeps running"
        except BaseException as exc:  # noqa: BLE001 - any error is the agent's to see
            tb = exc.__traceback__.tb_next if exc.__traceback__ else None  # hide the kernel's own frame
            error = "".join(traceback.format_exception(type(exc), exc, tb, limit=8))
        finally:
            if os.getpid() != kernel_pid:  # a forked child of the cell must never answer for the kernel
                os._exit(1)
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:  # noqa: BLE001
                pass
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        out_f.seek(0)
        err_f.seek(0)
        stdout, t1 = truncate(out_f.read().decode("utf-8", errors="replace"))
        stderr, t2 = truncate(err_f.read().decode("utf-8", errors="replace"))
        out_f.close()
        err_f.close()
        if error:
            error, _ = truncate(error)
        proto.write(json.dumps({"stdout": stdout, "stderr": stderr, "error": error, "truncated": t1 or t2}) + "\n")


if __name__ == "__main__":
    main()
