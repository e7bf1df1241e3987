from dataclasses import dataclass, field
from pathlib import Path


class BuildError(Exception):
    """A build failure to show the user: `where` is file:line[:col] when known."""

    def __init__(self, message: str, where: str | None = None):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


@dataclass
class Context:
    root: Path  # the repository
    out: Path  # the temporary dist folder being built (swapped in at the end)
    cache: Path  # .cache/, kept between builds (downloads, prepared corpora)
    assets: dict[str, str] = field(default_factory=dict)  # logical name -> URL of a hashed asset
    pages: list[dict] = field(default_factory=list)  # what pages.py rendered (url, title, date, source, ...)
    notes: list[str] = field(default_factory=list)  # things a step skipped, shown after the summary
