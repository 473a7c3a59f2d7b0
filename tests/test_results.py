"""Result files: the CSV schemas, appending, reading back, refusing a foreign header, and
picking the latest run."""
from __future__ import annotations

import pytest

from workbench import results


def _env(run_id="20261122T000000-1", ts="2026-11-22T00:00:00+00:00", device="cuda"):
    return results.Environment(device, "NVIDIA H100 80GB HBM3", "2.11.0+cu130", "13.0", "0.1.0+abc", ts, run_id)


def _row(provider="kwb", median=10.0, env=None, **kw):
    env = env or _env()
    return {"kernel": "relu_scale", "op": "relu_scale", "provider": provider, "dtype": "float32", "shape": "1024", "numel": 1024,
            "method": "cuda_events", "median_us": median, "p20_us": median * 0.9, "p80_us": median * 1.1, "samples": 100,
            "gbps": 800.0, "pct_of_ceiling": 26.7, "status": "ok", "ceiling_gbps": 3000.0, **env.columns(), **kw}


def test_the_bench_schema_has_the_columns_the_readme_promises():
    for col in ("kernel", "op", "provider", "dtype", "shape", "median_us", "p20_us", "p80_us", "gbps", "pct_of_ceiling",
                "tflops", "device_name", "torch", "cuda", "kwb_version", "timestamp"):
        assert col in results.BENCH_COLUMNS


def test_append_writes_the_header_once_and_reads_back_typed(tmp_path):
    path = tmp_path / "dev" / "bench.csv"
    results.append(path, [_row()])
    results.append(path, [_row("eager", 20.0)])
    text = path.read_text().splitlines()
    assert text[0] == ",".join(results.BENCH_COLUMNS) and len(text) == 3
    rows = results.read(path)
    assert [r["provider"] for r in rows] == ["kwb", "eager"]
    assert rows[1]["median_us"] == 20.0 and rows[0]["samples"] == 100 and rows[0]["tflops"] is None


def test_a_foreign_header_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "bench.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(results.SchemaError, match="another header.*missing"):
        results.append(path, [_row()])
    assert path.read_text() == "a,b\n1,2\n"
    with pytest.raises(results.SchemaError, match="is not a kwb bench.csv"):
        results.read(path)


def test_a_file_from_before_the_newer_columns_reads_and_gains_them_on_append(tmp_path):
    # benchmarks/variants/.../bench.csv was written before the launch columns joined the schema;
    # notebook 02 reads it (a CI run failed there when read() refused the shorter header).
    older = results.BENCH_COLUMNS[: results.BENCH_COLUMNS.index("run_id") + 1]
    path = tmp_path / "bench.csv"
    results.append(path, [_row()], columns=older)
    rows = results.read(path)
    assert rows[0]["median_us"] == 10.0 and rows[0]["registers"] is None and set(rows[0]) == set(results.BENCH_COLUMNS)
    results.append(path, [_row("eager", 20.0, registers=32)])
    assert path.read_text().splitlines()[0] == ",".join(results.BENCH_COLUMNS)
    assert [(r["provider"], r["registers"]) for r in results.read(path)] == [("kwb", None), ("eager", 32)]
    path.write_text(",".join(older[:3] + ["typo"]) + "\n")
    with pytest.raises(results.SchemaError, match="is not a kwb bench.csv"):
        results.read(path)


def test_rows_with_unknown_columns_are_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "bench.csv"
    results.append(path, [_row()])
    before = path.read_text()
    with pytest.raises(results.SchemaError, match="outside its schema: \\['typo'\\]"):
        results.append(path, [_row(), _row(typo=1)])
    assert path.read_text() == before


def test_latest_run_and_latest_per_measurement(tmp_path):
    old, new = _env("20261121T000000-1", "2026-11-21T00:00:00+00:00"), _env("20261122T000000-1", "2026-11-22T00:00:00+00:00")
    rows = [_row(median=10.0, env=old), _row("eager", 30.0, env=old), _row(median=8.0, env=new)]
    assert [r["median_us"] for r in results.latest_run(rows)] == [8.0]
    latest = {r["provider"]: r["median_us"] for r in results.latest_per_measurement(rows)}
    assert latest == {"kwb": 8.0, "eager": 30.0}


def test_the_results_folder_is_named_after_the_device():
    assert _env().slug == "nvidia-h100-80gb-hbm3"
    assert _env(device="cpu").slug.startswith("cpu-") and _env(device="cpu").slug.endswith("core")


def test_kwb_version_names_the_commit_when_told(monkeypatch):
    results.kwb_version.cache_clear()
    monkeypatch.setenv("KWB_GIT_DESCRIBE", "v0.1-3-gabc1234")
    try:
        assert results.kwb_version().endswith("+v0.1-3-gabc1234")
    finally:
        results.kwb_version.cache_clear()


def test_a_csv_kept_gzipped_reads_under_its_own_name(tmp_path):
    import gzip

    path = tmp_path / "bench.csv"
    results.append(path, [_row(), _row("eager", 20.0)])
    with gzip.open(tmp_path / "bench.csv.gz", "wb") as f:
        f.write(path.read_bytes())
    path.unlink()
    assert results.stored(path) == tmp_path / "bench.csv.gz"
    assert [r["median_us"] for r in results.read(path)] == [10.0, 20.0]
    assert results.stored(tmp_path / "check.csv") is None
    with pytest.raises(results.SchemaError, match="stored gzipped"):
        results.append(path, [_row()])  # a new bench.csv beside it would hide its rows
    assert not path.exists()
    (tmp_path / "bench.csv.gz").write_bytes(gzip.compress(b"a,b\n1,2\n"))  # its schema still checked
    with pytest.raises(results.SchemaError):
        results.read(path)
