"""Fuzz the command line: argument vectors for every subcommand, run in-process.

Three kinds of cases:

* one flag or operand of a known-good vector replaced by a documented-valid value (exit 0)
  or a clearly invalid one (exit 2, one line naming the flag or the input);
* damaged inputs: outcome tables, manifests and paths that cannot be read (exit 2);
* random vectors built from every subcommand's flags and nasty values, which only promise
  the contract (no traceback, no hang, exit 0 or 2, a one-line error).

``study`` always runs with ``--check`` (nothing is trained) and ``analyze`` on a 24-row
table with few resamples, so each case takes at most about a second.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fuzz_harness import assert_accepted, assert_rejected, check_contract, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
LONG = "/" + "a" * 5000
NASTY_TEXT = ["", " ", "-", "--", "nan", "inf", "-inf", "-1", "0", "1e-320", "1e308",
              "99999999999999999999999", "1.5", "x", "\x00", "a\nb", "é", "😀", "\x1b[2J",
              LONG, "../..", "/dev/null", "/"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A result store with a real version and damaged copies, and outcome tables."""
    import pandas as pd

    root = tmp_path_factory.mktemp("cli")
    store = root / "store"
    shutil.copytree(ROOT / "results" / "e8_matrix" / "v1", store / "e8_matrix" / "v1")
    manifests = {"notjson": "{", "list": "[1]", "specstr": '{"spec": "x"}', "empty": "",
                 "deep": "[" * 100_000 + "]" * 100_000, "nul": "\x00",
                 "counts": '{"row_counts": 3, "confidence_level": "x"}'}
    for name, text in manifests.items():
        version = store / f"bad_{name}" / "v1"
        shutil.copytree(store / "e8_matrix" / "v1", version)
        (version / "manifest.json").write_text(text)
    rows = [{"condition": c, "seed": 0, "eval_noise": 0.0, "noise_seed": 0,
             "item_id": f"i{i}", "correct": (i * 7 + len(c)) % 3 % 2}
            for c in "AB" for i in range(12)]
    ok = pd.DataFrame(rows)
    ok.to_csv(root / "ok.csv", index=False)
    (root / "empty.csv").write_text("")
    (root / "header.csv").write_text(",".join(ok.columns) + "\n")
    (root / "columns.csv").write_text("a,b\n1,2\n")
    ok.assign(correct=2).to_csv(root / "two.csv", index=False)
    ok.assign(correct=ok["correct"].where(ok.index > 0)).to_csv(root / "nan.csv", index=False)
    ok.assign(eval_noise="x").to_csv(root / "noise.csv", index=False)
    (root / "garbage.parquet").write_bytes(b"\xff\x00garbage" * 10)
    (root / "rows.jsonl").write_text('{"condition": "A"}\n[1, 2]\nnot json\n')
    (root / "bad.yaml").write_text("name: [\n")
    shutil.copy(ROOT / "studies" / "e8_smoke.yaml", root / "smoke.yaml")
    (root / "nodata").mkdir()
    return {"root": str(root), "store": str(store), "ok": str(root / "ok.csv"),
            "smoke": str(root / "smoke.yaml"), "out": str(root / "out"),
            **{f"bad_{k}": str(store / f"bad_{k}" / "v1") for k in manifests},
            **{name: str(root / name) for name in (
                "empty.csv", "header.csv", "columns.csv", "two.csv", "nan.csv", "noise.csv",
                "garbage.parquet", "rows.jsonl", "bad.yaml", "nodata")}}


def _base(command: str, f: dict[str, str]) -> list[str]:
    """A valid, fast vector of each command."""
    return {
        "power": ["power", "--effect", "0.03", "--discordance", "0.1"],
        "analyze": ["analyze", f["ok"], "--n-resamples", "20"],
        "study": ["study", f["smoke"], "--check"],
        "results list": ["results", "--root", f["store"], "list"],
        "results show": ["results", "--root", f["store"], "show", "e8_matrix"],
        "results verify": ["results", "--root", f["store"], "verify", "e8_matrix/v1"],
        "results diff": ["results", "--root", f["store"], "diff", "e8_matrix/v1",
                         "e8_matrix/v1"],
    }[command]


def _flag(command: str, flag: str, f: dict[str, str]
          ) -> tuple[st.SearchStrategy[str], st.SearchStrategy[str]]:
    """(valid values, clearly invalid values) of one flag, from its --help."""
    probability = (st.sampled_from(["0.01", "0.05", "0.2", "0.5"]),
                   st.sampled_from(["nan", "inf", "-inf", "0", "1", "1.5", "-0.1", "x", ""]))
    choices = {
        "--format": ["table", "json"], "--holes": ["drop", "raise"],
        "--mcnemar": ["clustered", "mantel-haenszel"],
        "--alternative": ["two-sided", "greater", "less"],
        "--multiplicity": ["holm", "fdr_bh", "bonferroni", "none"],
    }
    if flag in choices:
        return (st.sampled_from(choices[flag]),
                st.sampled_from(["x", "", "HOLM", "json ", "nan", "\x00"]))
    table = {
        ("power", "--discordance"): (st.sampled_from(["0.08", "0.2", "0.5"]),
                                     probability[1]),
        ("power", "--power"): (st.sampled_from(["0.5", "0.8", "0.95"]), probability[1]),
        ("power", "--alpha"): probability,
        ("power", "--effect"): (st.sampled_from(["0.02", "0.05"]),
                                st.sampled_from(["nan", "inf", "-inf", "x", "1.5", "-2", ""])),
        ("power", "--pilot"): (st.nothing(), st.sampled_from(
            [LONG, f["empty.csv"], f["garbage.parquet"], f["nodata"], "/nonexistent.csv",
             "\x00"])),
        ("analyze", "--alpha"): probability,
        ("analyze", "--confidence-level"): (st.sampled_from(["0.9", "0.99"]),
                                            probability[1]),
        ("analyze", "--n-resamples"): (st.sampled_from(["10", "30"]), st.sampled_from(
            ["0", "-1", "1000000000000", "1.5", "x", "nan"])),
        ("analyze", "--rng-seed"): (st.sampled_from(["0", "7", "4294967295"]),
                                    st.sampled_from(["-1", "4294967296", "x", "1.5"])),
        ("analyze", "--reference"): (st.just("A"), st.sampled_from(["C", "a", "", "\x00"])),
        ("analyze", "--study"): (st.nothing(), st.sampled_from(
            [LONG, f["bad.yaml"], f["nodata"], "/nonexistent.yaml", f["ok"], "\x00"])),
        ("analyze", "SOURCE"): (st.nothing(), st.sampled_from(
            [LONG, "/nonexistent.csv", f["empty.csv"], f["header.csv"], f["columns.csv"],
             f["two.csv"], f["nan.csv"], f["noise.csv"], f["garbage.parquet"],
             f["rows.jsonl"], f["nodata"], f["bad_notjson"], f["bad_list"],
             f["bad_specstr"], f["bad_empty"], f["bad_deep"], f["bad_nul"], "\x00"])),
        ("study", "--seeds"): (st.sampled_from(["1", "3", "1000"]),
                               st.sampled_from(["0", "-1", "1001", "10" * 20, "x", "1.5"])),
        ("study", "--n-items"): (st.sampled_from(["1", "10", "1000000"]),
                                 st.sampled_from(["0", "-3", "1000001", "x", "nan"])),
        ("study", "--noise-seeds"): (st.sampled_from(["1", "4", "1000"]),
                                     st.sampled_from(["0", "1001", "x", "-2"])),
        ("study", "--workers"): (st.sampled_from(["1", "2", "256"]),
                                 st.sampled_from(["0", "257", "100000", "x"])),
        ("study", "STUDY_FILE"): (st.nothing(), st.sampled_from(
            [LONG, f["bad.yaml"], f["ok"], f["nodata"], "/nonexistent.yaml", "\x00",
             f["garbage.parquet"]])),
        ("results diff", "--rtol"): (st.sampled_from(["0", "1e-6", "0.5"]),
                                     st.sampled_from(["nan", "inf", "-1", "x"])),
        ("results show", "VERSION"): (st.sampled_from(["e8_matrix", "e8_matrix/v1"]),
                                      st.sampled_from(
            ["nope", "e8_matrix/v99", "e8_matrix/v0", LONG, "\x00", "bad_notjson",
             "bad_list", "bad_deep", "bad_empty", "e8_matrix/v99999999999999999999"])),
        ("results verify", "VERSION"): (st.sampled_from(["e8_matrix", "e8_matrix/v1"]),
                                        st.sampled_from(["nope", "e8_matrix/v2", LONG,
                                                         "bad_list", "bad_deep"])),
    }
    return table[(command, flag)]


FLAGS = {
    "power": ["--discordance", "--power", "--alpha", "--effect", "--pilot", "--format",
              "--alternative"],
    "analyze": ["--alpha", "--confidence-level", "--n-resamples", "--rng-seed", "--reference",
                "--study", "SOURCE", "--format", "--holes", "--mcnemar", "--multiplicity"],
    "study": ["--seeds", "--n-items", "--noise-seeds", "--workers", "STUDY_FILE",
              "--format"],
    "results list": ["--format"],
    "results show": ["VERSION", "--format"],
    "results verify": ["VERSION", "--format"],
    "results diff": ["--rtol", "--format"],
}

#: each command as likely as the others (results' four actions share one quarter)
COMMANDS = st.sampled_from(["power", "analyze", "study", "results"]).flatmap(
    lambda c: st.just(c) if c != "results" else st.sampled_from(
        ["results list", "results show", "results verify", "results diff"]))


def _with(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag`` set to ``value`` (an operand replaces the base's)."""
    argv = list(argv)
    if flag == "SOURCE":
        argv[1] = value
    elif flag == "STUDY_FILE":
        argv[1] = value
    elif flag == "VERSION":
        argv[-1] = value
    elif flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    return argv


@st.composite
def flag_cases(draw: st.DrawFn, files: dict[str, str]) -> tuple[list[str], str, str, str]:
    command = draw(COMMANDS)
    flag = draw(st.sampled_from(FLAGS[command]))
    valid, invalid = _flag(command, flag, files)
    want_valid = draw(st.booleans()) and not valid.is_empty
    # a valid analysis computes (about a second): keep those few
    if command == "analyze" and want_valid:
        want_valid = draw(st.integers(0, 3)) == 0
    value = draw(valid if want_valid else invalid)
    argv = _with(_base(command, files), flag, value)
    return argv, ("valid" if want_valid else "invalid"), flag, value


def test_every_base_vector_is_accepted(files: dict[str, str]) -> None:
    for command in FLAGS:
        assert_accepted(run_cli(_base(command, files)))


@SETTINGS
@given(data=st.data())
def test_one_flag_valid_or_invalid(data: st.DataObject, files: dict[str, str]) -> None:
    argv, verdict, flag, value = data.draw(flag_cases(files))
    event(f"{argv[0]} {verdict}")
    outcome = run_cli(argv)
    if verdict == "valid":
        assert_accepted(outcome)
    else:
        # the line names the flag, or the input it could not use (a path: its start)
        shown = [v[:40] for v in (value, repr(value)[1:-1]) if len(v) > 3]
        names = (*shown, flag, flag.lstrip("-"), flag.lstrip("-").replace("-", "_"), "argument",
                 "outcomes", "column", "manifest", "study", "result", "version", "file",
                 "no such",
                 "does not exist", "not a")
        assert_rejected(outcome, *names)


@st.composite
def random_vectors(draw: st.DrawFn, files: dict[str, str]) -> list[str]:
    command = draw(COMMANDS)
    flags = [f for f in FLAGS[command] if f.startswith("--")] + ["--bogus", "-h"]
    paths = [files["ok"], files["smoke"], files["store"], files["bad_list"],
             files["garbage.parquet"], files["nodata"]]
    token = st.one_of(st.sampled_from(flags), st.sampled_from(NASTY_TEXT),
                      st.sampled_from(paths), st.text(max_size=12))
    argv = _base(command, files)[: 1 if command in ("power", "analyze", "study") else 4]
    argv += draw(st.lists(token, max_size=6))
    if command == "study":
        argv.append("--check")  # never train in a test
    if command == "analyze":
        argv += ["--n-resamples", "10"]
    return argv


@settings(SETTINGS, max_examples=60)
@given(data=st.data())
def test_random_vectors_keep_the_contract(data: st.DataObject, files: dict[str, str]) -> None:
    argv = data.draw(random_vectors(files))
    outcome = run_cli(argv)
    event(f"{argv[0]} exit {outcome.code}")
    # -h prints help and exits 0; verify and diff exit 1 on a difference (documented)
    check_contract(outcome, may_exit_1=argv[:1] == ["results"])


@pytest.mark.parametrize("argv", [
    ["power", "--effect", "1"],
    ["power", "--effect", "1e-320"],
    ["power", "--effect", "0.03", "--plot", "x.txt"],
    ["nope"], ["study"], ["analyze"], ["results"], ["results", "show"],
    ["study", "a\nb.yaml", "--check"], ["analyze", "a\nb.csv"],
])
def test_reported_vectors_keep_the_contract(argv: list[str], files: dict[str, str],
                                            tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    check_contract(run_cli(argv))


def test_damaged_manifests_are_one_line_errors(files: dict[str, str]) -> None:
    for name in ("bad_notjson", "bad_list", "bad_deep", "bad_empty", "bad_nul"):
        line = assert_rejected(run_cli(["analyze", files[name]]), "manifest")
        assert "manifest.json" in line
        study = Path(files[name]).parent.name
        assert_rejected(run_cli(["results", "--root", files["store"], "show", study]),
                        "manifest.json")
    listed = run_cli(["results", "--root", files["store"], "list", "--format", "json"])
    assert_accepted(listed)
    versions = {v["version"]: v for v in json.loads(listed.stdout)["versions"]}
    assert versions["bad_counts/v1"]["outcomes"] is None
