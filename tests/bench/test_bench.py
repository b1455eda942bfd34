"""The benchmark commands run and write their table files (tiny sizes; timings are not asserted)."""

import csv

from r2ac.cli import main


def test_bench_core_smoke(tmp_path, capsys):
    assert main(["bench", "core", "--hidden", "8", "--input", "5", "--batch", "2", "--M", "3", "7",
                 "--repeats", "1", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "core_elstm.csv")))
    assert [int(r["M"]) for r in rows] == [3, 7]
    for r in rows:
        assert float(r["learner_rtrl_sps"]) > 0 and float(r["transport_speedup"]) > 0
        assert float(r["mem_rtrl_mb"]) > 0 and float(r["mem_tbptt_mb"]) > 0
    assert (tmp_path / "core_elstm.png").stat().st_size > 1000
    assert "rtrl_over_tbptt" in capsys.readouterr().out


def test_learner_work_counts_the_exact_correction():
    """The fast-weight programmer's exact correction is 2 B T D (N + Nk) multiply-adds of matrix products on
    top of TBPTT's; the eLSTM's is element-wise (no matrix product): equal counted work."""
    from r2ac.bench.core import _setup, learner_macs

    B, T, D, N = 3, 6, 5, 4
    work = {}
    for core in ("fwp", "elstm"):
        for learning in ("rtrl", "tbptt"):
            work[core, learning] = learner_macs(*_setup(core, learning, N, D, B, T, "cpu"))
    assert work["fwp", "rtrl"] - work["fwp", "tbptt"] == 2 * B * T * D * (N + N)
    assert work["elstm", "rtrl"] == work["elstm", "tbptt"] > 0
