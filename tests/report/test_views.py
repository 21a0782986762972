from __future__ import annotations

import pandas as pd
import pytest

from robuststats.report import claim, condition_descriptions, condition_rows, hypothesis_rows


@pytest.mark.parametrize("h, expected", [
    ({"a": "E8c", "b": "E8b", "relation": "greater", "margin": 0.05, "metric": "accuracy",
      "eval_noise": 0.05}, "E8c − E8b > 5.0 pp (accuracy at 5% noise)"),
    ({"a": "E8d", "b": "E8c", "relation": "less", "margin": 0.0, "metric": "retention",
      "eval_noise": 0.1}, "E8d − E8c < 0.0 pp (retention at 10% noise)"),
    ({"a": "A", "b": "B", "relation": "equivalent", "margin": 0.01, "metric": "accuracy",
      "eval_noise": 0.0}, "|A − B| < 1.0 pp (clean accuracy)"),
    ({"a": "A", "b": "B", "relation": "greater", "margin": 0.0025, "metric": "accuracy",
      "eval_noise": 0.025}, "A − B > 0.25 pp (accuracy at 2.5% noise)"),
    ({"a": "A", "b": "B", "relation": "less", "margin": -0.02, "metric": "accuracy",
      "eval_noise": 0.05}, "A − B < -2.0 pp (accuracy at 5% noise)"),
])
def test_claim_in_words(h: dict, expected: str) -> None:
    assert claim(h) == expected


def test_hypothesis_rows_format_and_explain_missing_estimates(tables) -> None:
    rows = {r["id"]: r for r in hypothesis_rows(tables["hypotheses"])}
    assert rows["H1"] == {
        "id": "H1", "claim": "fwd − base > 5.0 pp (accuracy at 5% noise)", "estimate": "+12.0",
        "interval": "[7.0, 17.0] 97.5%", "ci_method": "seeds x items bootstrap (bca)",
        "pvalue_adjusted": "0.0300", "verdict": "VERIFIED", "reason": "decided by the interval"}
    assert rows["H5"]["estimate"] == "-"
    assert rows["H5"]["interval"] == "(2 needed cell(s) missing)"
    assert hypothesis_rows(None) == []


def test_condition_rows_join_accuracy_and_retention(tables) -> None:
    rows = condition_rows(tables["summary"], tables["retention"])
    assert len(rows) == len(tables["summary"])
    assert rows[0] == {"condition": "base", "eval_noise": "0%", "accuracy": "80.0",
                       "accuracy_ci": "[75.0, 84.0] 90%", "retention": "-",
                       "retention_ci": "-"}
    assert rows[1]["retention"] == "60.0" and rows[1]["retention_ci"] == "[54.0, 65.0] 90%"
    # float keys written as 0.05 and read back as 0.05000000000000001 still join
    shifted = tables["retention"].assign(eval_noise=tables["retention"]["eval_noise"] + 1e-17)
    assert condition_rows(tables["summary"], shifted)[1]["retention"] == "60.0"


def test_condition_descriptions_from_the_spec(meta) -> None:
    assert condition_descriptions(meta)["fwd"] == "forward-only noise, 5 %"
    assert condition_descriptions({"spec": None}) == {}
    assert condition_descriptions({"spec": {"conditions": {"A": {"description": " "},
                                                           "B": {"description": "x\n y"}}}}
                                  ) == {"B": "x y"}


def test_views_tolerate_pandas_na() -> None:
    hyp = pd.DataFrame({"id": ["H1"], "a": ["A"], "b": ["B"], "relation": ["greater"],
                        "margin": [0.0], "metric": ["accuracy"], "eval_noise": [0.0],
                        "estimate": pd.array([pd.NA], dtype="Float64"),
                        "verdict": ["INCONCLUSIVE"], "reason": pd.array([pd.NA],
                                                                        dtype="string")})
    (row,) = hypothesis_rows(hyp)
    assert (row["estimate"], row["interval"], row["reason"]) == ("-", "-", "-")


@pytest.mark.parametrize("p, text", [(0.03, "0.0300"), (1.0, "1.00"), (0.5, "0.500"),
                                     (0.0218, "0.0218"), (2.8e-29, "2.80e-29"),
                                     (0.0, "0"), (float("nan"), "-")])
def test_pvalues_keep_three_significant_digits(p: float, text: str) -> None:
    from robuststats._format import fmt_p

    assert fmt_p(p) == text
