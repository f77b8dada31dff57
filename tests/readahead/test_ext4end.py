"""ext4end: the debugfs session that puts the hot region in the last block groups,
planned exactly (pure: dumpe2fs text and staged-tree events in, commands out)."""

from __future__ import annotations

import os

import pytest

from backburner.base.errors import SystemStateError
from backburner.readahead import ext4end
from backburner.readahead.ext4end import Event, Fixup, Group

DUMPE2FS = """\
Filesystem volume name:   <none>
Block count:              81920

Group 0: (Blocks 0-32767) csum 0x9d9b
  Primary superblock at 0, Group descriptors at 1-1
  Inode table at 43-554 (+43)
  32189 free blocks, 8179 free inodes, 3 directories, 8179 unused inodes
  Free blocks: 579-32767
  Free inodes: 12-8192
Group 1: (Blocks 32768-65535) csum 0x2b03 [INODE_UNINIT, BLOCK_UNINIT, ITABLE_ZEROED]
  Backup superblock at 32768, Group descriptors at 32769-32769
  28089 free blocks, 8192 free inodes, 0 directories, 8192 unused inodes
  Free blocks: 33323-65535
  Free inodes: 8193-16384
Group 2: (Blocks 65536-81919) csum 0x3bbf [INODE_UNINIT]
  Inode table at 65538-66049 (+2)
  15870 free blocks, 8192 free inodes, 0 directories, 8192 unused inodes
  Free blocks: 66050, 66052-81919
  Free inodes: 16385-24576
Group 3: (Blocks 81920-81920) csum 0x0000 [INODE_UNINIT]
  0 free blocks, 0 free inodes, 0 directories, 0 unused inodes
  Free blocks:
  Free inodes:
"""


def test_parse_groups_reads_starts_flags_and_free_runs() -> None:
    groups = ext4end.parse_groups(DUMPE2FS)
    assert [g.index for g in groups] == [0, 1, 2, 3]
    assert [g.first for g in groups] == [0, 32768, 65536, 81920]
    assert [g.flags for g in groups] == [0, 7, 1, 1]
    assert groups[0].free_blocks == ((579, 32189),)
    assert groups[0].free_inodes == ((12, 8181),)
    assert groups[2].free_blocks == ((66050, 1), (66052, 15868))
    assert groups[2].free_block_count == 15870
    assert groups[3].free_blocks == () and groups[3].blocks_free == 0
    assert groups[1].blocks_free == 65535 - 33323 + 1


def test_parse_groups_refuses_text_without_groups() -> None:
    with pytest.raises(SystemStateError):
        ext4end.parse_groups("dumpe2fs 1.47.0\nBad magic number\n")


def _groups() -> list[Group]:
    return [Group(0, 0, 0, ((100, 900),), ((12, 89),), 900),
            Group(1, 1000, 3, ((1050, 950),), ((101, 100),), 950),
            Group(2, 2000, 1, ((2050, 950),), ((201, 100),), 950),
            Group(3, 3000, 1, ((3050, 450),), ((301, 100),), 450)]


def test_region_group_is_the_last_group_from_which_on_everything_fits() -> None:
    g = _groups()
    assert ext4end.region_group(g, 400, 50) == 3
    assert ext4end.region_group(g, 451, 50) == 2  # blocks decide
    assert ext4end.region_group(g, 400, 101) == 2  # inodes decide
    assert ext4end.region_group(g, 1400, 200) == 2
    assert ext4end.region_group(g, 1401, 200) == 1
    assert ext4end.region_group(g, 10**6, 1) == 0  # nothing fits: the whole filesystem


def test_quote_doubles_quotes_and_refuses_what_debugfs_cannot_read() -> None:
    assert ext4end.quote(b'a "b" c') == b'"a ""b"" c"'
    assert ext4end.quote(b"\xff<1>") == b'"\xff<1>"'
    for bad in (b"new\nline", b"cr\r", b"nul\0"):
        assert not ext4end.spellable(bad)
        with pytest.raises(AssertionError):
            ext4end.quote(bad)


def test_substitute_keeps_the_length_and_avoids_the_directory_s_names() -> None:
    assert ext4end.substitute(b"new\nline", set()) == b"new_line"
    assert ext4end.substitute(b"new\nline", {b"new_line"}) == b"new0line"
    assert ext4end.substitute(b"\n", {b"_", b"0"}) == b"1"
    two = ext4end.substitute(b"\r\n", {b"__"})
    assert len(two) == 2 and two != b"__" and ext4end.spellable(two)


def test_populate_spells_the_staged_tree_in_order() -> None:
    events = [Event("file", b"cold", host=b"/w/hot/cold", size=0),
              Event("symlink", b"ln", target=b"../x y"),
              Event("dir", b"\xffstage"),
              Event("dir", b"0000"),
              Event("file", b"a\nb", host=b"/w/hot/\xffstage/0000/a\nb", size=0),
              Event("fifo", b"p"),
              Event("char", b"null", rdev=os.makedev(1, 3)),
              Event("other", b"sock"),
              Event("symlink", b'q"l', target=b"bad\ntarget"),
              Event("up"),
              Event("file", b"0001", host=b"/w/hot/\xffstage/0001", size=5),
              Event("up")]
    script = ext4end.Script()
    ext4end.populate(events, b"/w/empty", script)
    assert script.commands == [
        b'write "/w/empty" "cold"',
        b'symlink "ln" "../x y"',
        b'mkdir "\xffstage"', b'cd "\xffstage"',
        b'mkdir "0000"', b'cd "0000"',
        b'write "/w/empty" "a_b"',
        b'mknod "p" p',
        b'mknod "null" c 1 3',
        b'write "/w/empty" "sock"',
        b'write "/w/empty" "q""l"',
        b"cd ..",
        b'write "/w/hot/\xffstage/0001" "0001"',
        b"cd .."]
    assert script.fixups == [Fixup(b"\xffstage/0000", b"a_b", b"a\nb")]
    assert script.stand_ins == [b"\xffstage/0000/sock", b'\xffstage/0000/q"l']
    assert script.inodes == 10


def test_first_pass_keeps_the_root_block_reserves_then_releases() -> None:
    g = _groups()
    script, root_block = ext4end.first_pass(g, 2, [Event("file", b"x", host=b"/h/x", size=1)],
                                            b"/e")
    assert root_block == 2050
    assert script.commands == [
        b"setb 2050",
        b"seti <12> 89", b"setb 100 900",
        b"seti <101> 100", b"setb 1050 950", b"set_bg 1 flags 2",
        b'write "/h/x" "x"',
        b"freei <12> 89", b"freeb 100 900",
        b"freei <101> 100", b"freeb 1050 950", b"set_bg 1 flags 3", b"set_bg 1 checksum calc"]


def test_first_pass_makes_a_block_uninit_region_group_s_bitmap_real() -> None:
    g = _groups()
    g[1] = Group(1, 1000, 3, ((1050, 950),), ((101, 100),), 950)
    script, root_block = ext4end.first_pass(g, 1, [], b"/e")
    assert root_block == 1050
    assert script.commands[:3] == [b"setb 1050", b"set_bg 1 flags 1", b"set_bg 1 checksum calc"]


def test_first_pass_in_group_0_leaves_the_root_where_it_is() -> None:
    script, root_block = ext4end.first_pass(_groups(), 0, [], b"/e")
    assert root_block is None and script.commands == []


def test_move_root_remaps_frees_and_corrects_both_counts() -> None:
    g = _groups()
    script = ext4end.move_root(150, 2050, g, 1000)
    assert script.commands == [
        b"set_inode_field <2> bmap[0] 2050", b"freeb 150",
        b"set_bg 0 free_blocks_count 901", b"set_bg 0 checksum calc",
        b"set_bg 2 free_blocks_count 949", b"set_bg 2 checksum calc"]


def test_cold_dirs_are_made_in_place_of_their_placeholders() -> None:
    script = ext4end.Script()
    ext4end.cold_dirs([b"zz", b"\xffstage/0003/cold dir", b"\xffstage/0003/new\nline"],
                      script)
    assert script.commands == [
        b'cd "/"', b'rm "zz"', b'mkdir "zz"',
        b'cd "/\xffstage/0003"', b'rm "cold dir"', b'mkdir "cold dir"',
        b"cd /"]
    empty = ext4end.Script()
    ext4end.cold_dirs([b"a\rb"], empty)
    assert empty.commands == []
