"""Readers for every GreenHub layout in circulation (see docs/traces.md).

A :class:`Source` detects the layout of an input path and streams its samples chunk by chunk
as pyarrow Tables holding only the requested columns, under canonical names:

==================  =====================================================================
layout (``format``)  files
==================  =====================================================================
``parquet``         one Kaggle-style parquet file (typed, 38 columns)
``parquet-parts``   a directory with ``samples/part-*.parquet`` (or ``part-*.parquet``)
``csv-pages``       Aug-2020 ``samples.query.N.csv`` pages: ``;``, header on every page,
                    ``NULL``
``csv-tables``      weekly per-table dumps: ``samples.csv`` (+ ``battery_details.csv``
                    keyed by ``sample_id`` for voltage/temperature/charger, and
                    ``network_details.csv`` for the network columns); ``;`` or ``,``,
                    quoted or not, ``NULL`` or ``\\N``, header lines possibly repeated
``csv``             one samples CSV file of any of the dialects above
==================  =====================================================================

The delimiter is taken from the header line of each file; quoting is decided from the data
lines, never from the header: the 2018 dumps were written by ``SELECT ... INTO OUTFILE ...
ENCLOSED BY '"'`` (every value quoted, NULL as ``\\N``) under a header of bare column names
written separately. Every CSV column
is read as a string and typed later (:mod:`flamingo_sim.traces.clean`), so nothing is lost to
type inference; rows with the wrong field count (a ``;`` inside a text field) are skipped and
counted per file; repeated header lines are dropped and counted.

The ``devices`` table (``id, model, manufacturer, brand, ...``) is found beside the samples
when present (``devices/part-0000.parquet`` in the Kaggle layout, ``devices.query.N.csv`` beside
Aug-2020 pages, ``devices.csv`` beside per-table dumps) and read by :meth:`Source.device_models`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from flamingo_sim.errors import InputDataError

__all__ = ["Source", "FORMATS", "detect_format", "REQUIRED", "OPTIONAL", "DEVICE_COLUMNS"]

FORMATS = ("parquet", "parquet-parts", "csv-pages", "csv-tables", "csv")
#: Columns every layout must have (canonical names).
REQUIRED = ("device_id", "timestamp", "battery_level")
#: Columns carried into extras where present (samples or battery_details).
OPTIONAL = ("screen_on", "temperature", "voltage", "charger")
_DETAIL_COLUMNS = ("temperature", "voltage", "charger")
#: What the devices table tells about each device's phone.
DEVICE_COLUMNS = ("model", "manufacturer", "brand")
_SNIFF_BYTES = 1 << 16
_NULLS = ["NULL", "\\N", "N", ""]  # ``\N`` reads as ``N`` once the backslash escape is applied
_CSV_BLOCK = 16 << 20


def _natural_key(p: Path) -> list[object]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name)]


def detect_format(path: Path) -> str:
    """The layout of ``path`` (a file or directory); raises InputDataError if none fits."""
    if not path.exists():
        raise InputDataError(f"{path}: not found; expected a GreenHub parquet file, parts directory or CSV dump")
    if path.is_file():
        suffix = path.suffix.lower()
        if suffix == ".parquet":
            return "parquet"
        if suffix in (".csv", ".txt"):
            return "csv"
        with open(path, "rb") as fh:
            head = fh.read(4)
        if head == b"PAR1":
            return "parquet"
        raise InputDataError(f"{path}: unknown file type; expected .parquet or .csv (name the format)")
    if list((path / "samples").glob("part-*.parquet")) or list(path.glob("part-*.parquet")):
        return "parquet-parts"
    if list(path.glob("samples.query.*.csv")):
        return "csv-pages"
    if (path / "samples.csv").is_file():
        return "csv-tables"
    raise InputDataError(
        f"{path}: no GreenHub layout found; expected samples/part-*.parquet, samples.query.N.csv or samples.csv"
    )


@dataclass
class ReadStats:
    """What the reader skipped, per reason and per file."""

    shifted_rows: int = 0
    repeated_header_lines: int = 0
    files: list[str] = field(default_factory=list)


@dataclass
class Source:
    """An input dump: its layout, sample files and (per-table dumps) battery_details files."""

    path: Path
    format: str
    files: list[Path]
    detail_files: list[Path]
    device_files: list[Path] = field(default_factory=list)
    network_files: list[Path] = field(default_factory=list)  # per-table dumps: network_details.csv
    max_shifted_frac: float = 0.01
    stats: ReadStats = field(default_factory=ReadStats)

    @classmethod
    def open(cls, path: str | Path, fmt: str | None = None, max_shifted_frac: float = 0.01) -> "Source":
        """Detect (or check ``fmt``) the layout of ``path`` and list its files."""
        path = Path(path)
        if fmt is not None and fmt not in FORMATS:
            raise InputDataError(f"format {fmt!r}: unknown; expected one of {', '.join(FORMATS)}")
        detected = detect_format(path) if fmt is None else fmt
        if not path.exists():
            raise InputDataError(f"{path}: not found")
        details: list[Path] = []
        network: list[Path] = []
        if detected in ("parquet", "csv"):
            if not path.is_file():
                raise InputDataError(f"{path}: format {detected!r} expects a file, got a directory")
            files = [path]
        elif detected == "parquet-parts":
            base = path / "samples" if (path / "samples").is_dir() else path
            files = sorted(base.glob("part-*.parquet"), key=_natural_key)
        elif detected == "csv-pages":
            files = sorted(path.glob("samples.query.*.csv"), key=_natural_key)
        else:
            files = [path / "samples.csv"] if (path / "samples.csv").is_file() else []
            details = [path / "battery_details.csv"] if (path / "battery_details.csv").is_file() else []
            network = [path / "network_details.csv"] if (path / "network_details.csv").is_file() else []
        if not files:
            raise InputDataError(f"{path}: no sample files for format {detected!r}")
        src = cls(path=path, format=detected, files=files, detail_files=details, device_files=_device_files(path, detected),
                  network_files=network, max_shifted_frac=max_shifted_frac)
        src.stats.files = [str(f) for f in files]
        return src

    @property
    def is_csv(self) -> bool:
        return self.format.startswith("csv")

    def _columns(self, f: Path) -> list[str]:
        if self.is_csv:
            return _csv_header(f)[0]
        return list(_parquet_file(f).schema_arrow.names)

    def scan(self, columns: Sequence[str]) -> Iterator[tuple[Path, pa.Table]]:
        """Yield ``(file, table)`` chunks of the sample files with the present ``columns``."""
        for f in self.files:
            present = self._columns(f)
            missing = [c for c in REQUIRED if c not in present]
            if missing:
                raise InputDataError(
                    f"{f}: missing required column(s) {', '.join(missing)}; expected {', '.join(REQUIRED)}"
                )
            want = [c for c in columns if c in present]
            if self.is_csv:
                yield from ((f, t) for t in self._scan_csv(f, want))
            else:
                yield from ((f, t) for t in _scan_parquet(f, want))

    def scan_details(self, columns: Sequence[str], files: Sequence[Path] | None = None) -> Iterator[tuple[Path, pa.Table]]:
        """Yield chunks of a table keyed by ``sample_id`` (``sample_id`` plus the present ``columns``):
        battery_details by default, or ``files`` (network_details)."""
        for f in self.detail_files if files is None else files:
            present = _csv_header(f)[0]
            if "sample_id" not in present:
                raise InputDataError(f"{f}: missing required column sample_id; expected sample_id, {', '.join(columns)}")
            want = ["sample_id"] + [c for c in columns if c in present]
            yield from ((f, t) for t in self._scan_csv(f, want))

    def device_models(self, device_ids: Sequence[int] | np.ndarray) -> dict[int, dict[str, str | None]]:
        """``{device_id: {model, manufacturer, brand}}`` of ``device_ids`` found in the devices table.

        Empty when the dump has no devices table; ids absent from it are left out. Raises
        :class:`InputDataError` when the table lacks ``id`` or when no row's id is an integer
        (saying what was seen).
        """
        import pyarrow.compute as pc

        wanted = np.asarray(device_ids, dtype=np.int64)
        found: dict[int, dict[str, str | None]] = {}
        for f in self.device_files:
            present = _csv_header(f)[0] if f.suffix == ".csv" else list(_parquet_file(f).schema_arrow.names)
            if "id" not in present:
                raise InputDataError(f"{f}: missing column id; expected {', '.join(('id',) + DEVICE_COLUMNS)}")
            want = ["id"] + [c for c in DEVICE_COLUMNS if c in present]
            chunks = self._scan_csv(f, want, count=False) if f.suffix == ".csv" else _scan_parquet(f, want)
            n_rows = n_bad = 0
            first_bad: object = None
            for table in chunks:
                idc = table.column("id")
                num = idc if pa.types.is_integer(idc.type) else _to_int(pc.cast(idc, pa.string()))
                valid = num.is_valid().to_numpy(zero_copy_only=False)
                if first_bad is None and not valid.all():
                    first_bad = idc[int((~valid).argmax())].as_py()
                n_rows += table.num_rows
                n_bad += int((~valid).sum())
                ids = pc.fill_null(num, -1).to_numpy(zero_copy_only=False)
                hit = np.flatnonzero(np.isin(ids, wanted))
                cols = {c: table.column(c).take(pa.array(hit)).to_pylist() for c in DEVICE_COLUMNS if c in table.column_names}
                for j, d in enumerate(ids[hit].tolist()):
                    found.setdefault(int(d), {c: (cols[c][j] if c in cols else None) for c in DEVICE_COLUMNS})
            if n_rows and n_bad == n_rows:
                raise InputDataError(f"{f}: every row dropped: no id is an integer (first: {first_bad!r}{quote_hint(first_bad)}); "
                                     "expected an integer device id in column id")
        return found

    def _scan_csv(self, f: Path, want: list[str], count: bool = True) -> Iterator[pa.Table]:
        import pyarrow.csv as pacsv

        names, delim, quoted = _csv_header(f)
        shifted = [0]

        def on_invalid(row: "pacsv.InvalidRow") -> str:
            shifted[0] += 1
            return "skip"

        try:
            reader = pacsv.open_csv(
                f,
                read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK, use_threads=True),
                parse_options=pacsv.ParseOptions(
                    delimiter=delim, quote_char='"' if quoted else False, escape_char="\\", invalid_row_handler=on_invalid
                ),
                convert_options=pacsv.ConvertOptions(
                    include_columns=want,
                    column_types={c: pa.string() for c in want},
                    null_values=_NULLS,
                    strings_can_be_null=True,
                    quoted_strings_can_be_null=True,
                ),
            )
        except pa.ArrowInvalid as exc:
            raise InputDataError(_csv_problem(f, exc)) from None
        n_rows = 0
        header_key = want[0]
        try:
            for batch in reader:
                table = pa.Table.from_batches([batch])
                import pyarrow.compute as pc

                is_header = pc.fill_null(pc.equal(table.column(header_key), header_key), False)
                n_head = pc.sum(is_header).as_py() or 0
                if n_head and count:
                    self.stats.repeated_header_lines += n_head
                    table = table.filter(pc.invert(is_header))
                n_rows += table.num_rows
                yield table
        except pa.ArrowInvalid as exc:
            raise InputDataError(_csv_problem(f, exc)) from None
        if count:
            self.stats.shifted_rows += shifted[0]
        total = n_rows + shifted[0]
        if shifted[0] and shifted[0] > self.max_shifted_frac * total:
            raise InputDataError(
                f"{f}: {_first_bad_line(f, delim, quoted, len(names))}: wrong number of fields ({shifted[0]} of {total} rows shifted, "
                f"more than max_shifted_frac {self.max_shifted_frac}); expected {len(names)} "
                f"'{delim}'-separated fields as in the header"
            )


def _csv_problem(f: Path, exc: Exception) -> str:
    """One line for a CSV pyarrow cannot read: text in another encoding named with its line, else pyarrow's reason."""
    import codecs

    if "UTF8" in str(exc) or "UTF-8" in str(exc):
        decoder, line = codecs.getincrementaldecoder("utf-8")(), 1
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as bad:
                    line += chunk[: max(bad.start, 0)].count(b"\n")
                    byte = chunk[bad.start] if 0 <= bad.start < len(chunk) else None
                    return (f"{f}: line {line}: not UTF-8 text" + (f" (byte 0x{byte:02x})" if byte is not None else "")
                            + "; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)")
                line += chunk.count(b"\n")
        return f"{f}: not UTF-8 text; convert the file to UTF-8"
    return f"{f}: cannot parse CSV ({str(exc).splitlines()[0]})"


def _first_bad_line(f: Path, delim: str, quoted: bool, n_fields: int) -> str:
    """``line N`` of the first row whose field count differs from the header's (error path only)."""
    import csv

    with open(f, newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh, delimiter=delim, quoting=csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE, escapechar="\\")
        for row in rows:
            if row and len(row) != n_fields:
                return f"line {rows.line_num}"
    return "a row"


def _csv_header(f: Path) -> tuple[list[str], str, bool]:
    """Column names and delimiter of a CSV file (from its header line) and its quoting (from its data).

    The values are quoted when most data lines in the first 64 KB begin with ``"`` (the 2018
    dumps: a bare header over quoted values), whatever the header line looks like.
    """
    try:
        with open(f, "rb") as fh:
            head = fh.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputDataError(f"{f}: cannot read ({exc.strerror})") from None
    lines = head.split("\n")
    line = lines[0].rstrip("\r")
    if not line.strip():
        raise InputDataError(f"{f}: empty file; expected a header line naming the columns")
    delim = ";" if line.count(";") > line.count(",") else ","
    names = [n.strip().strip('"').strip() for n in line.split(delim)]
    data = [ln for ln in lines[1:-1] if ln.strip() and ln.rstrip("\r") != line] or [ln for ln in lines[1:] if ln.strip()]
    quoted = 2 * sum(ln.startswith('"') for ln in data) > len(data) if data else line.startswith('"')
    return names, delim, quoted


def quote_hint(value: object) -> str:
    """``': values still carry their quotes'`` when ``value`` is text wrapped in quotes, else ``''``."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return ": values still carry their quotes"
    return ""


def _to_int(col: "pa.ChunkedArray") -> "pa.ChunkedArray":
    """Integer text as int64, anything else null."""
    import pyarrow.compute as pc

    s = pc.utf8_trim_whitespace(col)
    ok = pc.match_substring_regex(s, r"^-?[0-9]{1,18}$")
    return pc.cast(pc.if_else(ok, s, pa.scalar(None, pa.string())), pa.int64())


def _device_files(path: Path, fmt: str) -> list[Path]:
    """The devices table files beside the samples of a ``fmt`` dump at ``path`` (may be none)."""
    if fmt == "parquet-parts":
        base = path.parent if path.name == "samples" else path
        return sorted((base / "devices").glob("part-*.parquet"), key=_natural_key)
    if fmt == "csv-pages":
        return sorted(path.glob("devices.query.*.csv"), key=_natural_key)
    if fmt == "csv-tables":
        return [path / "devices.csv"] if (path / "devices.csv").is_file() else []
    return []


def _parquet_file(f: Path) -> Any:  # a pyarrow.parquet.ParquetFile (pyarrow has no type information)
    import pyarrow.parquet as pq

    try:
        if f.stat().st_size == 0:
            raise InputDataError(f"{f}: empty file; expected a parquet file")
        return pq.ParquetFile(f)
    except InputDataError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise InputDataError(f"{f}: not a readable parquet file ({str(exc).splitlines()[0]}); truncated or corrupt?") from None


def _scan_parquet(f: Path, want: list[str]) -> Iterator[pa.Table]:
    pf = _parquet_file(f)
    try:
        for i in range(pf.num_row_groups):
            yield pf.read_row_group(i, columns=want)
    except (pa.ArrowException, OSError) as exc:
        raise InputDataError(f"{f}: corrupt parquet data ({str(exc).splitlines()[0]}); truncated or corrupt?") from None
