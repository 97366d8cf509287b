#!/usr/bin/env python3
"""Checks a Chromium screenshot of the HTML report without PIL: the PNG
decodes (zlib, unfiltered by hand), has the window's size, is not one colour
or nearly blank, shows the red banner of a run with failed jobs and never the
green one. Usage: report_png_check.py SHOT.png WIDTH HEIGHT"""
import struct
import sys
import zlib


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def read_png(path):
    data = open(path, "rb").read()
    if len(data) < 10 * 1024:
        fail(f"{path} is {len(data)} bytes: too small for a rendered report")
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        fail(f"unexpected PNG format depth={depth} colour={colour} interlace={interlace}")
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    width, height, bpp, rows = read_png(path)
    if (width, height) != (want_w, want_h):
        fail(f"screenshot is {width}x{height}, expected {want_w}x{want_h}")
    colours, non_white, total = {}, 0, 0
    for row in rows[::2]:
        for x in range(0, width * bpp, bpp * 2):
            px = tuple(row[x:x + 3])
            colours[px] = colours.get(px, 0) + 1
            total += 1
            if sum(px) < 3 * 245:
                non_white += 1

    def near(rgb, tol=6):
        return sum(n for px, n in colours.items() if all(abs(px[i] - rgb[i]) <= tol for i in range(3)))

    print(f"{path}: {width}x{height}, {len(colours)} colours, {100.0 * non_white / total:.1f}% not white")
    if len(colours) < 16:
        fail(f"only {len(colours)} colours: the page did not render")
    if non_white < total * 0.02:
        fail("the page is nearly blank")
    if near((0xfd, 0xe4, 0xe1)) < 500:
        fail("no red banner (#fde4e1) in a run with failed jobs")
    if near((0xe3, 0xf4, 0xe6), 2) > 500:
        fail("a green banner (#e3f4e6) in a run with failed jobs")
    print("PASS: the screenshot shows a rendered report with a red banner")


main()
