"""Benchmark and check results on disk: the CSV schemas, where each device's files go, and the
environment every row carries (device, versions, kwb's git describe, time).

    <results root>/<device slug>/bench.csv          every timing row, appended run after run
    <results root>/<device slug>/check.csv          every compared output of `kwb run`
    <results root>/<device slug>/check_errors.csv   relative-error histograms of those checks

A run appends; rows keep their run_id, so the plots and tables can pick the latest run (or
the latest row of each measurement). Nothing here needs a GPU or matplotlib.
"""
from __future__ import annotations

import csv
import datetime
import functools
import gzip
import io
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..jit.errors import KwbError

BENCH_COLUMNS = [
    "kernel", "op", "provider", "dtype", "shape", "numel", "method",
    "median_us", "p20_us", "p80_us", "samples",
    "gbps", "pct_of_ceiling", "tflops", "speedup_vs_eager", "speedup_vs_compile", "speedup_vs_vendor", "status",
    "ceiling_gbps", "device", "device_name", "torch", "cuda", "kwb_version", "timestamp", "run_id",
    # kwb rows on a GPU: the longest kwb kernel one call launched, as launched (harness/launches.py)
    "gpu_kernel", "block", "registers", "smem_bytes", "spill_bytes", "occupancy_pct",
    # why a timing is not trusted (timing.distrust), empty when it is
    "trust",
    # kwb rows: the 95% interval of each speedup (harness/intervals.py)
    "speedup_vs_eager_lo", "speedup_vs_eager_hi", "speedup_vs_compile_lo", "speedup_vs_compile_hi",
]
CHECK_COLUMNS = [
    "kernel", "op", "what", "dtype", "shape", "max_abs", "max_rel", "rel_l2", "atol", "rtol", "rel_l2_tol",
    "mismatched", "numel", "passed", "detail", "seed",
    "device", "device_name", "torch", "cuda", "kwb_version", "timestamp", "run_id",
]
ERROR_COLUMNS = [
    "kernel", "op", "what", "dtype", "log10_lo", "log10_hi", "count", "rtol",
    "device", "device_name", "torch", "cuda", "kwb_version", "timestamp", "run_id",
]
SCHEMAS = {"bench.csv": BENCH_COLUMNS, "check.csv": CHECK_COLUMNS, "check_errors.csv": ERROR_COLUMNS}

_FLOATS = {"median_us", "p20_us", "p80_us", "gbps", "pct_of_ceiling", "tflops", "speedup_vs_eager", "speedup_vs_compile", "speedup_vs_vendor",
           "ceiling_gbps", "max_abs", "max_rel", "rel_l2", "atol", "rtol", "rel_l2_tol", "log10_lo", "log10_hi"}
_INTS = {"numel", "samples", "mismatched", "count", "seed", "registers", "smem_bytes", "spill_bytes"}
_FLOATS |= {"occupancy_pct", "speedup_vs_eager_lo", "speedup_vs_eager_hi", "speedup_vs_compile_lo", "speedup_vs_compile_hi"}


class SchemaError(KwbError):
    """A CSV whose header is not the schema kwb writes."""


@dataclass(frozen=True)
class Environment:
    device: str  # "cuda" or "cpu"
    device_name: str
    torch: str
    cuda: str
    kwb_version: str
    timestamp: str
    run_id: str

    @property
    def slug(self) -> str:
        """The results folder's name: 'nvidia-h100-80gb-hbm3', 'cpu-2core'."""
        if self.device == "cpu":
            return f"cpu-{os.cpu_count()}core"
        return re.sub(r"[^a-z0-9]+", "-", self.device_name.lower()).strip("-")

    def columns(self) -> dict:
        return {"device": self.device, "device_name": self.device_name, "torch": self.torch, "cuda": self.cuda,
                "kwb_version": self.kwb_version, "timestamp": self.timestamp, "run_id": self.run_id}

    def title(self) -> str:
        cuda = f", CUDA {self.cuda}" if self.cuda and self.cuda != "none" else ""
        return f"{self.device_name}, torch {self.torch}{cuda}, {self.timestamp[:10]}"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@functools.cache
def kwb_version() -> str:
    """'0.1.0+<git describe>' from a checkout; KWB_GIT_DESCRIBE names it where there is no .git
    (a copy of the tree on another machine); else the package version alone."""
    from workbench import __version__  # the package's one version string

    described = os.environ.get("KWB_GIT_DESCRIBE", "").strip()
    if not described:
        top = Path(__file__).resolve().parents[2]
        if (top / ".git").exists():
            try:
                described = subprocess.run(["git", "-C", str(top), "describe", "--always", "--dirty"],
                                           capture_output=True, text=True, timeout=10, check=False).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                described = ""
    return f"{__version__}+{described}" if described else __version__


def environment(device: str) -> Environment:
    import torch

    now = datetime.datetime.now(datetime.timezone.utc)
    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        name = f"{_cpu_name()} ({os.cpu_count()} cores)"
    return Environment(device, name, torch.__version__, torch.version.cuda or "none", kwb_version(),
                       now.isoformat(timespec="seconds"), now.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}")


def _format(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def append(path: Path, rows: list[dict], columns: list[str] | None = None) -> Path:
    """Append rows to a CSV, writing the header if the file is new. A file whose header differs
    from the schema is left untouched: SchemaError names the file and the difference."""
    columns = columns or SCHEMAS[path.name]
    if stored(path) not in (None, path):  # a new name.csv would hide name.csv.gz's rows from read()
        raise SchemaError(f"{path} is stored gzipped as {path.name}.gz; gunzip it to append to it")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.stat().st_size > 0:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != columns and header == columns[: len(header)]:
            _add_columns(path, columns)  # a file from before newer columns: the same rows, blank there
        elif header != columns:
            missing = [c for c in columns if c not in header]
            extra = [c for c in header if c not in columns]
            raise SchemaError(f"{path} has another header than kwb's {path.name} schema "
                              f"(missing: {missing or 'none'}, unknown: {extra or 'none'}); move it aside to start a new file")
        new = False
    else:
        new = True
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="raise", lineterminator="\n")
    if new:
        writer.writeheader()
    for row in rows:
        unknown = set(row) - set(columns)
        if unknown:
            raise SchemaError(f"rows for {path.name} hold columns outside its schema: {sorted(unknown)}")
        writer.writerow({c: _format(row.get(c)) for c in columns})
    # One write call: a reader never sees half a row from a crash between rows.
    with open(path, "a", newline="") as f:
        f.write(buf.getvalue())
    return path


def _add_columns(path: Path, columns: list[str]) -> None:
    """Rewrite a CSV whose header is the schema's first columns with the whole schema (the new
    columns blank), in one atomic replace: no row is lost if this is cut short."""
    from kwb_store.fsutil import atomic_write_text

    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in columns})
    atomic_write_text(path, buf.getvalue())


def _parse(column: str, text: str):
    if text == "":
        return None
    if column in _FLOATS:
        return float(text)
    if column in _INTS:
        return int(float(text))
    if column == "passed":
        return text == "true"
    return text


def stored(path: Path) -> Path | None:
    """path, else its gzipped copy (path.gz: older run folders keep check.csv and
    check_errors.csv so, benchmarks/results/README.md), else None."""
    path = Path(path)
    zipped = path.with_name(path.name + ".gz")
    return path if path.exists() else zipped if zipped.exists() else None


def read(path: Path) -> list[dict]:
    """A kwb CSV's rows with numbers as numbers and empty cells as None (a name.csv that is
    stored as name.csv.gz is read from there). A file written before newer columns joined the
    schema (its header the schema's first columns) reads with those columns None, as append()
    would fill them."""
    path = stored(path) or Path(path)
    with gzip.open(path, "rt", newline="") if path.suffix == ".gz" else open(path, newline="") as f:
        reader = csv.DictReader(f)
        expected = SCHEMAS.get(path.name.removesuffix(".gz"))
        header = reader.fieldnames or []
        if expected is not None and (not header or header != expected[: len(header)]):
            raise SchemaError(f"{path} is not a kwb {path.name}: its header is {reader.fieldnames}")
        later = expected[len(header):] if expected is not None else []
        return [{**{k: _parse(k, v) for k, v in row.items()}, **dict.fromkeys(later)} for row in reader]


def latest_run(rows: list[dict]) -> list[dict]:
    """The rows of the newest run_id."""
    if not rows:
        return []
    newest = max(r["run_id"] for r in rows)
    return [r for r in rows if r["run_id"] == newest]


def latest_per_measurement(rows: list[dict]) -> list[dict]:
    """For each (kernel, op, provider, dtype, shape, method), its newest row."""
    best: dict[tuple, dict] = {}
    for r in rows:
        key = (r["kernel"], r["op"], r.get("provider"), r["dtype"], r["shape"], r.get("method"))
        if key not in best or r["timestamp"] >= best[key]["timestamp"]:
            best[key] = r
    return list(best.values())
