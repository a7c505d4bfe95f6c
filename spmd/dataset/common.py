"""paddle.dataset.common: where the data set files live, how they are checked, and how a
reader's samples are split into files for a cluster.

Every data set module reads its files from `DATA_HOME/<module>/<file>`, DATA_HOME being Paddle's
cache folder `~/.cache/paddle/dataset`, so files Paddle downloaded once are used as they are.
Reassign `spmd.dataset.common.DATA_HOME` (as with paddle.dataset.common.DATA_HOME) to read them
from elsewhere, e.g. a shared folder on a cluster; it is looked up at every call.

spmd never downloads: there is no internet on many clusters. `download` returns the cached
path, and when the file is missing raises `spmd.errors.PreconditionError` (a RuntimeError, as
Paddle's failed download) naming the file, the folder, the URL and the md5 Paddle expects.
When the file is there but its md5 differs from Paddle's, `download` warns once per file
(`DatasetMD5Warning`) and goes on with it (Paddle would download it again): a data set
re-packed on purpose still works, and a truncated copy is named before it fails to parse.

>>> import spmd.dataset.common as common
>>> common.DATA_HOME.endswith("dataset")
True
"""
from __future__ import annotations

import glob
import hashlib
import os
import pickle
import tarfile
import warnings

from ..errors import InvalidArgumentError, PreconditionError
from ._restricted_pickle import restricted_load

__all__ = ["DATA_HOME", "DatasetMD5Warning", "cluster_files_reader", "download", "md5file",
           "split"]

DATA_HOME = os.path.expanduser("~/.cache/paddle/dataset")

# (path, size, mtime) -> md5: readers call download() at every pass; hashing a 160 MB archive
# each time would cost more than reading it
_MD5_CACHE: dict[tuple, str] = {}


class DatasetMD5Warning(UserWarning):
    """A cached data set file's md5 differs from the one Paddle expects.

    >>> import warnings
    >>> warnings.simplefilter("error", DatasetMD5Warning)  # make it an error
    """


def md5file(fname: str) -> str:
    """The md5 hex digest of a file's bytes.

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     _ = f.write(b"abc")
    >>> md5file(f.name)
    '900150983cd24fb0d6963f7d28e17f72'
    """
    digest = hashlib.md5()
    with open(fname, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, module_name: str, md5sum: str, save_name: str | None = None) -> str:
    """The path of a data set file in the cache folder: DATA_HOME/module_name/<name>, the name
    being `save_name` or the last part of `url`. Nothing is fetched (see the module docstring).

    >>> download("https://example.com/x.gz", "nothing", "0" * 32)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    spmd.errors.PreconditionError: paddle.dataset.nothing: the data file x.gz is not in ...
    """
    name = save_name if save_name is not None else url.split("/")[-1]
    folder = os.path.join(DATA_HOME, module_name)
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        raise PreconditionError(
            f"paddle.dataset.{module_name}: the data file {name} is not in the cache folder "
            f"{folder} and spmd never downloads (no internet is assumed). Paddle fetches it from "
            f"{url} (md5 {md5sum}). Fetch it on a machine with internet access and copy it to "
            f"{path} (mkdir -p {folder}; wget -O {path} '{url}'; md5sum {path}), or set "
            "spmd.dataset.common.DATA_HOME to a folder that holds "
            f"{module_name}/{name}")
    stat = os.stat(path)
    key = (path, stat.st_size, stat.st_mtime_ns)
    if key not in _MD5_CACHE:
        _MD5_CACHE[key] = got = md5file(path)
        if got != md5sum:
            warnings.warn(
                f"paddle.dataset.{module_name}: {path} has md5 {got}, Paddle expects {md5sum} "
                f"(the file from {url}). Using it anyway; if reading it fails, the copy is "
                "probably truncated: copy the original file again", DatasetMD5Warning,
                stacklevel=2)
    return path


def open_tar(path: str) -> tarfile.TarFile:
    """Open a (possibly compressed) tar archive of a data set, with an error that names it.

    >>> with open_tar(download(URL, "imdb", MD5)) as tar:   # doctest: +SKIP
    ...     names = tar.getnames()
    """
    try:
        return tarfile.open(path)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise InvalidArgumentError(
            f"cannot read the archive {path}: {exc}. The file is damaged or truncated; copy "
            "the original file again") from exc


def tar_member(tar: tarfile.TarFile, name: str, path: str):
    """A member of a data set archive as a binary file object; a clear error when absent.

    >>> f = tar_member(tar, "wmt16/train", path)   # doctest: +SKIP
    """
    try:
        member = tar.getmember(name)
    except KeyError:
        shown = ", ".join(tar.getnames()[:8])
        raise InvalidArgumentError(
            f"the archive {path} has no member {name} (it has: {shown}, ...); it is not the "
            "data set file Paddle expects: copy the original file") from None
    return tar.extractfile(member)


def split(reader, line_count: int, suffix: str = "%05d.pickle", dumper=None):
    """Write the samples of `reader` (a reader creator) into files of `line_count` samples:
    `suffix % 0`, `suffix % 1`, ... Each file gets one call `dumper(list_of_samples, f)`.

    The default dumper is pickle.dump into a file opened "wb" (what `cluster_files_reader`
    loads back, restricted to plain data); a custom dumper gets a file opened "w", as in Paddle.

    >>> import os, tempfile
    >>> prefix = os.path.join(tempfile.mkdtemp(), "part-%02d.pickle")
    >>> split(lambda: iter(range(5)), 2, prefix)
    >>> list(cluster_files_reader(prefix.replace("%02d", "*"), 1, 0)())
    [0, 1, 2, 3, 4]
    """
    if dumper is not None and not callable(dumper):
        raise TypeError(f"split: dumper must be callable, got {type(dumper).__name__}")
    if not isinstance(line_count, int) or line_count < 1:
        raise InvalidArgumentError(f"split: line_count must be a positive int, got {line_count!r}")
    mode = "wb" if dumper is None else "w"
    dump = pickle.dump if dumper is None else dumper
    lines: list = []
    index = 0
    for sample in reader():
        lines.append(sample)
        if len(lines) == line_count:
            with open(suffix % index, mode) as f:
                dump(lines, f)
            lines = []
            index += 1
    if lines:
        with open(suffix % index, mode) as f:
            dump(lines, f)


def cluster_files_reader(files_pattern: str, trainer_count: int, trainer_id: int, loader=None):
    """A reader over the files matching `files_pattern` (sorted) that this trainer owns: file i
    belongs to trainer `i % trainer_count`. Each file is read with `loader(f)`, which returns
    a list of samples.

    The default loader unpickles files `split` wrote (opened "rb"), refusing anything but
    plain containers, str/bytes, numbers and numpy arrays; a custom loader gets a file opened
    "r", as in Paddle.

    >>> reader = cluster_files_reader("/nonexistent/*.pickle", trainer_count=2, trainer_id=0)
    >>> list(reader())
    []
    """
    if loader is not None and not callable(loader):
        raise TypeError(f"cluster_files_reader: loader must be callable, got "
                        f"{type(loader).__name__}")

    def reader():
        files = sorted(glob.glob(files_pattern))
        for idx, name in enumerate(files):
            if idx % trainer_count != trainer_id:
                continue
            if loader is None:
                with open(name, "rb") as f:
                    samples = restricted_load(f, name, encoding="ASCII")
            else:
                with open(name) as f:
                    samples = loader(f)
            yield from samples

    return reader
