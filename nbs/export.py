"""Export the notebooks into the package: `nbdev_export`, with one difference.

A notebook may write several modules: its `#| default_exp` module and others named in `#| export NAME` /
`#| exports NAME` cells (chapter 05 writes `batch`, `schedule`, `loss` and `epoch`). nbdev 2.4.14 writes only the
default module anew and *appends* to the others, assuming that another notebook created them, so a second export
would repeat their code. Here every module is written anew by its one notebook (`tests/test_repo.py` checks that no
module is written by two). Run `python nbs/export.py` from anywhere in the repository; the last cell of each notebook
calls `export()`.
"""
import os
from collections import Counter
from pathlib import Path

from nbdev.config import add_init, get_config
from nbdev.doclinks import _build_modidx, nbglob
from nbdev.export import ExportModuleProc, nb_export
from nbdev.maker import ModuleMaker
from nbdev.process import NBProcessor


class _WrittenAnew(ModuleMaker):
    "nbdev's module writer, always in its 'new module' mode."
    def __init__(self, dest, name, nb_path, is_new=True, parse=True, solo_nb=False):
        super().__init__(dest, name, nb_path, is_new=True, parse=parse, solo_nb=solo_nb)


def modules_by_notebook() -> dict:
    "`{notebook file name: [modules it writes]}`, the default module first."
    out = {}
    for nb in nbglob(as_path=True).sorted("name"):
        proc = ExportModuleProc()
        NBProcessor(nb, [proc]).process()
        names = [getattr(proc, "default_exp", None) if m == "#" else m
                 for m, cells in proc.modules.items() if any(c.cell_type == "code" for c in cells)]
        if names:
            out[nb.name] = names
    return out


def export():
    "Write every module of the package from its notebook, then `__init__.py`'s version and `_modidx.py`."
    if os.environ.get("IN_TEST"):                                       # as nbdev_export: not while notebooks are tested
        return
    twice = [m for m, n in Counter(m for ms in modules_by_notebook().values() for m in ms).items() if n > 1]
    if twice:
        raise SystemExit(f"modules written by more than one notebook: {twice}")
    for nb in nbglob(as_path=True).sorted("name"):
        nb_export(nb, mod_maker=_WrittenAnew)
    add_init(get_config().lib_path)
    _build_modidx()


if __name__ == "__main__":
    os.chdir(Path(__file__).resolve().parent)
    export()
