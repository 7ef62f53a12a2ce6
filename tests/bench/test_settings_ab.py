"""bench/settings_ab.py: settings parsed as NAME=JSON, warm epochs summarized per setting (no JVM)."""

from __future__ import annotations

import argparse

import pytest

from bench.settings_ab import FIRST_WARM, _setting, markdown, summarize


def test_a_setting_is_a_name_and_a_json_object_of_spark_conf():
    assert _setting('off={"spark.sql.adaptive.enabled": false}') == ("off", {"spark.sql.adaptive.enabled": "false"})
    assert _setting("defaults={}") == ("defaults", {})
    for bad, named in (("noequals", "NAME=JSON"), ("x=[1]", "JSON object"), ("x={oops", "not JSON")):
        with pytest.raises(argparse.ArgumentTypeError, match=named):
            _setting(bad)


def test_warm_epochs_leave_out_the_first_ones_and_rounds_are_kept_apart():
    runs = {"a": [[30.0, 20.0, 15.0, 14.0, 13.0], [40.0, 21.0, 17.0, 16.0, 18.0]], "b": [[31.0, 19.0, 12.0, 11.0, 10.0]]}
    summary = summarize(runs)
    assert FIRST_WARM == 2
    assert summary["a"]["warm_medians_s"] == [14.0, 17.0]  # epochs 2.. of each run
    assert summary["a"]["warm_median_s"] == 15.5
    assert summary["a"]["first_epoch_s"] == 35.0
    assert summary["b"] == {"warm_medians_s": [11.0], "warm_median_s": 11.0, "first_epoch_s": 31.0}
    text = markdown({"when": "t", "load": [0.1], "epochs": 5, "rounds": 2, "settings": {"a": {}, "b": {"k": "v"}},
                     "summary": summary})
    assert "| a | `(epochal's defaults)` | 14.00, 17.00 | 15.5 | 35.0 |" in text
    assert '| b | `{"k": "v"}` | 11.00 | 11.0 | 31.0 |' in text
