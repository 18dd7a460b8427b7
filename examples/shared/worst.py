"""The worst error an example's tests saw, as a fraction of its bound, and the test that saw
it: the comparison helpers record it, and examples/conftest.py prints it after the run, so that
a run shows its margin and not only that it passed."""

import os
from typing import ClassVar

__all__ = ["Worst"]


class Worst:
    """The largest error / bound recorded in this process, at most 1 (a larger one fails its
    assert, which reports it)."""

    # Every Worst of this process, for examples/conftest.py's summary.
    made: ClassVar[list["Worst"]] = []

    def __init__(self, label):
        self.label = label  # what the summary line names: the op or the check
        self.fraction = 0.0
        self.test = ""
        Worst.made.append(self)

    def record(self, fraction):
        if self.fraction < fraction <= 1.0:
            self.fraction = fraction
            self.test = os.environ.get("PYTEST_CURRENT_TEST", "? ").rsplit(" ", 1)[0]

    def summary(self):
        return f"{self.label}: worst error {100 * self.fraction:.1f}% of its bound, in {self.test}"
