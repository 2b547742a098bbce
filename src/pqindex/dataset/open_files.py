"""The data files a dataset holds open between scans: their footers (``OpenFile``),
the remote tails in flight (one concurrent wave, ``io.objstore.start_tails``), every
file's I/O counters, and the bound on what they may hold (``max_open_bytes``, least
recently used dropped first, never while a plan is being made)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from pqindex.dataset.discovery import DataFile
from pqindex.format.file import ParquetFile
from pqindex.io.objstore import TailWave, start_tails
from pqindex.io.source import IOStats
from pqindex.scan.page_decode import arrow_schema

__all__ = ["OPEN_FILES_BYTES", "OpenFile", "OpenFiles"]

# What the files a dataset keeps open between scans may hold (footers, tails, page-index
# entries; estimated): a 3,000-file lake held 455 MB after one scan when every file
# stayed. Least recently used files go first and are opened again when needed (a
# remote tail comes back from the metadata cache, without a request).
OPEN_FILES_BYTES = 256 << 20


class OpenFile:
    """A data file with its footer, Arrow schema and bound schema, opened once."""

    def __init__(self, df: DataFile, pf: ParquetFile, stats: IOStats) -> None:
        self.df = df
        self.pf = pf
        self.stats = stats
        self._arrow: pa.Schema | None = None

    @property
    def arrow(self) -> pa.Schema:
        """The Arrow schema pyarrow gives this file; built when first needed (a file
        that planning skips never needs it)."""
        if self._arrow is None:
            self._arrow = arrow_schema(self.pf)
        return self._arrow


class OpenFiles:
    """The open files of one dataset, least recently used first, and their tails in
    flight. It holds nothing of the dataset (no cycle: a dropped dataset goes by
    reference counting, its footers with it)."""

    def __init__(self, *, storage_options: Mapping[str, Any], tail_bytes: int | None) -> None:
        self.storage_options = storage_options
        self.tail_bytes = tail_bytes
        self.max_open_bytes = OPEN_FILES_BYTES
        self.lock = threading.Lock()
        self.open: OrderedDict[str, OpenFile] = OrderedDict()
        # Every file's I/O counters, kept when its file is dropped.
        self.stats: dict[str, IOStats] = {}
        self.ahead: dict[str, IOStats] = {}  # stats of files whose tail was read ahead
        self.landing: dict[str, TailWave] = {}  # files whose tail is in flight
        self._held: dict[str, int] = {}  # each open file's retained bytes, last estimated
        self._held_total = 0
        self._planning = 0  # plans in progress: no file is dropped meanwhile

    def get(self, path: str) -> OpenFile | None:
        """The file if it is open (no request)."""
        return self.open.get(path)

    def file(self, df: DataFile, rename: Callable[[ParquetFile], None] | None = None
             ) -> OpenFile:
        """The file, opened now if it is not (waiting for its tail if in flight);
        ``rename`` adapts a freshly opened footer (a table's column names)."""
        with self.lock:
            of = self.open.get(df.path)
            if of is not None:
                self.open.move_to_end(df.path)
            tails = self.landing.get(df.path)
        if of is not None:
            return of
        if tails is not None:
            tails.wait(df.path)  # its tail is in flight: opening then costs no request
        with self.lock:
            # A file dropped and opened again counts on where it stopped.
            stats = self.ahead.pop(df.path, None) or self.stats.get(df.path) or IOStats()
        pf = ParquetFile.open(df.path, stats=stats, tail_bytes=self.tail_bytes,
                              storage_options=self.storage_options, info=df.info)
        if rename is not None:
            rename(pf)
        of = OpenFile(df, pf, stats)
        held = pf.retained_bytes()
        with self.lock:
            if df.path not in self.open:
                self._held[df.path] = held
                self._held_total += held
            of = self.open.setdefault(df.path, of)
            self.stats[df.path] = of.stats
            over = self._held_total > self.max_open_bytes and not self._planning
        if over:
            self.trim()
        return of

    def trim(self) -> None:
        """Once the open files hold more than ``max_open_bytes`` (each file's
        ``ParquetFile.retained_bytes`` when opened, and after each plan that used it),
        drop the least recently used ones down to three quarters of it, so that
        trimming is rare; the last one used stays. A scan still reading a dropped file
        keeps it until the scan ends."""
        with self.lock:
            if self._planning or self._held_total <= self.max_open_bytes:
                return
            while self._held_total > self.max_open_bytes * 3 // 4 and len(self.open) > 1:
                path, _ = self.open.popitem(last=False)
                self._held_total -= self._held.pop(path, 0)

    def plan_started(self) -> None:
        """A plan is being made: the files it opens stay until it is made."""
        with self.lock:
            self._planning += 1

    def plan_made(self, used: Iterable[OpenFile]) -> None:
        """What the plan read into the ``used`` files (page-index entries...) counts
        from now; then the open files are trimmed."""
        held = {of.df.path: (of, of.pf.retained_bytes()) for of in used}
        with self.lock:
            self._planning -= 1
            for path, (of, n) in held.items():
                if self.open.get(path) is of:
                    self._held_total += n - self._held.get(path, 0)
                    self._held[path] = n
        self.trim()

    def start_ahead(self, files: Sequence[DataFile]) -> TailWave | None:
        """Start reading the remote tails of the files not open yet, in one concurrent
        wave (each file's IOStats counts its own tail request and the wave); None when
        fewer than two need it. Opening a file of the wave waits for its tail only."""
        with self.lock:
            todo = [df for df in files if df.info is not None
                    and df.path not in self.open and df.path not in self.ahead]
            ahead = {df.path: (df.info, self.stats.get(df.path) or IOStats()) for df in todo}
        if len(todo) < 2:
            return None
        with self.lock:
            self.ahead.update({p: s for p, (_, s) in ahead.items()})
            tails = start_tails([(p, i, s) for p, (i, s) in ahead.items()],
                                self.storage_options, self.tail_bytes)
            if tails is not None:
                self.landing.update((p, tails) for p in ahead if p in tails)
        if tails is not None:
            # Forgotten once all landed (opening a landed file no longer waits). The
            # callback names no wave: a wave's future keeps its callbacks, and one that
            # held the wave would make the dataset garbage only the cyclic GC frees.
            tails.add_done_callback(self._landed)
        return tails

    def _landed(self) -> None:
        with self.lock:
            for p in [p for p, t in self.landing.items() if t.done()]:
                del self.landing[p]

    def read_ahead(self, files: Sequence[DataFile]) -> int:
        """Remote tails of the files not open yet, in one concurrent wave, waited for;
        the number of waves taken (0 or 1)."""
        tails = self.start_ahead(files)
        if tails is None:
            return 0
        tails.join()
        return 1

    def tail_waves(self, files: Sequence[DataFile]) -> dict[str, TailWave | None]:
        """Each file's tail wave in flight (None: not in flight)."""
        with self.lock:
            return {df.path: self.landing.get(df.path) for df in files}

    def round_trips(self) -> dict[str, int]:
        """Each file's round trips so far (those whose tail is read ahead included)."""
        with self.lock:
            out = {p: st.round_trips for p, st in self.stats.items()}
            out.update({p: st.round_trips for p, st in self.ahead.items()})
        return out

    def all_stats(self) -> dict[str, IOStats]:
        """Every stats object so far: the files' and the tails read ahead."""
        with self.lock:
            out = dict(self.ahead)
            out.update(self.stats)
        return out

    def close(self) -> None:
        with self.lock:
            for of in self.open.values():
                of.pf.close()
            self.open.clear()
            self._held.clear()
            self._held_total = 0
