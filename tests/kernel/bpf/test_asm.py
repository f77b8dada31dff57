"""kernel.bpf.asm: instructions encoded as the kernel reads ``struct bpf_insn`` in either
byte order, checked against bytes worked out by hand from its layout (and, where LLVM's
assembler is installed, against its bpfel and bpfeb encodings)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import TIMEOUT

from backburner.kernel.bpf import asm
from backburner.kernel.bpf.asm import Asm, insn

# struct bpf_insn { u8 code; u8 dst_reg:4, src_reg:4; s16 off; s32 imm; }: little-endian,
# dst is the low nibble and off/imm are stored low byte first; big-endian, dst is the
# high nibble and off/imm high byte first.
REFERENCE = [
    # (what, code, dst, src, off, imm, little-endian bytes, big-endian bytes)
    ("r2 = 7", 0xB7, 2, 0, 0, 7,
     "b7 02 00 00 07 00 00 00", "b7 20 00 00 00 00 00 07"),
    ("*(u32 *)(r1 + 32) = r2", 0x63, 1, 2, 32, 0,
     "63 21 20 00 00 00 00 00", "63 12 00 20 00 00 00 00"),
    ("if r2 > 100 goto +3", 0x25, 2, 0, 3, 100,
     "25 02 03 00 64 00 00 00", "25 20 00 03 00 00 00 64"),
    ("r2 += -24", 0x07, 2, 0, 0, -24,
     "07 02 00 00 e8 ff ff ff", "07 20 00 00 ff ff ff e8"),
    ("*(u64 *)(r10 - 16) = r2", 0x7B, 10, 2, -16, 0,
     "7b 2a f0 ff 00 00 00 00", "7b a2 ff f0 00 00 00 00"),
    ("r0 = *(u32 *)(r6 + 84)", 0x61, 0, 6, 84, 0,
     "61 60 54 00 00 00 00 00", "61 06 00 54 00 00 00 00"),
    ("call 0x12345678", 0x85, 0, 0, 0, 0x12345678,
     "85 00 00 00 78 56 34 12", "85 00 00 00 12 34 56 78"),
    ("exit", 0x95, 0, 0, 0, 0,
     "95 00 00 00 00 00 00 00", "95 00 00 00 00 00 00 00"),
]


@pytest.mark.parametrize("case", REFERENCE, ids=[c[0] for c in REFERENCE])
def test_an_instruction_in_both_byte_orders(case: tuple) -> None:
    _what, code, dst, src, off, imm, little, big = case
    assert insn(code, dst, src, off, imm, "little") == bytes.fromhex(little)
    assert insn(code, dst, src, off, imm, "big") == bytes.fromhex(big)


@pytest.mark.parametrize("order, expected", [
    ("little", "18 01 00 00 88 77 66 55 00 00 00 00 44 33 22 11"),
    ("big", "18 10 00 00 55 66 77 88 00 00 00 00 11 22 33 44"),
])
def test_a_64_bit_immediate_takes_two_slots_low_half_first(order: str, expected: str) -> None:
    a = Asm(order)
    a.ld64(asm.R1, 0x1122334455667788)
    assert a.assemble() == bytes.fromhex(expected)


@pytest.mark.parametrize("order, expected", [
    # a class id of major 0x8001: the low half has its top bit set, a negative s32
    ("little", "18 00 00 00 10 00 01 80 00 00 00 00 00 00 00 00"),
    ("big", "18 00 00 00 80 01 00 10 00 00 00 00 00 00 00 00"),
])
def test_an_immediate_with_the_top_bit_set_keeps_its_bits(order: str, expected: str) -> None:
    a = Asm(order)
    a.ld64(asm.R0, 0x8001_0010)
    assert a.assemble() == bytes.fromhex(expected)


@pytest.mark.parametrize("order", ["little", "big"])
def test_bytes_stored_from_a_register_are_the_bytes_given(order: str) -> None:
    """What `ld_bytes` loads and a 64-bit store puts on the stack, in this program's
    order, is the text given (a congestion control's name)."""
    a = Asm(order)
    a.ld_bytes(asm.R2, b"lp\0\0\0\0\0\0")
    code = a.assemble()
    low = int.from_bytes(code[4:8], order, signed=True) & 0xFFFFFFFF
    high = int.from_bytes(code[12:16], order, signed=True) & 0xFFFFFFFF
    stored = ((high << 32) | low).to_bytes(8, order)
    assert stored == b"lp\0\0\0\0\0\0"


def test_jumps_go_to_their_labels() -> None:
    a = Asm("little")
    a.jump(asm.JEQ_IMM, "end", dst=asm.R1, imm=5)  # 0: skips 1 and 2
    a.op(asm.MOV_IMM, dst=asm.R0, imm=1)
    a.jump(asm.JA, "end")                          # 2: to the next one
    a.label("end")
    a.op(asm.EXIT)
    assert a.assemble() == bytes.fromhex("15 01 02 00 05 00 00 00" "b7 00 00 00 01 00 00 00"
                                         "05 00 00 00 00 00 00 00" "95 00 00 00 00 00 00 00")


def test_the_host_order_is_the_default() -> None:
    import sys

    assert sys.byteorder == asm.BYTE_ORDER == Asm().order
    with pytest.raises(ValueError):
        insn(0x95, order="middle")


#: The same instructions as LLVM's assembler writes them (its BPF syntax).
LLVM_TEXT = ["r2 = 7", "*(u32 *)(r1 + 32) = r2", "if r2 > 100 goto +3", "r2 += -24",
             "*(u64 *)(r10 - 16) = r2", "r0 = *(u32 *)(r6 + 84)", "exit"]


@pytest.mark.parametrize("order, triple", [("little", "bpfel"), ("big", "bpfeb")])
def test_the_encoding_is_llvms(order: str, triple: str) -> None:
    """A second opinion, independent of the hand-worked bytes: LLVM's BPF assembler."""
    mc = shutil.which("llvm-mc")
    if mc is None:
        pytest.skip("no llvm-mc here: the hand-worked bytes above decide")
    done = subprocess.run([mc, "-triple", triple, "-show-encoding"], capture_output=True,
                          text=True, input="\n".join(LLVM_TEXT) + "\n", timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    theirs = [bytes(int(b, 16) for b in line.split("encoding: [")[1].rstrip("]").split(","))
              for line in done.stdout.splitlines() if "encoding:" in line]
    ours = [insn(0xB7, 2, 0, 0, 7, order), insn(0x63, 1, 2, 32, 0, order),
            insn(0x25, 2, 0, 3, 100, order), insn(0x07, 2, 0, 0, -24, order),
            insn(0x7B, 10, 2, -16, 0, order), insn(0x61, 0, 6, 84, 0, order),
            insn(0x95, order=order)]
    assert theirs == ours
