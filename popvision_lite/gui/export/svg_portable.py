"""Qt's SVG of a plot rewritten in the plain SVG that every renderer draws alike (rsvg, browsers, ImageMagick).

:func:`portable_svg(svg, background)` is applied to every SVG a plot export writes.  What Qt's QSvgGenerator
writes and what goes wrong where (issue 46, items 12 and 15):

* **Scaling matrices.**  Each curve, bar and point sits in its item's coordinates under a group
  ``transform="matrix(...)"`` (a scale of 5e-7 on a cycles axis, 10-1000 on log axes) with
  ``vector-effect="non-scaling-stroke"`` (SVG Tiny 1.2) to keep the pen one pixel wide.  ImageMagick ignores
  that attribute and scales the pen with the matrix (a 2 px line becomes a band hundreds of pixels wide), and
  a hatch pattern in ``userSpaceOnUse`` is scaled by the matrix too (every renderer: the Execution view's
  hatching vanished).  The matrix goes into the coordinates of every path, polyline, polygon and rect of
  such a group and the transform and the attribute go.
* **Hatching.**  Qt draws a brush pattern as a ``<pattern>`` holding a rectangle masked by a ``<mask>`` of
  one-pixel rects; the pattern becomes those rects in the brush's colour, no mask.
* **Embedded images.**  A raster (a tile map, the busy lanes, a colour bar) is a ``data:image/png`` image,
  which ImageMagick 6.9's SVG reader cannot open ("unable to open image `image/png;base64,...`") and
  viewers smooth into a blur.  Each becomes one ``<path>`` per colour of its pixel rectangles (runs of a row,
  merged with the same runs of the rows below), drawn over the image's rectangle with crisp edges; an image
  of more than :data:`MAX_RECTS` rectangles stays an image.
* **Fonts.**  Qt names its default font family "Sans Serif" (a fontconfig alias that rsvg resolves); browsers
  do not know it and drew the labels in a serif font: ``sans-serif`` is added as the fallback.
* **Opacity.**  ImageMagick ignores ``stroke-opacity`` and ``fill-opacity``: a translucent stroke of a group
  of shapes, and a translucent hatch, become the opaque colour they show over ``background``.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET  # noqa: N817 - the usual name

import numpy as np

_SVG_NS = "http://www.w3.org/2000/svg"
_XLINK = "http://www.w3.org/1999/xlink"
_SHAPES = {f"{{{_SVG_NS}}}{t}" for t in ("path", "polyline", "polygon", "rect")}
_MATRIX = re.compile(r"^\s*matrix\(([^)]*)\)\s*$")
_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PAIR = re.compile(f"({_NUM}),({_NUM})")
_URL = re.compile(r"url\(#([^)]+)\)")
_SANS = {"sans serif", "sans", "sansserif"}
MAX_RECTS = 200_000  # rectangles of one image drawn as vectors; a bigger one stays an embedded PNG


def _tag(name: str) -> str:
    return f"{{{_SVG_NS}}}{name}"


def _num(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if np.isfinite(v) else "0"


def _blend_stroke(g, background) -> None:
    """A translucent stroke (a grid line at 15 %) as the opaque colour it shows over ``background``."""
    import pyqtgraph as pg

    colour, alpha = g.get("stroke", ""), g.get("stroke-opacity")
    if alpha is None or not re.fullmatch(r"#[0-9a-fA-F]{6}", colour):
        return
    a = float(alpha)
    if a >= 1.0:
        return
    fg, bg = pg.mkColor(colour), pg.mkColor(background)
    mix = [round(a * f + (1 - a) * b) for f, b in zip(fg.getRgb()[:3], bg.getRgb()[:3], strict=True)]
    g.set("stroke", "#{:02x}{:02x}{:02x}".format(*mix))
    g.set("stroke-opacity", "1")


def _fold_rect(k, a, b, c, d, e, f) -> None:
    """A rect under matrix (a, b, c, d, e, f) in the parent's coordinates: still a rect when the matrix only
    scales and shifts, else the polygon of its corners."""
    x, y = float(k.get("x", 0)), float(k.get("y", 0))
    w, h = float(k.get("width", 0)), float(k.get("height", 0))
    if b == 0 and c == 0:
        x0, x1 = sorted((a * x + e, a * (x + w) + e))
        y0, y1 = sorted((d * y + f, d * (y + h) + f))
        for name, v in (("x", x0), ("y", y0), ("width", x1 - x0), ("height", y1 - y0)):
            k.set(name, _num(v))
        return
    corners = [(x, y), (x + w, y), (x + w, y + h), (x, y + h)]
    pts = " ".join(f"{_num(a * px + c * py + e)},{_num(b * px + d * py + f)}" for px, py in corners)
    for name in ("x", "y", "width", "height"):
        k.attrib.pop(name, None)
    k.tag = _tag("polygon")
    k.set("points", pts)


def _fold_matrix(g) -> None:
    """Move a group's scaling matrix into the coordinates of its shapes (see the module docstring)."""
    kids = list(g)
    m = _MATRIX.match(g.get("transform", ""))
    if m is None or not kids:
        return
    try:
        a, b, c, d, e, f = (float(v) for v in m.group(1).replace(" ", "").split(","))
    except ValueError:
        return
    if (a, b, c, d) == (1.0, 0.0, 0.0, 1.0) and any(k.tag not in _SHAPES for k in kids):
        for k in kids:  # a shift: nothing to scale, the attribute means nothing
            k.attrib.pop("vector-effect", None)
        return
    if any(k.tag not in _SHAPES for k in kids):
        return
    if any(re.search(r"[a-df-z]", k.get("d", "")) for k in kids):
        return  # relative commands (Qt writes none): leave the group as it is

    def move(match):
        x, y = float(match.group(1)), float(match.group(2))
        return f"{_num(a * x + c * y + e)},{_num(b * x + d * y + f)}"

    cosmetic = True
    for k in kids:
        if k.tag == _tag("rect"):
            _fold_rect(k, a, b, c, d, e, f)
        else:
            attr = "d" if k.tag == _tag("path") else "points"
            k.set(attr, _PAIR.sub(move, k.get(attr, "")))
        if k.get("vector-effect") == "non-scaling-stroke":
            del k.attrib["vector-effect"]
        else:
            cosmetic = False
    if not cosmetic and g.get("stroke-width"):
        g.set("stroke-width", _num(float(g.get("stroke-width")) * abs(a * d - b * c) ** 0.5))
    del g.attrib["transform"]


def _flatten_patterns(root) -> None:
    """Qt's ``<pattern>`` of one rect masked by a ``<mask>`` of pixel rects -> a pattern of those pixel rects in
    the rect's colour (masks are drawn differently, or not at all, by rsvg and ImageMagick)."""
    masks = {m.get("id"): m for m in root.iter(_tag("mask"))}
    parents = {c: p for p in root.iter() for c in p}
    used = set()
    for pat in root.iter(_tag("pattern")):
        for r in list(pat):
            ref = _URL.search(r.get("mask", ""))
            if r.tag != _tag("rect") or ref is None or ref.group(1) not in masks:
                continue
            fill = r.get("fill", "#000000")
            pat.remove(r)
            for px in masks[ref.group(1)]:
                if px.tag == _tag("rect"):
                    pat.append(ET.Element(_tag("rect"), {k: px.get(k, "0") for k in ("x", "y", "width", "height")}
                                          | {"fill": fill, "stroke": "none"}))
            used.add(ref.group(1))
    for mid in used:
        m = masks[mid]
        parents[m].remove(m)


def _clip_rects(root) -> dict:
    """{id: ((x0, y0, x1, y1), cuts)} of every clipPath that is one polygon (Qt's clip of a plot area, a
    label's box, a rotated label's box): its bounding box in the coordinates of the group it clips, and
    whether it is that box (axis-aligned: a rect can be cut to it)."""
    out = {}
    for cp in root.iter(_tag("clipPath")):
        kids = list(cp)
        if len(kids) != 1 or kids[0].tag != _tag("path") or cp.get("transform"):
            continue
        d = kids[0].get("d", "")
        pts = [(float(x), float(y)) for x, y in _PAIR.findall(d)]
        if len(pts) < 3 or not re.fullmatch(r"[\sMLZ0-9.,eE+-]*", d):
            continue
        xs, ys = {p[0] for p in pts}, {p[1] for p in pts}
        out[cp.get("id")] = ((min(xs), min(ys), max(xs), max(ys)), len(xs) == 2 and len(ys) == 2)
    return out


def _stale_clips(root) -> set:
    """Ids of the clipPaths Qt writes in the coordinates of the item that set them rather than the page's
    (their path has ``vector-effect="non-scaling-stroke"``): the colour bar's box clipped the legend below it
    away, the axis's own box the plot beside it.  Qt's own painting does not clip by them; neither does the SVG."""
    return {cp.get("id") for cp in root.iter(_tag("clipPath"))
            if any(k.get("vector-effect") == "non-scaling-stroke" for k in cp)}


def _matrix(g) -> tuple[float, ...] | None:
    """(a, b, c, d, e, f) of a group's transform (identity when it has none); None when it is not a matrix."""
    t = g.get("transform")
    if not t:
        return 1.0, 0.0, 0.0, 1.0, 0.0, 0.0
    m = _MATRIX.match(t)
    try:
        return tuple(float(v) for v in m.group(1).replace(" ", "").split(",")) if m else None
    except ValueError:
        return None


def _clip_shape(k, box, mat, apply: bool, cuts: bool = True, tol=0.5) -> bool | None:
    """The clip ``box`` (parent coordinates) and shape ``k`` drawn under matrix ``mat``: True when ``k`` is
    inside it (or, a rect, is cut to it when ``apply``), None when ``k`` lies wholly outside, False when it
    cannot be decided here (the clip must stay).  Text counts as inside when its anchor is: Qt's clip of a
    label is the label's own box."""
    a, b, c, d, e, f = mat
    if k.tag == _tag("text"):
        size = float(k.get("font-size", 12))
        tx, ty = float(k.get("x", 0)), float(k.get("y", 0)) - size / 2
        px, py = a * tx + c * ty + e, b * tx + d * ty + f
        inside = box[0] - tol <= px <= box[2] + tol and box[1] - tol <= py <= box[3] + tol
        return True if inside else None
    if b != 0 or c != 0 or a == 0 or d == 0 or (k.tag not in _SHAPES):
        return False
    if k.tag == _tag("rect") and cuts:
        x, y = float(k.get("x", 0)), float(k.get("y", 0))
        w, h = float(k.get("width", 0)), float(k.get("height", 0))
        bx0, bx1 = sorted((a * x + e, a * (x + w) + e))
        by0, by1 = sorted((d * y + f, d * (y + h) + f))
        nx0, ny0, nx1, ny1 = max(bx0, box[0]), max(by0, box[1]), min(bx1, box[2]), min(by1, box[3])
        if nx1 <= nx0 or ny1 <= ny0:
            return None
        if not apply:
            return True
        ux0, ux1 = sorted(((nx0 - e) / a, (nx1 - e) / a))
        uy0, uy1 = sorted(((ny0 - f) / d, (ny1 - f) / d))
        for name, v in (("x", ux0), ("y", uy0), ("width", ux1 - ux0), ("height", uy1 - uy0)):
            k.set(name, _num(v) if (a, d) == (1.0, 1.0) else repr(v))
        return True
    text = k.get("d") or k.get("points") or ""
    if k.tag == _tag("rect"):
        x, y = float(k.get("x", 0)), float(k.get("y", 0))
        text = f"{x},{y} {x + float(k.get('width', 0))},{y + float(k.get('height', 0))}"
    pts = _PAIR.findall(text)
    if not pts:
        return True
    xs = [a * float(v) + e for v in [p[0] for p in pts] + re.findall(r"H(" + _NUM + ")", text)]
    ys = [d * float(v) + f for v in [p[1] for p in pts] + re.findall(r"V(" + _NUM + ")", text)]
    if min(xs) >= box[0] - tol and min(ys) >= box[1] - tol and max(xs) <= box[2] + tol and max(ys) <= box[3] + tol:
        return True
    if max(xs) < box[0] or min(xs) > box[2] or max(ys) < box[1] or min(ys) > box[3]:
        return None
    return False


def _resolve_clips(root) -> None:
    """Qt clips a plot's items to its area with a ``clip-path`` rectangle; ImageMagick draws clipped groups
    wrongly (the whole plot vanished under a hatch).  A clip whose shapes can be cut to it here (rects) or lie
    inside it (lines, text) is applied and dropped; others keep it.  Shapes drawn with neither fill nor stroke
    go.  Qt's SVG writer also leaves a clip set after the item that set it (the legend's second swatch was
    written clipped to the first one's label): a clip that every shape of its group lies wholly outside of is
    taken for such a left-over and dropped, since Qt's own painting draws those shapes."""
    clips, stale = _clip_rects(root), _stale_clips(root)
    for g in root.iter(_tag("g")):
        ref = _URL.search(g.get("clip-path", ""))
        if ref is not None and ref.group(1) in stale:
            del g.attrib["clip-path"]
            continue
        if ref is None or ref.group(1) not in clips:
            continue
        box, cuts = clips[ref.group(1)]
        seen = _clip_inside(g, box, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0), apply=False, cuts=cuts)
        if seen and None not in seen and True not in seen:
            continue  # only shapes it cannot cut: the clip stays
        if True not in seen:  # everything outside its clip: a clip Qt left over from the item drawn before
            del g.attrib["clip-path"]
            continue
        if False not in _clip_inside(g, box, (1.0, 0.0, 0.0, 1.0, 0.0, 0.0), apply=True, cuts=cuts):
            del g.attrib["clip-path"]


def _compose(m, n):
    """The matrix of ``n`` applied inside ``m`` (SVG order: m then n), or None."""
    if m is None or n is None:
        return None
    a, b, c, d, e, f = m
    a2, b2, c2, d2, e2, f2 = n
    return (a * a2 + c * b2, b * a2 + d * b2, a * c2 + c * d2, b * c2 + d * d2, a * e2 + c * f2 + e, b * e2 + d * f2 + f)


def _clip_inside(g, box, mat, apply: bool, cuts: bool = True) -> list:
    """:func:`_clip_shape` of every shape of group ``g`` (under ``mat``, its own transform excluded); with
    ``apply`` rects are cut to ``box`` and shapes wholly outside it (or drawn with neither fill nor stroke)
    removed."""
    out = []
    invisible = g.get("fill") == "none" and g.get("stroke") == "none"
    for k in list(g):
        if k.tag == _tag("g"):
            out += _clip_inside(k, box, _compose(mat, _matrix(k)), apply, cuts)
            continue
        if invisible and k.tag in _SHAPES:
            if apply:
                g.remove(k)
            continue
        res = False if mat is None else _clip_shape(k, box, mat, apply, cuts)
        if res is None and apply:
            g.remove(k)
        out.append(res)
    return out


def _opaque_hatches(root, background) -> None:
    """A translucent hatch (a pattern fill with ``fill-opacity``) as an opaque one of the colour it shows over
    ``background``: ImageMagick ignores the opacity and drew the hatch of folded spans dark grey."""
    import pyqtgraph as pg

    patterns = {p.get("id"): p for p in root.iter(_tag("pattern"))}
    defs = next(root.iter(_tag("defs")), None)
    made: dict = {}
    for g in root.iter(_tag("g")):
        ref = _URL.fullmatch(g.get("fill", "").strip())
        alpha = g.get("fill-opacity")
        if ref is None or alpha is None or float(alpha) >= 1.0 or ref.group(1) not in patterns or defs is None:
            continue
        key = (ref.group(1), alpha)
        if key not in made:
            pat = ET.fromstring(ET.tostring(patterns[ref.group(1)]))
            made[key] = f"{ref.group(1)}_a{len(made)}"
            pat.set("id", made[key])
            bg = pg.mkColor(background).getRgb()[:3]
            for r in pat.iter():
                col = r.get("fill", "")
                if re.fullmatch(r"#[0-9a-fA-F]{6}", col):
                    fg = pg.mkColor(col).getRgb()[:3]
                    a = float(alpha)
                    r.set("fill", "#{:02x}{:02x}{:02x}".format(*(round(a * f + (1 - a) * b)
                                                                 for f, b in zip(fg, bg, strict=True))))
            defs.append(pat)
        g.set("fill", f"url(#{made[key]})")
        g.set("fill-opacity", "1")


def _image_rects(rgba: np.ndarray):
    """{colour (r, g, b, a): [(x, y, w, h), ...]} of an H x W x 4 image: each row's runs of one colour, a run
    merged with the identical runs of the rows below; fully transparent pixels are left out.  None when that
    takes more than MAX_RECTS rectangles."""
    h, w = rgba.shape[:2]
    packed = rgba.astype(np.uint32)
    key = (packed[..., 0] << 24) | (packed[..., 1] << 16) | (packed[..., 2] << 8) | packed[..., 3]
    edges = np.ones((h, w), dtype=bool)
    edges[:, 1:] = key[:, 1:] != key[:, :-1]
    if int(edges.sum()) > 4 * MAX_RECTS:
        return None
    out: dict = {}
    open_runs: dict = {}  # (x0, x1, key) -> first row
    n = 0
    for y in range(h + 1):
        runs = set()
        if y < h:
            starts = np.flatnonzero(edges[y])
            ends = np.append(starts[1:], w)
            runs = {(int(a), int(b), int(key[y, a])) for a, b in zip(starts, ends, strict=True) if key[y, a] & 0xFF}
        for run in [r for r in open_runs if r not in runs]:
            y0 = open_runs.pop(run)
            out.setdefault(run[2], []).append((run[0], y0, run[1] - run[0], y - y0))
            n += 1
            if n > MAX_RECTS:
                return None
        for run in runs:
            open_runs.setdefault(run, y)
    return {(k >> 24 & 0xFF, k >> 16 & 0xFF, k >> 8 & 0xFF, k & 0xFF): v for k, v in out.items()}


def _decode_png(data: bytes):
    from PySide6.QtGui import QImage

    img = QImage.fromData(data, "PNG")
    if img.isNull():
        return None
    img = img.convertToFormat(QImage.Format_RGBA8888)
    arr = np.frombuffer(img.constBits(), dtype=np.uint8, count=img.bytesPerLine() * img.height())
    return arr.reshape(img.height(), img.bytesPerLine() // 4, 4)[:, : img.width()].copy()


def _vector_images(root) -> None:
    """Every embedded PNG image -> one path per colour of its pixel rectangles (see the module docstring)."""
    parents = {c: p for p in root.iter() for c in p}
    for im in list(root.iter(_tag("image"))):
        href = im.get(f"{{{_XLINK}}}href") or im.get("href") or ""
        if not href.startswith("data:image/png;base64,"):
            continue
        rgba = _decode_png(base64.b64decode(href.split(",", 1)[1]))
        if rgba is None or rgba.size == 0:
            continue
        rects = _image_rects(rgba)
        if rects is None:
            continue
        h, w = rgba.shape[:2]
        x, y = float(im.get("x", 0)), float(im.get("y", 0))
        sx, sy = float(im.get("width", w)) / w, float(im.get("height", h)) / h
        g = ET.Element(_tag("g"), {"stroke": "none", "shape-rendering": "crispEdges"})
        for (r, gr, b, a), boxes in rects.items():
            d = " ".join(f"M{_num(x + bx * sx)},{_num(y + by * sy)} H{_num(x + (bx + bw) * sx)} "
                         f"V{_num(y + (by + bh) * sy)} H{_num(x + bx * sx)} Z" for bx, by, bw, bh in boxes)
            attrs = {"fill": f"#{r:02x}{gr:02x}{b:02x}", "d": d}
            if a < 255:
                attrs["fill-opacity"] = _num(a / 255)
            g.append(ET.Element(_tag("path"), attrs))
        parent = parents[im]
        parent[list(parent).index(im)] = g


def _tidy(root) -> None:
    """Drop what no longer draws anything: clipPaths no group uses, empty groups (Qt writes one per painter
    state change), and the ``vector-effect`` left on shapes that no matrix scales."""
    text = ET.tostring(root, encoding="unicode")
    used = set(_URL.findall(text))
    parents = {c: p for p in root.iter() for c in p}
    for cp in list(root.iter(_tag("clipPath"))):
        if cp.get("id") not in used:
            parents[cp].remove(cp)
    for el in root.iter():
        if el.get("vector-effect") is not None and (el.get("vector-effect") == "none" or not any(
                _MATRIX.match(a.get("transform", "")) for a in _ancestors(el, parents))):
            del el.attrib["vector-effect"]
    for g in reversed(list(root.iter(_tag("g")))):
        if not len(g) and not (g.text or "").strip() and g in parents:
            parents[g].remove(g)
    for el in root.iter():  # Qt's "Sans Serif" is a fontconfig alias, not a CSS family: browsers drew serif text
        fam = el.get("font-family")
        if fam and fam.strip().lower() in _SANS and "sans-serif" not in fam:
            el.set("font-family", f"{fam}, sans-serif")


def _ancestors(el, parents):
    while el in parents:
        el = parents[el]
        yield el


def portable_svg(svg: bytes, background=None) -> bytes:
    """``svg`` (Qt's) rewritten as described in the module docstring; unparsable input is returned as it is."""
    ET.register_namespace("", _SVG_NS)  # write the file with its own prefixes, not ns0:
    ET.register_namespace("xlink", _XLINK)
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return svg
    _flatten_patterns(root)
    if background is not None:
        _opaque_hatches(root, background)
    for g in root.iter(_tag("g")):
        kids = list(g)
        if background is not None and kids and all(k.tag in _SHAPES for k in kids):
            _blend_stroke(g, background)
        _fold_matrix(g)
    _vector_images(root)
    _resolve_clips(root)
    _tidy(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
