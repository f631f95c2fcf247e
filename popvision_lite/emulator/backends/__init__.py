"""Model backends: one model definition, two ways to run it (``backend.NumpyBackend``: the numpy reference;
``emulator_backend.EmulatorBackend``: an emulator graph), and a third that only plans
(``planning.PlanOnlyBackend``: shapes through the tile planners).  The bundled models (``emulator/models``) and the ONNX
import (``emulator/onnx_import``) both build on them."""
