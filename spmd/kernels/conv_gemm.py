"""2-D convolution as one GEMM per step, in the memory layout that is fastest for the shape.

conv.py's N-d kernels route every 2-D convolution (conv2d, depthwise_conv2d and the 2-D
transposes) here. Each product is laid out one of two ways (`layout`):

- "rows" (NHWC): the input is copied once channel-last into a zero-bordered workspace; a
  window offset then selects runs of kw*C contiguous values, so im2col is a cheap copy into
  [N*OH*OW, kh*kw*C] and the convolution is one [N*P, K] x [K, M] product whose result is
  transposed (output-sized, small) back to NCHW. Best where channels are many and the maps
  small (late layers, C*kw >= 64 or so).
- "image" (NCHW): the columns are [N, K, P] straight from the NCHW input (runs of OW values)
  and the product is batched per image, [M, K] x [K, P], written straight into the NCHW
  output. Best for few channels and wide maps (first layers), where a channel-last copy
  would move runs of C values only.

The filter gradient sums over the batch, so "image" lays its columns out [K, N*P] for it (one
[M, N*P] x [N*P, K] product). The input gradient is the transposed product followed by col2im
(one strided add per kernel offset, into a zero-bordered workspace). Workspaces (columns,
padded copies) are reused across steps (workspace.py); outputs are always fresh arrays.
Python loops run over kernel offsets only.

Where oneDNN is installed (the `fast` extra), float32 products it is measured faster on run
there instead (conv_dnnl.py); an explicit `layout` always takes the numpy code.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import workspace


@dataclass(frozen=True)
class Geometry:
    """A 2-D convolution: input [n, c, h, w] -> output [n, m, oh, ow], filter
    [m, c // groups, kh, kw]; pads (top, bottom, left, right) extend the input so that the
    last window fits (hp = h + top + bottom)."""
    n: int
    c: int
    h: int
    w: int
    m: int
    kh: int
    kw: int
    groups: int
    stride: tuple
    dil: tuple
    pads: tuple
    oh: int
    ow: int

    @property
    def hp(self) -> int:
        return self.h + self.pads[0] + self.pads[1]

    @property
    def wp(self) -> int:
        return self.w + self.pads[2] + self.pads[3]

    @property
    def padded(self) -> bool:
        return any(self.pads)

    @property
    def k(self) -> int:
        """Column length per group: (c / groups) * kh * kw."""
        return self.c // self.groups * self.kh * self.kw

    @property
    def p(self) -> int:
        return self.oh * self.ow

    def layout(self, phase: str = "forward") -> str:
        """'rows' or 'image' (module doc) for the forward product or the filter gradient's
        ("filter"), the better of the two on the shapes measured (bench/cnn.py, 1 thread):
        rows when a window offset's channel-last run (kw * c values) is long against the
        NCHW run (ow values) and the maps are small; images for 1x1 kernels."""
        if self.groups != 1 or self.kh * self.kw == 1:
            return "image"
        if phase == "filter":
            return "rows" if self.kw * self.c >= 16 else "image"
        return "rows" if self.kw * self.c >= 2 * self.ow and self.p <= 256 else "image"

    def flip_input_grad(self) -> bool:
        """Whether the input gradient is best the flipped convolution (see flipped()): where
        it does no more work than col2im's product, the output as large as the input, and
        the input has channels enough for the product."""
        return (self.stride == (1, 1) and self.h * self.w <= self.p * 1.1 and self.c >= 8
                and flipped(self) is not None)


# ---- columns ---------------------------------------------------------------------------------

CHUNK_BYTES = 1 << 20  # columns of this many bytes per product: they stay in the L2 cache


def _chunks(g: Geometry, itemsize: int):
    """(images per chunk, [(start, stop)]): each chunk about CHUNK_BYTES of columns."""
    per_image = g.p * g.k * g.groups * itemsize
    nb = max(1, min(g.n, CHUNK_BYTES // max(per_image, 1)))
    return nb, [(a, min(a + nb, g.n)) for a in range(0, g.n, nb)]


def _windows(xp, a, shape, strides):
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def _windows_image(xp, x, g: Geometry, tag: str):
    """The windows of x [n, c, h, w] as a strided view [n, groups, k, oh, ow] (the zero
    border, where there is one, from a workspace)."""
    if g.padded:
        top, _, left, _ = g.pads
        buf = workspace.get(xp, (tag, g.pads), (g.n, g.c, g.hp, g.wp), x.dtype, 0)
        xp.copyto(buf[:, :, top:top + g.h, left:left + g.w], x)
        x = buf
    sn, sc, sh, sw = x.strides
    cg = g.c // g.groups
    return _windows(xp, x, (g.n, g.groups, cg, g.kh, g.kw, g.oh, g.ow),
                    (sn, sc * cg, sc, sh * g.dil[0], sw * g.dil[1], sh * g.stride[0],
                     sw * g.stride[1]))


def _windows_rows(xp, x, g: Geometry, tag: str):
    """The windows of x [n, c, h, w] channel-last, a strided view [n, oh, ow, kh, kw, c] of a
    zero-bordered [n, hp, wp, c] workspace copy."""
    top, _, left, _ = g.pads
    buf = workspace.get(xp, (tag, g.pads), (g.n, g.hp, g.wp, g.c), x.dtype, 0)
    xp.copyto(buf[:, top:top + g.h, left:left + g.w, :], x.transpose(0, 2, 3, 1))
    sn, sh, sw, sc = buf.strides
    return _windows(xp, buf, (g.n, g.oh, g.ow, g.kh, g.kw, g.c),
                    (sn, sh * g.stride[0], sw * g.stride[1], sh * g.dil[0], sw * g.dil[1], sc))


def _columns(xp, win, nb: int, tag: str):
    """A workspace for nb images' columns of the window view `win` and a function copying
    images a:b of it there: the columns [b - a, ...]."""
    cols = workspace.get(xp, (tag,), (nb, *win.shape[1:]), win.dtype)

    def chunk(a: int, b: int):
        part = cols[:b - a]
        xp.copyto(part, win[a:b])
        return part
    return chunk


def _image_columns(xp, x, g: Geometry, nb: int):
    """_columns of the NCHW windows; a 1x1 unstrided, unpadded kernel's columns are x."""
    if g.kh * g.kw == 1 and g.stride == (1, 1) and not g.padded:
        x = xp.ascontiguousarray(x)
        return lambda a, b: x[a:b]
    return _columns(xp, _windows_image(xp, x, g, "conv_image:x"), nb, "conv_image:cols")


def _dy_rows(xp, dy, g: Geometry, nb: int):
    """dy [b, m, oh, ow] as [b * p, m] (a workspace view)."""
    b = dy.shape[0]
    dyr = workspace.get(xp, ("conv_rows:dy",), (nb, g.p, g.m), dy.dtype)[:b]
    xp.copyto(dyr, dy.reshape(b, g.m, g.p).transpose(0, 2, 1))
    return dyr.reshape(b * g.p, g.m)


def _filter_rows(xp, w):
    """[m, c, kh, kw] -> [m, kh*kw*c], the column order of _cols_rows."""
    return xp.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(w.shape[0], -1)


def _col2im(buf, dcols, g: Geometry, channel_last: bool):
    """buf = the sum of dcols' kernel offsets placed at their windows (buf overwritten);
    dcols [b, oh, ow, kh, kw, c] channel-last, else [b, c, kh, kw, oh, ow]."""
    buf.fill(0)
    for i in range(g.kh):
        rows = slice(i * g.dil[0], i * g.dil[0] + g.stride[0] * (g.oh - 1) + 1, g.stride[0])
        for j in range(g.kw):
            cols = slice(j * g.dil[1], j * g.dil[1] + g.stride[1] * (g.ow - 1) + 1, g.stride[1])
            if channel_last:
                buf[:, rows, cols, :] += dcols[:, :, :, i, j, :]
            else:
                buf[:, :, rows, cols] += dcols[:, :, i, j]


# ---- the three products, a chunk of images at a time -----------------------------------------

def _dnnl(xp, g: Geometry, phase: str, dtype, layout):
    """conv_dnnl (oneDNN, where installed) when it suits this product and no layout is forced;
    else None. Imported on the first convolution: start-up never pays for it."""
    if layout is not None or xp.__name__ != "numpy":
        return None
    from . import conv_dnnl

    return conv_dnnl if conv_dnnl.suits(g, phase, dtype) else None


def forward(xp, x, w, g: Geometry, layout: str | None = None):
    """y [n, m, oh, ow] = conv(x, w): a fresh array."""
    fast = _dnnl(xp, g, "forward", x.dtype, layout)
    if fast is not None:
        return fast.forward(x, w, g)
    layout = layout or g.layout()
    y = xp.empty((g.n, g.m, g.oh, g.ow), dtype=x.dtype)
    nb, chunks = _chunks(g, x.dtype.itemsize)
    if layout == "rows":
        cols = _columns(xp, _windows_rows(xp, x, g, "conv_rows:x"), nb, "conv_rows:cols")
        wr = _filter_rows(xp, w).T
        yr = workspace.get(xp, ("conv_rows:y",), (nb * g.p, g.m), x.dtype)
        for a, b in chunks:
            part = yr[:(b - a) * g.p]
            xp.matmul(cols(a, b).reshape(-1, wr.shape[0]), wr, out=part)
            xp.copyto(y[a:b].reshape(b - a, g.m, g.p),
                      part.reshape(b - a, g.p, g.m).transpose(0, 2, 1))
        return y
    cols = _image_columns(xp, x, g, nb)
    wg = w.reshape(g.groups, g.m // g.groups, g.k)
    for a, b in chunks:
        xp.matmul(wg, cols(a, b).reshape(b - a, g.groups, g.k, g.p),
                  out=y[a:b].reshape(b - a, g.groups, g.m // g.groups, g.p))
    return y


def filter_grad(xp, x, dy, g: Geometry, layout: str | None = None):
    """dw [m, c // groups, kh, kw] of conv(x, w) given dy [n, m, oh, ow]: a fresh array."""
    fast = _dnnl(xp, g, "filter", x.dtype, layout)
    if fast is not None:
        return fast.filter_grad(x, dy, g)
    layout = layout or g.layout("filter")
    nb, chunks = _chunks(g, x.dtype.itemsize)
    dw = None
    if layout == "rows":
        cols = _columns(xp, _windows_rows(xp, x, g, "conv_rows:x"), nb, "conv_rows:cols")
        k = g.kh * g.kw * g.c
        for a, b in chunks:
            part = xp.matmul(_dy_rows(xp, dy[a:b], g, nb).T, cols(a, b).reshape(-1, k))
            dw = part if dw is None else xp.add(dw, part, out=dw)
        return xp.ascontiguousarray(dw.reshape(g.m, g.kh, g.kw, g.c).transpose(0, 3, 1, 2))
    cols = _image_columns(xp, x, g, nb)
    mg = g.m // g.groups
    for a, b in chunks:
        part = xp.matmul(dy[a:b].reshape(b - a, g.groups, mg, g.p),
                         cols(a, b).reshape(b - a, g.groups, g.k, g.p).transpose(0, 1, 3, 2))
        part = part.sum(axis=0) if b - a > 1 else part[0]
        dw = part if dw is None else xp.add(dw, part, out=dw)
    return dw.reshape(g.m, g.c // g.groups, g.kh, g.kw)


def flipped(g: Geometry) -> Geometry | None:
    """The stride-1 convolution whose forward is g's input gradient (dy as its input, the
    flipped filter, padding d*(k-1) - pad per side), or None where g is strided or pads more
    than its kernel reaches (then col2im)."""
    if g.stride != (1, 1):
        return None
    reach = (g.dil[0] * (g.kh - 1), g.dil[1] * (g.kw - 1))
    pads = (reach[0] - g.pads[0], reach[0] - g.pads[1], reach[1] - g.pads[2],
            reach[1] - g.pads[3])
    if min(pads) < 0:
        return None
    return Geometry(g.n, g.m, g.oh, g.ow, g.c, g.kh, g.kw, g.groups, (1, 1), g.dil, pads,
                    g.h, g.w)


def flip_filter(xp, w, groups: int):
    """[G*Mg, Cg, kh, kw] -> [G*Cg, Mg, kh, kw], each kernel rotated by 180 degrees."""
    m, cg, kh, kw = w.shape
    wg = w.reshape(groups, m // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    return xp.ascontiguousarray(wg).reshape(groups * cg, m // groups, kh, kw)


def input_grad(xp, dy, w, g: Geometry, layout: str | None = None):
    """dx [n, c, h, w] of conv(x, w) given dy: a fresh array. Unstrided, a convolution of dy
    with the flipped filter (the product's output is dx itself, C values per pixel); else the
    transposed product, then col2im."""
    fast = _dnnl(xp, g, "input", dy.dtype, layout)
    if fast is not None:
        return fast.input_grad(dy, w, g)
    flip = g.flip_input_grad() if layout is None else layout.startswith("flip")
    fg = flipped(g) if flip else None
    if fg is not None:
        sub = None if layout is None or layout == "flip" else layout.split(":")[1]
        return forward(xp, dy, flip_filter(xp, w, g.groups), fg, sub)
    layout = (layout or g.layout()).split(":")[-1]
    dx = xp.empty((g.n, g.c, g.h, g.w), dtype=dy.dtype)
    nb, chunks = _chunks(g, dy.dtype.itemsize)
    top, _, left, _ = g.pads
    if layout == "rows":
        wr = _filter_rows(xp, w)
        dcols = workspace.get(xp, ("conv_rows:dcols",), (nb * g.p, wr.shape[1]), dy.dtype)
        buf = workspace.get(xp, ("conv_rows:dx",), (nb, g.hp, g.wp, g.c), dy.dtype)
        for a, b in chunks:
            part = dcols[:(b - a) * g.p]
            xp.matmul(_dy_rows(xp, dy[a:b], g, nb), wr, out=part)
            _col2im(buf[:b - a], part.reshape(b - a, g.oh, g.ow, g.kh, g.kw, g.c), g, True)
            xp.copyto(dx[a:b], buf[:b - a, top:top + g.h, left:left + g.w].transpose(0, 3, 1, 2))
        return dx
    mg = g.m // g.groups
    wg = w.reshape(g.groups, mg, g.k).transpose(0, 2, 1)
    dcols = workspace.get(xp, ("conv_image:dcols",), (nb, g.groups, g.k, g.p), dy.dtype)
    buf = workspace.get(xp, ("conv_image:dx",), (nb, g.c, g.hp, g.wp), dy.dtype)
    for a, b in chunks:
        part = dcols[:b - a]
        xp.matmul(wg, dy[a:b].reshape(b - a, g.groups, mg, g.p), out=part)
        target = buf[:b - a] if g.padded else dx[a:b]
        _col2im(target, part.reshape(b - a, g.c, g.kh, g.kw, g.oh, g.ow), g, False)
        if g.padded:
            xp.copyto(dx[a:b], target[:, :, top:top + g.h, left:left + g.w])
    return dx


def per_image_ok(g: Geometry) -> bool:
    """Whether these per-image products suit g: not with many groups on small maps (a depthwise
    convolution on 8x8 maps makes n * groups products of a few dozen values each), where one
    product per group over the whole batch (conv.py's N-d path) is faster."""
    return g.groups == 1 or g.p * g.m // g.groups >= 256


def geometry(x_shape, w_shape, groups, strides, dil, pads, out) -> Geometry:
    """The Geometry of conv.py's conv_setup results (pads as ((top, bottom), (left, right)))."""
    n, c, h, w = x_shape
    return Geometry(n, c, h, w, w_shape[0], w_shape[2], w_shape[3], groups, tuple(strides),
                    tuple(dil), (*pads[0], *pads[1]), out[0], out[1])

