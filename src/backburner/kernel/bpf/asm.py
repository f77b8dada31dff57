"""eBPF instructions as the kernel reads them, and `Asm`, which assembles a program with
named jump targets.

An instruction is ``struct bpf_insn`` (include/uapi/linux/bpf.h), 8 bytes read in the
CPU's own byte order::

    struct bpf_insn { __u8 code; __u8 dst_reg:4; __u8 src_reg:4; __s16 off; __s32 imm; };

`off` and `imm` are native integers, and the two register numbers share a byte as C
bitfields: the first declared (dst_reg) is the low nibble on a little-endian machine and
the high nibble on a big-endian one (s390x; LLVM's bpfeb target encodes it so too). The
byte order is this module's `BYTE_ORDER`, the host's, and nothing else in a program
depends on it except data the program itself stores in memory (`Asm.order`).
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass, field

#: The byte order of the programs this host's kernel loads.
BYTE_ORDER = sys.byteorder

# Opcodes: class | size or source | mode or operation (Documentation/bpf/standardization).
LD_DW_IMM = 0x18  # dst = imm64 (two slots; src 1: imm is a map's descriptor)
LDX_W = 0x61  # dst = *(u32 *)(src + off)
LDX_B = 0x71  # dst = *(u8 *)(src + off)
ST_W = 0x62  # *(u32 *)(dst + off) = imm
STX_W = 0x63  # *(u32 *)(dst + off) = src
STX_DW = 0x7B  # *(u64 *)(dst + off) = src
ADD_IMM = 0x07  # dst += imm (64-bit)
OR_IMM = 0x47  # dst |= imm
AND_IMM = 0x57  # dst &= imm
LSH_IMM = 0x67  # dst <<= imm
MOV_IMM = 0xB7  # dst = imm
MOV_REG = 0xBF  # dst = src
JA = 0x05  # goto
JEQ_IMM = 0x15  # if dst == imm goto
JGT_IMM = 0x25  # if dst > imm goto (unsigned)
JNE_IMM = 0x55  # if dst != imm goto
JEQ_REG = 0x1D  # if dst == src goto
JNE_REG = 0x5D  # if dst != src goto
CALL = 0x85  # r0 = helper imm (r1..r5)
EXIT = 0x95  # return r0

#: Registers: r0 the result, r1..r5 a helper's arguments (r1 the context on entry),
#: r6..r9 kept across calls, r10 the frame pointer (read only).
R0, R1, R2, R3, R4, R5, R6, R7, R8, R9, FP = range(11)


def insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0,
         order: str = BYTE_ORDER) -> bytes:
    """One instruction in `order` ("little" or "big")."""
    if order == "little":
        return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)
    if order == "big":
        return struct.pack(">BBhi", code, (dst << 4) | src, off, imm)
    raise ValueError(f"byte order {order!r}")


def _s32(value: int) -> int:
    """A 32-bit field's bits as the signed integer the imm field is (a class id of major
    0x8000 or more)."""
    return value - (1 << 32) if value >> 31 else value


@dataclass
class Asm:
    """Instructions with named jump targets, resolved when the program is done."""

    order: str = BYTE_ORDER
    out: list[tuple[int, int, int, int, int | str]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)

    def op(self, code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> None:
        self.out.append((code, dst, src, off, imm))

    def jump(self, code: int, target: str, dst: int = 0, imm: int = 0, src: int = 0) -> None:
        """A jump to `target`; its operand `imm` rides in the offset's place until then."""
        self.out.append((code, dst, src, imm, target))

    def ld64(self, dst: int, value: int, src: int = 0) -> None:
        """lddw: a 64-bit immediate (src 1: a map descriptor), two slots, the low half
        first, each as the signed 32-bit field it is."""
        self.op(LD_DW_IMM, dst, src, 0, _s32(value & 0xFFFFFFFF))
        self.op(0, 0, 0, 0, _s32((value >> 32) & 0xFFFFFFFF))

    def ld_bytes(self, dst: int, data: bytes) -> None:
        """dst = the 64-bit value whose bytes in memory, in this program's byte order,
        are `data` (8 bytes): what a store of dst to the stack leaves there."""
        if len(data) != 8:
            raise ValueError("ld_bytes takes 8 bytes")
        self.ld64(dst, int.from_bytes(data, self.order))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.out)

    def assemble(self) -> bytes:
        code = []
        for i, (op, dst, src, off, imm) in enumerate(self.out):
            if isinstance(imm, str):  # a jump: off is the label's distance, imm the operand
                off, imm = self.labels[imm] - i - 1, off
            code.append(insn(op, dst, src, off, imm, self.order))
        return b"".join(code)
