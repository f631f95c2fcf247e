"""Opening a profile as a document: the work done on a pool thread before the window shows it."""

from __future__ import annotations

from pathlib import Path


def prefetch_first_view(task, profile) -> dict:
    """Work done in the loader thread so the first view (Summary) shows without waiting."""
    from popvision_lite.analysis.summary import summarize
    from popvision_lite.gui.state.analysis_store import STORE, identity_of

    def summarise():
        task.progress(0.5, "summarising")
        return summarize(profile)

    # this file's summary, when it was open before (decision 0456)
    return {"summary": STORE.computed(identity_of(profile), "summary", summarise)}


def load_document_data(task, path: str):
    """Loader run on a pool thread: open the profile and prefetch the first view's analysis."""
    from popvision_lite.profile.reader import open_profile

    task.progress(0.05, f"opening {Path(path).name}")
    profile = open_profile(path)
    try:
        task.check_cancelled()
        cache = prefetch_first_view(task, profile)
        task.progress(1.0, "done")
    except BaseException:
        profile.close()
        raise
    return profile, cache


def warm_up(task) -> None:
    """Import the profile reader (h5py: ~0.5 s cold) and analysis modules while the start page shows,
    so opening the first profile does not pay for it."""
    import popvision_lite.analysis.summary  # noqa: F401
    from popvision_lite.profile.reader import preload

    preload()
