"""Where the derivation scripts of this folder read and write: one place, with a default inside the repository.

* ``--mirrors DIR`` (default ``bench/mlperf_heldout/mirrors/``, ignored by git): git copies of the MLPerf result
  repositories, one folder per repository named ``owner+name`` holding it in ``repo/`` (a bare clone is enough), e.g.
  ``git clone --bare https://github.com/mlcommons/training_results_v1.1 mirrors/mlcommons+training_results_v1.1/repo``
  (likewise v1.0, v2.0, v3.0).  The scripts read them with ``git show HEAD:<path>`` and ``git ls-tree``.
* ``--out DIR`` (default ``bench/mlperf_heldout/out/``, ignored by git): what ``build.py`` and ``provenance.py``
  write before a row is merged by hand into ``resources/validation/`` (``gpu_rows.py`` writes its CSV there itself).

Both options are taken out of ``sys.argv`` when a script imports this module; the rest stays in ``ARGV``.
"""
import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VALIDATION = ROOT / "resources" / "validation"  # the measured rows the derivation reproduces, and its outputs

_p = argparse.ArgumentParser(add_help=False)
_p.add_argument("--mirrors", type=Path, default=HERE / "mirrors")
_p.add_argument("--out", type=Path, default=HERE / "out")
_opts, ARGV = _p.parse_known_args(sys.argv[1:])
MIRRORS, OUT = _opts.mirrors.resolve(), _opts.out.resolve()


def mirror(repo: str) -> str:
    """The git directory of ``owner/name`` under MIRRORS."""
    return str(MIRRORS / repo.replace("/", "+") / "repo")


def results_repo(rnd: str) -> str:
    """The git directory of mlcommons/training_results_<rnd> (rnd: v1.0, v1.1, v2.0, ...)."""
    return mirror("mlcommons/training_results_" + rnd)
