import os

# GUI tests run offscreen unless a real display was asked for explicitly.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
