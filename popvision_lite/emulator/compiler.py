"""The compile API (``emulator/compile``) under the import path the engine, the pipeline
composition and user scripts use."""

from popvision_lite.emulator.compile import (  # noqa: F401 - re-exported
    K_COMPUTE,
    K_STREAM,
    K_SYNC,
    K_XG,
    K_XI,
    Compiled,
    CopyMemo,
    CopyPlan,
    ProgInfo,
    StepTemplate,
    accesses,
    compile_graph,
    copy_pieces,
)
