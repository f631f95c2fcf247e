"""The direct definition of a convolution's windows, for tests: every (output pixel, kernel position) pair
with the input pixel it reads, padding skipped - the loops the reference implementations are checked
against."""

from popvision_lite.emulator.codelets.poplin_conv import ConvShape


def direct_taps(s: ConvShape):
    """(i, j, ky, kx, r, c) for output pixel (i, j), kernel position (ky, kx) and the input pixel (r, c)
    it reads: r = i * stride - pad + ky, c = j * stride - pad + kx, inside the image."""
    for i in range(s.oh):
        for j in range(s.ow):
            for ky in range(s.k):
                for kx in range(s.k):
                    r, c = i * s.stride - s.pad + ky, j * s.stride - s.pad + kx
                    if 0 <= r < s.h and 0 <= c < s.w:
                        yield i, j, ky, kx, r, c
