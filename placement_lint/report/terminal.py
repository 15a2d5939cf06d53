"""A terminal's report: colours and OSC 8 hyperlinks (a path and its line open the file), drawn with
rich around the styled pieces only. The source lines and messages around them are printed as they
are: a markup language would read `x[i]` in a code frame as a tag.

Only a run printing a human format to a colour terminal imports this module, and rich itself is
imported when the first piece is styled: a clean run prints no styled piece, and output to a pipe
or a file is never styled, so it stays byte for byte what the plain style prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

# "path", "location" (path:row:column, or path:cell N:row:column) and "code" name places and rules;
# the others colour the frame.
_STYLES = {
    "path": "bold",
    "location": "bold",
    "code": "bold red",
    "help": "cyan",
    "gutter": "blue",
    "caret": "red",
}
_LOCATION = re.compile(r"^(?P<path>.+?):(?:cell \d+:)?(?P<row>\d+)(?::\d+)?$")


def link_target(text: str, cwd: Path) -> str | None:
    """The `file://` URI a styled path (or `path:row:column`) opens, with the row as `#L<row>`."""
    match = _LOCATION.match(text)
    name, row = (match.group("path"), match.group("row")) if match else (text, None)
    path = Path(name)
    path = path if path.is_absolute() else cwd / path
    if not path.exists():
        return None
    uri = path.resolve().as_uri()
    return f"{uri}#L{row}" if row else uri


def terminal_style(cwd: Path) -> Callable[[str, str], str]:
    """`style(text, name)` for a colour terminal: rich's ANSI codes, and a hyperlink on paths."""
    cache: dict[str, Any] = {}

    def style(value: str, name: str) -> str:
        if not cache:
            from rich.color import ColorSystem
            from rich.style import Style

            cache["system"] = ColorSystem.STANDARD
            cache["styles"] = {key: Style.parse(spec) for key, spec in _STYLES.items()}
            cache["Style"] = Style
        chosen = cache["styles"][name]
        if name in ("path", "location"):
            target = link_target(value, cwd)
            if target is not None:
                chosen = chosen + cache["Style"](link=target)
        return chosen.render(value, color_system=cache["system"])

    return style


def rich_table(header: list[str], rows: list[list[str]], right_from: int, code_column: bool = True) -> list[str]:
    """A table drawn by rich for a terminal: the columns from `right_from` on are numbers, right-aligned."""
    import io

    from rich.console import Console
    from rich.table import Table, box

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for number, title in enumerate(header):
        table.add_column(title, justify="right" if number >= right_from else "left", no_wrap=True)
    for row in rows:
        table.add_row(*row, style=None)
    if code_column:
        table.columns[0].style = "bold red"
    buffer = io.StringIO()
    Console(file=buffer, force_terminal=True, color_system="standard", width=200).print(table)
    return [line.rstrip() for line in buffer.getvalue().splitlines()]
