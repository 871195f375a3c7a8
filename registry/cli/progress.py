"""Progress of long work: rich's bar at a terminal, plain lines elsewhere.

rich draws nothing when stderr is not a terminal, so `nodereg profile ... | tee log` or a CI job
showed no sign of life for minutes (issue 32). There the same progress is said in lines on stderr,
each ending in `, M:SS elapsed`: as a step of the work ends, a first line once PLAIN_MIN_S seconds
have passed, then one at each further tenth of the work or after PLAIN_EVERY_S seconds, whichever
comes first, but never more often than PLAIN_MIN_S apart (work shorter than that prints none, so a
quick command's output, or its one-line error, is all there is).
"""

import time

from rich.console import Console
from rich.progress import Progress as RichProgress
from rich.progress import TaskID

from registry.cli.output import say_on

PLAIN_EVERY_S = 15.0   # a line at least this often while the work goes on
PLAIN_MIN_S = 2.0      # ... and at most this often (a tenth of a short job is not worth a line)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


class Progress(RichProgress):
    """rich's Progress, which at a terminal it is; elsewhere its display is off and each task's state
    is printed as a line: `plain` formats it (a str.format template over `task`, as rich's columns;
    by default the description), followed by the share done and the time elapsed."""

    def __init__(self, *columns, console: Console, plain: str = "{task.description}", transient: bool = True):
        self._plain = None if console.is_terminal else plain
        super().__init__(*columns, console=console, transient=transient, disable=self._plain is not None)
        self._said: dict[TaskID, tuple[float, float | None]] = {}   # task -> when and share done of its
                                                                     # last line (None: none yet; when: added)

    def add_task(self, description: str, *args, **kwargs) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        self._said[task_id] = (time.monotonic(), None)
        return task_id

    def update(self, task_id: TaskID, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._say(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._say(task_id)

    def _say(self, task_id: TaskID) -> None:
        if self._plain is None:
            return
        with self._lock:
            task = self._tasks[task_id]
        share = task.completed / task.total if task.total else None
        now = time.monotonic()
        when, said = self._said[task_id]
        if now - when < PLAIN_MIN_S or (said is not None and now - when < PLAIN_EVERY_S and
                                        (share is None or share - said < 0.1)):
            return
        self._said[task_id] = (now, share or 0.0)
        done = f", {share:.0%} done" if share is not None else ""
        say_on(self.console, f"{self._plain.format(task=task)}{done}, {_clock(task.elapsed or 0)} elapsed", indent=2)
