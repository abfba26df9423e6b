"""The tools' progress line: drawn on a terminal, silent in logs and pipes."""

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
