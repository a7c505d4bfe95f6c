"""Reading one dataset file as fluid does: `cat FILE | PIPE_COMMAND` run by the shell, one
subprocess per file (`zcat` for a .gz file; `DOWNLOAD_CMD FILE | PIPE_COMMAND` when a download
command is set), and each line of its output parsed into a record.

Remote file systems are not read: a `hdfs:`/`afs:` path is refused with the reason (spmd has no
Hadoop client; set_download_cmd, or copying the files locally, reads them). A pipe command that
fails is an error naming the file, the command, its exit status and the end of its stderr.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import threading

from ..errors import InvalidArgumentError, PreconditionError
from .chunks import parse_chunk

CHUNK_LINES = 4096  # lines parsed together (one numpy conversion per slot)

_REMOTE = ("hdfs:", "afs:")


def _shell_command(path: str, pipe_command: str, download_cmd: str | None) -> str:
    if download_cmd:
        head = f"{download_cmd} {shlex.quote(path)}"
    elif path.startswith(_REMOTE):
        raise PreconditionError(
            f"Dataset: cannot read {path!r}: spmd reads local files only (it has no Hadoop "
            f"client, so set_hdfs_config is not acted on); copy the files locally (hadoop fs "
            f"-get) and list those, or set_download_cmd('hadoop fs -cat') to read each file "
            f"through that command")
    else:
        if not os.path.isfile(path):
            raise InvalidArgumentError(
                f"Dataset: file {path!r} of the filelist does not exist (cwd {os.getcwd()}); "
                f"give set_filelist existing paths")
        head = f"{'zcat' if path.endswith('.gz') else 'cat'} {shlex.quote(path)}"
    return f"{head} | {pipe_command}" if pipe_command and pipe_command != "cat" else head


def tables_of(path: str, slots, pipe_command: str = "cat", drop_zeros: bool = False,
              download_cmd: str | None = None):
    """Yield the records of file `path` (see the module docstring) as RecordTables of up to
    CHUNK_LINES records."""
    command = _shell_command(path, pipe_command, download_cmd)
    proc = subprocess.Popen(["/bin/sh", "-c", command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, bufsize=1 << 16)
    stderr: list[str] = []
    drain = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)
    drain.start()  # a chatty command must not block on a full stderr pipe
    lineno, chunk = 0, []

    def where(n):
        return _where(path, pipe_command, n)

    try:
        for lineno, line in enumerate(proc.stdout, 1):
            chunk.append((lineno, line))  # an empty line is skipped: it holds no slots
            if len(chunk) == CHUNK_LINES:
                yield parse_chunk(chunk, slots, where, drop_zeros)
                chunk = []
        if chunk:
            yield parse_chunk(chunk, slots, where, drop_zeros)
    finally:
        proc.stdout.close()
        if proc.poll() is None and lineno and _stopped_early(proc):
            proc.kill()
        status = proc.wait()
        drain.join(timeout=5)
    if status != 0:
        tail = "".join(stderr)[-2000:].strip()
        raise PreconditionError(
            f"Dataset: reading {path!r} through {command!r} failed: exit status {status} after "
            f"{lineno} line(s); its stderr ends:\n{tail or '(empty)'}\nRun the command by hand "
            f"to see why (set_pipe_command sets the part after the pipe)")


def _stopped_early(proc) -> bool:
    """Whether the reader left before the command finished (an error in a record)."""
    try:
        proc.wait(timeout=0.5)
        return False
    except subprocess.TimeoutExpired:
        return True


def _where(path: str, pipe_command: str, lineno: int) -> str:
    through = "" if pipe_command in ("", "cat") else f" (the output of {pipe_command!r})"
    return f"file {path!r}{through}, line {lineno}"
