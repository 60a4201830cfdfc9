"""Every option combination of `ncet` that is wrong ends in one line saying what to type
(exit status 2) or in the command's own verdict (1), never in a Python traceback: a table of
bad values per option and command, run in this process (an exception would escape `main`)."""

from __future__ import annotations

import pytest

from tests.test_cli import call

BAD_VALUES = {
    "--batch": ["0", "-1", "x", "1.5", str(2**64), ""],
    "--opset": ["0", "-1", "x", "99", ""],
    "--samples": ["0", "-1", "x", str(10**12), ""],
    "--seed": ["-1", "x", str(2**64), ""],
    "--input-shape": ["0", "-1", "x", "3,,3", "", "100000,100000"],
}
"""Values each option refuses (exit status 2), at parse time or, for an opset outside the
range onnx has, when exporting starts."""

OPTIONS_OF = {
    "export": ("--batch", "--opset", "--samples", "--seed", "--input-shape"),
    "report": ("--batch", "--opset", "--samples", "--seed", "--input-shape"),
    "check": ("--samples", "--seed", "--input-shape"),
    "inspect": ("--input-shape",),
    "convert": ("--input-shape",),
}


def _command(command: str, tmp_path) -> list[str]:
    output = {"export": "m.onnx", "report": "r.html", "convert": "m.ncet"}.get(command)
    extra = ["--export", "--check"] if command == "report" else (
        ["--check"] if command == "export" else [])
    return [command, "mlp", *(["-o", str(tmp_path / output)] if output else []), *extra]


PARSE_ERRORS = [(command, option, value) for command, options in OPTIONS_OF.items()
                for option in options for value in BAD_VALUES[option]]


@pytest.mark.parametrize("command, option, value", PARSE_ERRORS,
                         ids=[f"{c}{o}={v[:12]}" for c, o, v in PARSE_ERRORS])
def test_a_bad_option_value_is_one_line_and_status_2(tmp_path, capsys, command, option, value):
    status, out, err = call(capsys, *_command(command, tmp_path), f"{option}={value}")
    assert status == 2 and out == ""
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"ncet {command}: error: ") and option.lstrip("-") in last, err
    assert "Traceback" not in err


# Combinations that parse but do not fit the model or each other: the model's verdict (1) or
# a usage error (2), and always a message.
MISMATCHES = [
    ("inspect", "mlp", "--input-shape", "3"),
    ("inspect", "mlp", "--input-shape", "4", "--input-shape", "4"),
    ("inspect", "mlp", "--input-shape", "3,32,32"),
    ("check", "mlp", "--input-shape", "7", "--samples", "1"),
    ("convert", "mlp", "--input-shape", "5", "-o", "{tmp}/m.ncet"),
    ("export", "mlp", "--input-shape", "3,32,32", "-o", "{tmp}/m.onnx"),
    ("export", "mlp", "--profile", "verifier", "--batch", "5", "-o", "{tmp}/m.onnx"),
    ("export", "mlp", "--batch", "5", "--check", "--samples", "1", "-q", "-o", "{tmp}/m.onnx"),
    ("export", "mlp", "--batch", "7", "--check", "--samples", "1", "-q", "-o", "{tmp}/m.onnx"),
    ("export", "mlp", "--batch", "4096", "--check", "-o", "{tmp}/m.onnx"),
    ("export", "mlp", "--opset", "18", "--batch", "2", "--check", "--samples", "1", "-q",
     "-o", "{tmp}/m.onnx"),
    ("report", "mlp", "--export", "--batch", "5", "--check", "--samples", "1", "-q",
     "-o", "{tmp}/r.html"),
    ("report", "mlp", "--batch", "5", "-o", "{tmp}/r.html"),
    ("report", "mlp", "--input-shape", "3", "--export", "--check", "-o", "{tmp}/r.html"),
    ("diff", "mlp", "mlp", "--input-shape", "5"),
    ("diff", "{tmp}", "mlp"),
    ("show", "{tmp}"),
    ("show", "{tmp}/none.ncet"),
]


@pytest.mark.parametrize("args", MISMATCHES, ids=[" ".join(a) for a in MISMATCHES])
def test_a_combination_that_does_not_fit_is_a_message_not_a_traceback(tmp_path, capsys, args):
    status, out, err = call(capsys, *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert status in (0, 1, 2) and (out or err)
    assert "Traceback" not in out + err
    if status == 2 and args[0] != "diff":
        assert err.rstrip("\n").splitlines()[-1].startswith(f"ncet {args[0]}: error: "), err
