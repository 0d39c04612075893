"""Progress bars for long work (rich), quiet when stderr is not a terminal and BENCHMARK_PROGRESS=0."""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def progress(label: str, total: int) -> Iterator[Callable[[str], None]]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    disable = os.environ.get("BENCHMARK_PROGRESS") == "0"
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[item]}"), transient=False, disable=disable) as bar:
        task = bar.add_task(label, total=total, item="")
        started = [False]

        def step(item: str) -> None:
            if started[0]:
                bar.advance(task)
            started[0] = True
            bar.update(task, item=item)

        yield step
        if started[0]:
            bar.advance(task)
        bar.update(task, item="done")
