"""Tests of popvision_lite/emulator: numerics against the numpy references, cycles against hand
calculations and Poplar's own estimators, memory and liveness, planners, schedules, the bundled models and
ONNX import.  Profiles written here are read back with the real reader."""
