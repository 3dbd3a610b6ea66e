"""HyperLogLog sketches of the ``hll`` extension (postgresql-hll, storage format v1), read in
Python so the router can union the shards' partial sketches of a group and estimate its
cardinality without a round trip. Shards build every sketch with the same fixed parameters
(``SQL_PARAMETERS``); the explicit representation is switched off there, so a sketch is
empty, sparse or full, and a union is the register-wise maximum."""

from __future__ import annotations

import math
from dataclasses import dataclass

LOG2M = 12
REGWIDTH = 5
M = 1 << LOG2M
# log2m, regwidth, expthresh (0: never explicit), sparseon: what every shard passes to
# hll_add_agg, so that every partial of a group has the same shape.
SQL_PARAMETERS = f"{LOG2M}, {REGWIDTH}, 0, 1"
# HyperLogLog's relative standard error, 1.04 / sqrt(m): about 1.6 % for m = 4096.
RELATIVE_STANDARD_ERROR = 1.04 / math.sqrt(M)

_EMPTY, _EXPLICIT, _SPARSE, _FULL = 1, 2, 3, 4
_MAX_REGISTER = (1 << REGWIDTH) - 1


class SketchError(ValueError):
    """A value that is not a sketch of the expected shape."""


@dataclass
class Sketch:
    """The registers of a sketch: a dict of the non-zero ones while few are set, a bytearray
    of all ``M`` once many are."""

    registers: dict[int, int] | bytearray

    def union(self, other: Sketch) -> Sketch:
        mine, theirs = self.registers, other.registers
        if isinstance(mine, dict) and isinstance(theirs, dict):
            merged = dict(mine)
            for index, value in theirs.items():
                if value > merged.get(index, 0):
                    merged[index] = value
            return Sketch(merged if len(merged) < M // 8 else _dense(merged))
        dense = bytearray(mine) if isinstance(mine, bytearray) else _dense(mine)
        pairs = theirs.items() if isinstance(theirs, dict) else enumerate(theirs)
        for index, value in pairs:
            if value > dense[index]:
                dense[index] = value
        return Sketch(dense)

    def cardinality(self) -> float:
        registers = self.registers
        if isinstance(registers, dict):
            zeros = M - len(registers)
            total = zeros + sum(2.0**-v for v in registers.values())
        else:
            zeros = registers.count(0)
            total = sum(2.0**-v for v in registers)
        if zeros == M:
            return 0.0
        estimate = _alpha() * M * M / total
        if zeros and estimate < 2.5 * M:
            return M * math.log(M / zeros)
        two_to_l = 2.0 ** (_MAX_REGISTER - 1 + LOG2M)
        if estimate <= two_to_l / 30:
            return estimate
        return -two_to_l * math.log(1 - estimate / two_to_l)


def empty() -> Sketch:
    return Sketch({})


def _alpha() -> float:
    return {16: 0.673, 32: 0.697, 64: 0.709}.get(M, 0.7213 / (1 + 1.079 / M))


def _dense(registers: dict[int, int]) -> bytearray:
    dense = bytearray(M)
    for index, value in registers.items():
        dense[index] = value
    return dense


def _unpack(data: bytes, width: int, count: int) -> list[int]:
    """``count`` big-endian ``width``-bit fields packed from the first bit of ``data``."""
    whole = int.from_bytes(data, "big")
    spare = len(data) * 8 - width * count
    if spare < 0:
        raise SketchError("a sketch is shorter than its registers")
    whole >>= spare
    mask = (1 << width) - 1
    return [(whole >> (width * (count - 1 - n))) & mask for n in range(count)]


def _from_hashes(data: bytes) -> dict[int, int]:
    registers: dict[int, int] = {}
    for offset in range(0, len(data), 8):
        value = int.from_bytes(data[offset : offset + 8], "big")
        index, rest = value & (M - 1), value >> LOG2M
        rank = min((rest & -rest).bit_length(), _MAX_REGISTER) if rest else 0
        if rank > registers.get(index, 0):
            registers[index] = rank
    return registers


def decode(value: bytes | str | None) -> Sketch:
    """A sketch from its storage bytes (or their hex text, ``\\x...``); NULL is empty."""
    if value is None:
        return empty()
    data = bytes.fromhex(value[2:]) if isinstance(value, str) else bytes(value)
    if len(data) < 3 or data[0] >> 4 != 1:
        raise SketchError("not an hll sketch of storage version 1")
    kind = data[0] & 0x0F
    if kind == _EMPTY:
        return empty()
    if (data[1] & 0x1F, (data[1] >> 5) + 1) != (LOG2M, REGWIDTH):
        raise SketchError(f"a sketch not of log2m={LOG2M}, regwidth={REGWIDTH}")
    body = data[3:]
    if kind == _EXPLICIT:
        return Sketch(_from_hashes(body))
    if kind == _SPARSE:
        width = LOG2M + REGWIDTH
        fields = _unpack(body, width, len(body) * 8 // width)
        registers: dict[int, int] = {}
        for field in fields:
            value_part = field & _MAX_REGISTER
            if value_part:
                registers[field >> REGWIDTH] = value_part
        return Sketch(registers)
    if kind == _FULL:
        return Sketch(bytearray(_unpack(body, REGWIDTH, M)))
    raise SketchError(f"an hll sketch of unknown type {kind}")
