"""What a ``popvision-lite`` process imports before it does its work (issue 49 item 3, issue 42 item 5: every CLI
process of the suite and of a sweep pays its start-up).  ``emulate --help`` and an ``emulate`` refused for its
arguments import neither numpy nor pandas (0.6-0.8 s CPU of such a process), and a whole ``emulate`` run imports
no library it does not use (ONNX, Dask, SciPy, matplotlib, Qt, torch).  Behaviour, not timing: the names in
``sys.modules`` of a fresh interpreter, checked after each step."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, sys
    HEAVY = ("numpy", "pandas", "h5py", "hdf5plugin", "onnx", "onnxruntime", "dask", "distributed", "scipy",
             "matplotlib", "PySide6", "pyqtgraph", "torch")
    def loaded():
        return sorted(m for m in HEAVY if m in sys.modules)
    seen = {}
    from popvision_lite.cli.main import main
    seen["cli.main"] = loaded()
    import popvision_lite.cli.emulate, popvision_lite.cli.info  # noqa: E401
    seen["the emulate and info commands' modules"] = loaded()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(["emulate", "--help"])
        except SystemExit as e:
            assert e.code == 0, e.code
    assert "--timing-only" in out.getvalue()
    seen["emulate --help"] = loaded()
    with contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(["emulate", "mlp", "--batch", "0", "--timing-only", "-o", sys.argv[1]])
    assert rc == 2 and "--batch" in err.getvalue(), (rc, err.getvalue())
    seen["emulate refused for its arguments"] = loaded()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        rc = main(["emulate", "mlp", "--hidden", "64", "--layers", "1", "--batch", "4", "--timing-only", "-q",
                        "-o", sys.argv[1]])
    assert rc == 0 and "fits: yes" in out.getvalue(), (rc, out.getvalue())
    seen["a whole emulate run"] = loaded()
    print(json.dumps(seen))
""")


def test_emulate_imports_only_what_each_step_uses(tmp_path):
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "run.pvl")], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout.splitlines()[-1])
    assert seen == {
        "cli.main": [],
        "the emulate and info commands' modules": [],
        "emulate --help": [],
        "emulate refused for its arguments": [],
        # a run builds its tables as numpy columns, writes them with h5py (Blosc from hdf5plugin) and prints its
        # end-of-run lines from those columns (decision 0471): nothing else
        "a whole emulate run": ["h5py", "hdf5plugin", "numpy"],
    }
    assert (tmp_path / "run.pvl").is_file()
