"""fluid 1.8's datasets: `DatasetFactory().create_dataset(kind)`, `InMemoryDataset`,
`QueueDataset`, `FileInstantDataset`.

A dataset reads MultiSlot text files (each line a record: per slot a count then the values)
through a pipe command, and hands batches to `Executor.train_from_dataset` /
`infer_from_dataset` and `DataLoader.from_dataset`. QueueDataset streams its files (thread i
reads files i, i + T, ...); InMemoryDataset loads them (load_into_memory), can shuffle them
locally or across trainers (global_shuffle over MPI), and splits them in T contiguous shares,
one per thread. Each thread batches its own share; the executor runs the threads' batches in
turn (thread 0's first, thread 1's first, ...), a Hogwild order fixed so that runs repeat.

>>> import spmd.fluid as fluid
>>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
>>> dataset.set_batch_size(32); dataset.set_thread(1)
"""
from __future__ import annotations

import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import InvalidArgumentError, PreconditionError
from . import shuffle
from .desc import DataFeedDesc, desc_text
from .slots import slot_of
from .source import tables_of
from .table import RecordTable, batches


def _positive_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise InvalidArgumentError(f"Dataset.{what} takes a positive int, got {value!r}")
    return int(value)


class DatasetBase:
    """What every dataset has: the files, the slots, the pipe command, batch size, threads."""

    _feed_name = "MultiSlotDataFeed"
    _drops_zeros = False  # the InMemory feed's reading (see spmd.datafeed.parse)

    def __init__(self):
        self.proto_desc = DataFeedDesc(name=self._feed_name)
        self.thread_num = 1
        self.filelist: list[str] = []
        self.fs_name = self.fs_ugi = None
        self.download_cmd: str | None = None
        self._shuffle_seed = None

    # -- configuration (fluid's setters) -----------------------------------------------------
    def set_pipe_command(self, pipe_command: str):
        """The shell command each file is piped through (`cat FILE | pipe_command`); its
        output is MultiSlot text. Default "cat"."""
        if not isinstance(pipe_command, str):
            raise InvalidArgumentError(
                f"Dataset.set_pipe_command takes a shell command string, got {pipe_command!r}")
        self.proto_desc.pipe_command = pipe_command

    def set_batch_size(self, batch_size: int):
        """Records per batch (per thread)."""
        self.proto_desc.batch_size = _positive_int(batch_size, "set_batch_size")
        self.proto_desc.explicit.add("batch_size")

    def set_thread(self, thread_num: int):
        """Reader threads: each batches its own share of the data."""
        self.thread_num = _positive_int(thread_num, "set_thread")

    def set_filelist(self, filelist):
        """The files to read (local paths)."""
        if isinstance(filelist, str) or not all(isinstance(f, str) for f in filelist):
            raise InvalidArgumentError(
                f"Dataset.set_filelist takes a list of file paths, got {filelist!r}")
        self.filelist = list(filelist)

    def set_use_var(self, var_list):
        """The data variables each record fills, in the order of its slots (float32 and
        int64 only; a lod_level=0 variable is a dense slot). Replaces any earlier list."""
        self.proto_desc.multi_slot_desc.slots = [slot_of(v) for v in var_list]

    def set_hdfs_config(self, fs_name: str, fs_ugi: str):
        """Kept for fluid's scripts; spmd reads local files only, so an `hdfs:` path in the
        filelist is refused with the reason (set_download_cmd reads remote files)."""
        self.fs_name, self.fs_ugi = fs_name, fs_ugi

    def set_download_cmd(self, download_cmd: str):
        """Read each file as `download_cmd FILE | pipe_command` (e.g. 'hadoop fs -cat')."""
        self.download_cmd = download_cmd

    def set_rank_offset(self, rank_offset: str):
        self.proto_desc.rank_offset = rank_offset

    def set_pv_batch_size(self, pv_batch_size: int):
        self.proto_desc.pv_batch_size = pv_batch_size

    def set_shuffle_seed(self, seed: int | None):
        """spmd's knob: seed local_shuffle / global_shuffle (each trainer draws from
        (seed, its rank)) so a run repeats; None (the default, fluid's way) draws fresh."""
        self._shuffle_seed = seed

    def set_fea_eval(self, record_candidate_size, fea_eval=True):
        InMemoryDataset._refuse_flag("set_fea_eval", fea_eval)

    def slots_shuffle(self, slots):
        InMemoryDataset._refuse_flag("slots_shuffle", True)

    def desc(self) -> str:
        """The data feed description in protobuf text form, as fluid prints it."""
        return desc_text(self.proto_desc)

    # -- what the executor and DataLoader.from_dataset use ------------------------------------
    @property
    def slots(self) -> list:
        return list(self.proto_desc.multi_slot_desc.slots)

    @property
    def batch_size(self) -> int:
        return self.proto_desc.batch_size

    def _check_ready(self, who: str) -> None:
        if not self.slots:
            raise PreconditionError(
                f"{who}: the dataset has no slots: call dataset.set_use_var([the data "
                f"variables, in the order of the file's slots]) first")

    def _read(self, path: str):
        return tables_of(path, self.slots, self.proto_desc.pipe_command, self._drops_zeros,
                         self.download_cmd)

    def thread_batches(self, threads: int, drop_last: bool = False) -> list:
        """One iterator per thread over (records, feed) of its batches."""
        raise PreconditionError(
            "DatasetBase is the base of the datasets and reads nothing itself: create one "
            "with fluid.DatasetFactory().create_dataset('InMemoryDataset' or 'QueueDataset')")

    def _rng(self):
        if self._shuffle_seed is None:
            return np.random.default_rng()
        from ..comm.topology import detect

        return np.random.default_rng([self._shuffle_seed, detect().rank])

    def local_shuffle(self):
        raise PreconditionError(
            f"{type(self).__name__} does not support local shuffle, please use "
            f"InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet=None, thread_num=12):
        raise PreconditionError(
            f"{type(self).__name__} does not support global shuffle, please use "
            f"InMemoryDataset for global_shuffle")


class QueueDataset(DatasetBase):
    """Streams its files: thread i reads files i, i + T, ... in order, batching as it reads.

    >>> import spmd.fluid as fluid
    >>> dataset = fluid.DatasetFactory().create_dataset("QueueDataset")
    >>> dataset.set_filelist(["a.txt", "b.txt"])
    """

    def effective_threads(self, threads: int) -> int:
        """fluid: no more threads than files."""
        return max(1, min(threads, len(self.filelist)))

    def thread_batches(self, threads: int, drop_last: bool = False) -> list:
        self._check_ready("QueueDataset")
        threads = self.effective_threads(threads)

        def tables(files):
            for path in files:
                yield from self._read(path)

        return [batches(tables(self.filelist[t::threads]), self.batch_size, drop_last)
                for t in range(threads)]


class FileInstantDataset(QueueDataset):
    """fluid's FileInstantDataset (MultiSlotFileInstantDataFeed), read as the QueueDataset
    reads: files streamed, no shuffle (fluid 1.8's feed itself is built for CUDA only)."""

    _feed_name = "MultiSlotFileInstantDataFeed"


class InMemoryDataset(DatasetBase):
    """Loads its files into memory; shuffles locally or across trainers.

    >>> import spmd.fluid as fluid
    >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    >>> dataset.get_memory_data_size()
    0
    """

    _feed_name = "MultiSlotInMemoryDataFeed"
    _drops_zeros = True

    def __init__(self):
        super().__init__()
        self.queue_num = None
        self.fleet_send_batch_size = None
        self.fleet_send_sleep_seconds = None
        self.parse_ins_id = self.parse_content = self.parse_logkey = False
        self.merge_by_sid = True
        self.enable_pv_merge = False
        self._records = RecordTable.empty([])
        self._shuffled = 0
        self._loaded = False  # load_into_memory ran (a trainer may then hold 0 records)

    def set_feed_type(self, data_feed_type: str):
        self.proto_desc.name = data_feed_type

    def set_queue_num(self, queue_num: int):
        self.queue_num = _positive_int(queue_num, "set_queue_num")

    def set_parse_ins_id(self, parse_ins_id: bool):
        self._refuse_flag("set_parse_ins_id", parse_ins_id)

    def set_parse_content(self, parse_content: bool):
        self._refuse_flag("set_parse_content", parse_content)

    def set_parse_logkey(self, parse_logkey: bool):
        self._refuse_flag("set_parse_logkey", parse_logkey)

    def set_merge_by_sid(self, merge_by_sid: bool):
        self.merge_by_sid = bool(merge_by_sid)

    def set_enable_pv_merge(self, enable_pv_merge: bool):
        self._refuse_flag("set_enable_pv_merge", enable_pv_merge)

    def set_fleet_send_batch_size(self, fleet_send_batch_size=1024):
        self.fleet_send_batch_size = fleet_send_batch_size

    def set_fleet_send_sleep_seconds(self, fleet_send_sleep_seconds=0):
        self.fleet_send_sleep_seconds = fleet_send_sleep_seconds

    def set_merge_by_lineid(self, merge_size=2):
        self._refuse_flag("set_merge_by_lineid", True)

    def preprocess_instance(self):
        self._refuse_flag("preprocess_instance", True)

    def postprocess_instance(self):
        self._refuse_flag("postprocess_instance", True)

    def set_current_phase(self, current_phase):
        self._refuse_flag("set_current_phase", True)

    def get_pv_data_size(self) -> int:
        """Page-view records (pslib's pv merge, not read here): none."""
        return 0

    @staticmethod
    def _refuse_flag(name: str, value) -> None:
        if value:
            raise InvalidArgumentError(
                f"Dataset.{name}: the instance-id / content / log-key / pv record prefixes, "
                f"line-id merging and feature evaluation are pslib (BoxPS) features that spmd "
                f"does not provide; the MultiSlot slots alone are read")

    # -- memory --------------------------------------------------------------------------------
    def load_into_memory(self):
        """Read every file of the filelist (thread_num files at a time) into memory, in
        filelist order."""
        self._check_ready("InMemoryDataset.load_into_memory")
        if not self.filelist:
            raise PreconditionError(
                "InMemoryDataset.load_into_memory: the filelist is empty; call "
                "dataset.set_filelist([...]) first")
        with ThreadPoolExecutor(max_workers=max(1, self.thread_num)) as pool:
            loaded = list(pool.map(lambda p: list(self._read(p)), self.filelist))
        self._records = RecordTable.concat([RecordTable.empty(self.slots)] +
                                           [t for part in loaded for t in part])
        self._shuffled = 0
        self._loaded = True

    def preload_into_memory(self, thread_num=None):
        """fluid loads in the background; here the load is done at once (wait_preload_done
        then returns)."""
        self.load_into_memory()

    def wait_preload_done(self):
        """The load preload_into_memory started is done."""

    def local_shuffle(self):
        """Shuffle this trainer's records in memory."""
        self._records = self._records.take(self._rng().permutation(len(self._records)))

    def global_shuffle(self, fleet=None, thread_num=12):
        """Shuffle the records of every trainer together: each trainer ends with its share
        (each record goes to a trainer drawn at random). fleet=None: this trainer alone."""
        trainers = 1 if fleet is None else int(fleet.worker_num())
        if fleet is not None:
            fleet.barrier_worker()
        if trainers == 1:
            self.local_shuffle()
        else:
            self._records = shuffle.exchange(self._records, self.slots, self._rng(), trainers)
        self._shuffled = len(self._records)
        if fleet is not None:
            fleet.barrier_worker()

    def release_memory(self):
        """Drop the loaded records."""
        self._records = RecordTable.empty(self.slots)
        self._shuffled = 0
        self._loaded = False

    def get_memory_data_size(self, fleet=None) -> int:
        """Records in memory: this trainer's, or with `fleet` every trainer's together."""
        return _summed(len(self._records), fleet)

    def get_shuffle_data_size(self, fleet=None) -> int:
        """Records the last global_shuffle left here (0 before one), summed with `fleet`."""
        return _summed(self._shuffled, fleet)

    def thread_batches(self, threads: int, drop_last: bool = False) -> list:
        self._check_ready("InMemoryDataset")
        if not self._loaded:  # an empty share after a global shuffle is no mistake
            raise PreconditionError(
                "InMemoryDataset holds no records: call dataset.load_into_memory() before "
                "training (and again after release_memory())")
        bounds = [len(s) for s in np.array_split(np.arange(len(self._records)), max(1, threads))]
        starts = np.concatenate([[0], np.cumsum(bounds)]).tolist()
        return [batches([self._records.slice(a, b)], self.batch_size, drop_last)
                for a, b in zip(starts[:-1], starts[1:])]


def _summed(local: int, fleet) -> int:
    if fleet is None:
        return local
    total = np.zeros(1, np.int64)
    fleet.all_reduce_worker(np.array([local], np.int64), total)
    return int(total[0])


class DatasetFactory:
    """Makes datasets by name: "QueueDataset" (the default), "InMemoryDataset",
    "FileInstantDataset".

    >>> DatasetFactory().create_dataset("InMemoryDataset").__class__.__name__
    'InMemoryDataset'
    """

    KINDS = {"QueueDataset": QueueDataset, "InMemoryDataset": InMemoryDataset,
             "FileInstantDataset": FileInstantDataset}

    def create_dataset(self, datafeed_class: str = "QueueDataset"):
        kind = self.KINDS.get(datafeed_class)
        if kind is None:
            raise InvalidArgumentError(
                f"datafeed class {datafeed_class} does not exist; spmd has "
                f"{sorted(self.KINDS)} (BoxPSDataset needs Baidu's BoxPS)")
        return kind()
