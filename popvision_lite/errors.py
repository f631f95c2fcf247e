"""Error types shared by every layer.

Every error a user can cause (a bad file, a bad argument, a graph that is wrong)
is raised as one of these, with a message that names the file / field / object and
what is wrong.  Library exceptions (h5py, numpy, tomllib ...) never escape raw.
"""

from __future__ import annotations


class PopvisionError(Exception):
    """Base class of every error popvision-lite raises on purpose."""


class ProfileError(PopvisionError):
    """A profile file is missing, unreadable, truncated, of another format or inconsistent."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ProfileVersionError(ProfileError):
    """The profile was written by a newer, incompatible format version."""


class DeviceSpecError(PopvisionError):
    """A device spec TOML is malformed: names the file and the field."""

    def __init__(self, path, field: str, problem: str):
        self.path = str(path)
        self.field = field
        self.problem = problem
        super().__init__(f"{self.path}: field '{field}': {problem}")


class EmulatorError(PopvisionError):
    """A graph or program given to the emulator is malformed (names the tensor/vertex/program and the fix)."""


class OutOfMemoryError(EmulatorError):
    """Some tiles need more SRAM than they have.  The profile is still written; `profile_path` says where."""

    def __init__(self, message: str, worst_tiles=(), profile_path=None):
        self.worst_tiles = list(worst_tiles)  # [(global_tile, bytes_needed, capacity), ...]
        self.profile_path = profile_path
        super().__init__(message)


class ConfigError(PopvisionError):
    """A command-line argument or TOML run config is invalid (names the field)."""


class ArgumentTypeError(ConfigError, TypeError):
    """A Python API argument of the wrong type (names the argument): a ``TypeError``, as Python and pandas raise
    for one, and a ``ConfigError`` like every other bad argument of this package."""


class ArgumentValueError(ConfigError, ValueError):
    """A Python API argument of the right type with a wrong value (names the argument): a ``ValueError`` and a
    ``ConfigError``."""
