"""Menu actions of the main window, one module per menu job: :mod:`.export` (File > Export), :mod:`.run`
(Run > New emulation / Re-run with), :mod:`.sweep` (opening a sweep's results as a tab).  Each action
module that adds menu entries has ``install(main_window)`` (``main_window.EXTENSIONS``)."""
