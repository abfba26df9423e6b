"""The tools' progress line (redrawn on a terminal, plain periodic lines in logs) and
`--json -` keeping stdout for the JSON alone."""

import io

from flagos_torchfl.tools._output import progress


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_each_step_on_a_terminal_and_clears_the_line():
    stream = _Tty()
    assert list(progress(range(3), "training", stream)) == [0, 1, 2]
    text = stream.getvalue()
    for i in (1, 2, 3):
        assert f"\rtraining {i}/3" in text
    assert text.endswith("\r")  # the line is blanked out afterwards


def test_progress_writes_nothing_when_not_a_terminal():
    stream = io.StringIO()
    assert list(progress(range(3), "training", stream)) == [0, 1, 2]
    assert stream.getvalue() == ""


def test_progress_writes_plain_lines_when_not_a_terminal_and_slow():
    # A 40 s validation printed nothing until the end in a CI log.
    stream = io.StringIO()
    assert list(progress(range(3), "training", stream, every=0.0)) == [0, 1, 2]
    assert stream.getvalue() == "training 1/3\ntraining 2/3\n"  # no escape codes


def test_json_to_stdout_stays_json_when_the_model_prints(tmp_path):
    # `--json -` was corrupted by any print in the user's model file.
    import json

    from tool_models.cli import explain, run_cli

    chatty = tmp_path / "chatty.py"
    chatty.write_text(
        "import os, torch\n"
        "print('hello from the model file')\n"
        "def get_model():\n"
        "    print('building the model')\n"
        "    os.write(1, b'native code writing to fd 1\\n')\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Linear(4, 2), (torch.randn(3, 4),)\n"
    )
    proc = run_cli("validate", "--level", "2", "--backend", "host", "--model", str(chatty),
                   "--json", "-")  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    data = json.loads(proc.stdout)
    assert data["ok"] is True
    for line in ("hello from the model file", "building the model", "native code writing"):
        assert line in proc.stderr
