"""``python -m popvision_lite.cli ...``: the same as the ``popvision-lite`` script (the GUI's what-if runs
start the emulator this way, in a child process)."""

from popvision_lite.cli.main import program

program()
