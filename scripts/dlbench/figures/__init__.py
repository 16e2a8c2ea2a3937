"""One module per benchmark family. Each defines FAMILY (the <op> prefix of
its cases) and figures(results_list) -> {file stem: matplotlib Figure}; it may
define table(results) -> markdown for the generated blocks of README.md
and docs/*.md (scripts/readme.py). plot.py finds the modules
here by themselves: adding a family's plots means adding one file."""

import importlib
import pkgutil


def modules():
    """The figure modules, in name order."""
    return [
        importlib.import_module(f"{__name__}.{m.name}")
        for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
        if not m.name.startswith("_")
    ]
