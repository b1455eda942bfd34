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
