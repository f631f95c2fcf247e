"""``python -m popvision_lite ...``: the same as the ``popvision-lite`` script (and ``python -m
popvision_lite.cli``), for an environment whose scripts folder is not on PATH."""

from popvision_lite.cli.main import program

program()
