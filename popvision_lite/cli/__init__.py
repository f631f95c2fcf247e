"""The ``popvision-lite`` command line: one module per sub-command, all in this package.

* :mod:`.main` - the entry point: dispatches ``popvision-lite SUBCOMMAND ...`` to the module that owns it,
  or opens the desktop app;
* :mod:`.emulate` (+ :mod:`.emulate_onnx`, its ``--onnx`` branch), :mod:`.export`, :mod:`.info`,
  :mod:`.make_samples`, :mod:`.sweep`, :mod:`.validate`, :mod:`.verdict` - one sub-command each, with
  ``add_arguments(parser)`` and ``run(args) -> int``;
* :mod:`.args` - the argument types and output checks the sub-commands share.

This package is the top layer (``pyproject.toml`` [tool.importlinter]): it may import everything, and
nothing in ``popvision_lite`` imports it.  Exit codes: 0 ok, 2 bad argument / input, 3 out of memory
(profile written), 1 unexpected error.
"""

from popvision_lite.cli.main import SUBCOMMANDS, main

__all__ = ["SUBCOMMANDS", "main"]
