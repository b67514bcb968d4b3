#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus (fuzz/corpus/<target>/), committed:
the golden v1 and v2 encodings of src/store/compact/codec.rs and chunked logs (for
`decode`), effects as SLIDEWIN.APPLY takes them (for `apply`), and command
arguments (for `args`). Words are one a line; `x:` + hex is raw bytes.
Re-run after a change of the encoding: python3 fuzz/seeds.py"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def zigzag(v):
    return ((v << 1) ^ (v >> 63)) & (2**64 - 1)


def encode(runs, expiry=None):
    """The v1 encoding of runs (score, first, count) in score order, as
    put_run writes it (one-byte and two-byte records where they apply)."""
    out = bytearray([1])
    out += b"\x00" if expiry is None else b"\x01" + varint(zigzag(expiry))
    out += varint(len(runs))
    if not runs:
        return bytes(out)
    score, expected = runs[0][0], 1
    out += varint(zigzag(score))
    for s, first, count in runs:
        gap = s - score
        if first == expected and count == 1 and gap < 1 << 7:
            out.append(gap)
        elif first == expected and count == 1 and gap < 1 << 14:
            out += bytes([0x80 | (gap >> 8), gap & 0xFF])
        else:
            out += b"\xc0" + varint(gap) + varint(zigzag(first - expected)) + varint(count - 1)
        score, expected = s, first + count
    return bytes(out)


def lines(*words):
    return "\n".join(words).encode()


chunked = [(1000 + 10 * i, (10_000 - 10 * i) if i % 3 == 2 else 100 + 3 * i, 2) for i in range(12)]
in_order = [(1000 + 5 * i, 1 + i, 1) for i in range(40)]
decode = {
    "empty": bytes([1, 0, 0]),
    "empty-expiry": bytes([1, 1, 0xD0, 0x0F, 0]),
    "one-entry-runs": bytes([1, 0, 3, 0xD0, 0x0F, 0, 5, 0x80, 200]),
    "general-records": bytes([1, 1, 0xF4, 0xC5, 0x08, 2, 20, 0xC0, 0, 0, 2, 0xC0, 0, 10, 0]),
    "member-i64-max": bytes([1, 0, 1, 0, 0xC0, 0]) + varint(zigzag(2**63 - 2)) + b"\x00",
    "chunked-strays": encode(chunked, 5000),
    "forty-in-order": encode(in_order),
    "big-counts": encode([(0, 0, 2**40 - 5), (7, 2**40, 5)]),
    "newer-version": bytes([3, 0, 0]),
    # Version 2 (charge records), as codec.rs's golden test writes it.
    "charges": bytes([2, 0, 3, 0xD0, 0x0F, 0xC0, 0, 8, 0, 0xC0, 0, 9, 2, 5, 2,
                      2, 97, 98, 0xE8, 0x07, 2, 1, 2, 5, 0, 1, 99, 0xED, 0x07, 1, 4, 0]),
}
apply = {
    "add": lines("ADD", "1000", "1", "1"),
    "trim-add-pxat": lines("TRIM", "15", "ADD", "20", "4", "2", "PXAT", "80000"),
    "remove-splits": lines("REMOVE", "2"),
    "remove-strays": lines("REMOVE", "100", "REMOVE", "9980"),
    "add-stray": lines("ADD", "1005", "50", "3"),
    "add-many": lines("ADD", "2000", "20000", "1", "ADD", "2000", "20002", "1", "ADD", "2001", "20001", "1"),
    "log-then-add": b"LOG\nx:" + encode(chunked, 5000).hex().encode() + b"\nADD\n1200\n30000\n5",
    "log-small": b"LOG\nx:" + encode(in_order[:3]).hex().encode() + b"\nTRIM\n1004\nremove\n3",
    "refused-score": lines("ADD", "-1", "1", "1"),
    "refused-twice": lines("PXAT", "1", "PXAT", "2"),
    "refused-member": lines("ADD", "10", "9223372036854775807", "2"),
    "charge": lines("CHARGE", "r3", "2000", "20", "3"),
    "charge-more": lines("CHARGE", "r1", "1000", "30", "2"),
    "cut": lines("CUT", "r1", "2"),
    "cut-all-charge": lines("CUT", "r2", "0", "CHARGE", "r2", "3000", "40", "1"),
    "refused-cut": lines("CUT", "nope", "0"),
    "refused-remove-unit": lines("REMOVE", "3"),
}
args = {
    "check": b"\x00" + lines("5", "60000"),
    "check-options": b"\x00" + lines("5", "60000", "COST", "3", "detail", "WITHMEMBERS", "WithOldest"),
    "peek": b"\x01" + lines("5", "60000", "WITHOLDEST"),
    "peek-members": b"\x01" + lines("5", "60000", "WITHMEMBERS"),
    "mcheck": b"\x02" + lines("2", "k1", "5", "1000", "k2", "100", "60000", "COST", "2", "WITHMEMBERS"),
    "top": b"\x03" + lines("10", "DENIED", "RESET"),
    "small-bounds": b"\x80" + lines("11", "1000"),
    "integers": b"\x00" + lines("-0", "+5", "007", "9223372036854775808", "-9223372036854775808"),
}
for target, seeds in [("decode", decode), ("apply", apply), ("args", args)]:
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
