"""Kernels built side by side (workbench/jit/parallel.py): real compilers, real locks.

Overlap is shown without timing: a compiler wrapper makes each compile wait at a rendezvous
until the other kernel's compile has started too, so a run that builds one kernel after the
other never meets there (each waits out its limit and records that it was alone)."""
from __future__ import annotations

import io
import shutil
import stat
import threading
from pathlib import Path

import pytest
import torch
from conftest import TINY_CPP, write_tiny_kernel

import workbench as wb
from workbench.jit import feedback, parallel

RENDEZVOUS = """#!/bin/sh
# A C++ compiler that, for a compile (-c) of tiny.cpp, says it started and waits up to 60 s for
# another to start, then records how many it saw, and compiles.
case " $* " in *" -c "*tiny.cpp*)
  mkdir -p "$MARKS"; touch "$MARKS/started.$$"
  i=0; while [ "$(ls "$MARKS" | grep -c '^started')" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
  echo "$(ls "$MARKS" | grep -c '^started')" > "$MARKS/saw.$$";;
esac
exec REAL "$@"
"""


@pytest.fixture
def rendezvous_compiler(tmp_path, monkeypatch) -> Path:
    """KWB_CXX set to the rendezvous wrapper; returns the folder its marks go to."""
    wrapper = tmp_path / "c++"
    wrapper.write_text(RENDEZVOUS.replace("REAL", shutil.which("g++") or shutil.which("c++")))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("KWB_CXX", str(wrapper))
    monkeypatch.setenv("MARKS", str(tmp_path / "marks"))
    return tmp_path / "marks"


def test_two_kernels_compile_at_the_same_time(tmp_path, monkeypatch, rendezvous_compiler):
    monkeypatch.setenv("MAX_JOBS", "2")  # two slots, as on the 2-core machine: both kernels at once
    a = write_tiny_kernel(tmp_path / "tiny_a", value="2.0")
    b = write_tiny_kernel(tmp_path / "tiny_b", value="3.0")
    done = []
    loaded = wb.load_all([a, b], device="cpu", on_done=done.append)
    assert [x.ok for x in loaded] == [True, True], [str(x.error) for x in loaded]
    assert loaded[0].kernel.add_value(torch.zeros(1)).item() == 2.0  # in the order given
    assert loaded[1].kernel.add_value(torch.zeros(1)).item() == 3.0
    assert sorted(x.name for x in done) == sorted([str(a), str(b)])
    saw = [int(p.read_text()) for p in rendezvous_compiler.glob("saw.*")]
    assert saw == [2, 2], f"each compile saw {saw} compiles started: the builds did not overlap"


def test_one_kernel_asked_for_twice_at_once_builds_once(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(feedback, "SHOW_AFTER_SECONDS", 0.0)  # every build says it built, however fast
    folder = write_tiny_kernel(tmp_path / "twice", value="4.0")
    loaded = wb.load_all([folder, folder], device="cpu")
    assert all(x.ok for x in loaded)
    assert loaded[0].kernel is loaded[1].kernel  # the second waited at the lock and found the first's build
    assert capfd.readouterr().err.count("kwb: built twice (cpu)") == 1
    assert loaded[0].kernel.add_value(torch.zeros(1)).item() == 4.0


@pytest.mark.slow
def test_threads_calling_load_build_different_kernels_side_by_side(tmp_path, rendezvous_compiler):
    folders = [write_tiny_kernel(tmp_path / f"tiny_{i}", value=f"{i}.0") for i in (5, 6)]
    values = {}
    threads = [threading.Thread(target=lambda f=f: values.__setitem__(f.name, wb.load(f, device="cpu"))) for f in folders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {n: k.add_value(torch.zeros(1)).item() for n, k in values.items()} == {"tiny_5": 5.0, "tiny_6": 6.0}
    assert sorted(int(p.read_text()) for p in rendezvous_compiler.glob("saw.*")) == [2, 2]


@pytest.mark.slow
def test_a_failed_build_is_reported_in_its_place_and_the_others_load(tmp_path):
    good = write_tiny_kernel(tmp_path / "good", value="1.0")
    bad = write_tiny_kernel(tmp_path / "bad", cpp=TINY_CPP.replace("VALUE * SCALE", "VALUE * not_declared"))
    loaded = wb.load_all([bad, good, "no_such_kernel_here"], device="cpu")
    assert [x.ok for x in loaded] == [False, True, False]
    assert isinstance(loaded[0].error, wb.BuildError) and "not_declared" in str(loaded[0].error)
    assert isinstance(loaded[2].error, wb.KernelNotFoundError)


@pytest.mark.parametrize("n,slots,expected,jobs", [
    # the GPU machine: every kernel at once, each with its .cpp and .cu side by side (18 compilers)
    (9, 16, parallel.Plan(16, 9, 1, 2), [2] * 9),
    (12, 16, parallel.Plan(16, 12, 1), [2] * 4 + [1] * 8),  # fewer than 1.5 slots a kernel: 16 compilers
    (9, 2, parallel.Plan(2, 2, 1), [1] * 9),              # the 2-core machine: two kernels at once, one compiler each
    (1, 16, parallel.Plan(16, 1, 16), [16]),              # one kernel gets the whole machine
    (3, 1, parallel.Plan(1, 1, 1), [1] * 3),
])
def test_the_plan_shares_the_slots_out_and_never_more(n, slots, expected, jobs):
    got = parallel.plan(n, slots)
    assert got == expected and [got.jobs_for(i) for i in range(n)] == jobs
    assert sum(sorted(jobs, reverse=True)[: got.kernels]) <= max(slots, slots * 4 // 3)  # a third more at most


def test_max_jobs_sets_the_slots_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "3")
    assert parallel.compile_slots() == 3
    monkeypatch.setenv("MAX_JOBS", "many")
    with pytest.raises(ValueError, match="MAX_JOBS must be a whole number of at least 1, got 'many'"):
        parallel.compile_slots()
    monkeypatch.delenv("MAX_JOBS")
    assert 1 <= parallel.compile_slots() <= parallel.cpus()


def test_jobs_must_be_a_positive_whole_number():
    with pytest.raises(ValueError, match="jobs must be a whole number of at least 1"):
        wb.load("relu_scale", device="cpu", jobs=0)


def test_the_board_shows_builds_in_progress_on_a_terminal(monkeypatch):
    from rich.console import Console

    screen = io.StringIO()
    monkeypatch.setattr(feedback, "_console", Console(file=screen, force_terminal=True, width=100))
    monkeypatch.setattr(feedback, "SHOW_AFTER_SECONDS", 0.0)
    with feedback.BuildBoard("kernels", total=2) as board:
        fb = feedback.BuildFeedback("relu_scale (cuda)")
        fb.line("[1/3] NVCC relu_scale.cu")
        board._progress.refresh()
        shown = screen.getvalue()
        fb.done(True)
        board.one_done()
    assert "kwb: loading 2 kernels: 0 done" in shown and "relu_scale (cuda): NVCC relu_scale.cu" in shown
    assert "kwb: built relu_scale (cuda)" in screen.getvalue()
    assert feedback._board is None


def test_the_live_line_names_what_compiles_now_not_what_finished():
    fb = feedback.BuildFeedback("k (cuda)")
    fb.expect(["CXX k.cpp", "NVCC k.cu", "LINK k.so"])  # ninja -n's list
    assert fb.current == "compiling k.cpp, k.cu"
    fb.line("[1/3] CXX k.cpp")  # ninja names a step as it finishes
    assert fb.current == "compiling k.cu"
    fb.line("[2/3] NVCC k.cu")
    assert fb.current == "linking"
    assert fb.steps == ["k.cpp", "k.cu"]


@pytest.mark.slow
def test_ctrl_c_starts_no_queued_build_and_ends_the_running_one(tmp_path, cache_root, monkeypatch):
    monkeypatch.setenv("MAX_JOBS", "1")  # one load at a time: the second starts as the first ends
    folders = [write_tiny_kernel(tmp_path / f"stop_{i}", value=f"{i}.0") for i in range(3)]

    def interrupt(loaded):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wb.load_all(folders, device="cpu", on_done=interrupt)
    built = sorted(p.name.split(".")[0] for p in cache_root.glob("kwb_stop_*/*.json"))
    assert built == ["stop_0"], built  # stop_1's ninja was ended mid-build, stop_2 never began
    assert not parallel.ninja.stop_all.is_set()
    assert wb.load(folders[1], device="cpu").add_value(torch.zeros(1)).item() == 1.0  # and builds later
