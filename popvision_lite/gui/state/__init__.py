"""What the desktop app knows about its open profiles, apart from any widget: the :class:`Document` (one
open profile, its analysis cache, its selection), the :class:`SelectionModel` every view of a document
shares, writing resolved op / program selections to it (:mod:`.resolve`) and loading a profile off the
GUI thread (:mod:`.loading`).  Qt-bound (QObject signals): docs/decisions/0016."""
