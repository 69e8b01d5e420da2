# SPDX-License-Identifier: GPL-2.0
"""Three ways to get a drgn Program of a QEMU guest (drgn 0.0.22).

* kcore(vmlinux): inside the guest, against /proc/kcore.
* vmcore(path, vmlinux): on the host, an ELF dump written by QEMU's
  dump-guest-memory (qemu/run --qmp; tools-drgn/qmp-dump).
* gdb(host, port, vmlinux): on the host, a live guest through QEMU's
  gdbstub (qemu/run --gdb PORT), reading physical memory
  (Qqemu.PhyMemMode:1); the vmcoreinfo is taken from the guest's memory.

drgn 0.0.22 cannot translate addresses when a Program has physical memory
only ("recursive address translation", fixed in 0.0.27), so the last two
build the Program by hand: set_core_dump() of a tiny ELF core holding only
the VMCOREINFO note, a physical segment, and two virtual segments (the
kernel image and the direct map) mapped onto it.  See ../shared/drgn-notes.md.
"""
import os
import socket
import struct
import subprocess
import tempfile

import drgn

START_KERNEL_MAP = 0xffffffff80000000
DEFAULT_PAGE_OFFSET = 0xffff888000000000
PAGE = 4096
ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def default_vmlinux():
    """The vmlinux when none is given: $SF_VMLINUX if it exists (qemu/run
    sets it in the guest to the vmlinux built with the booted bzImage; the
    harness may set it on the host), else the patched flavour's, from
    qemu/lib.sh, where the build layout is defined.  None if neither."""
    p = os.environ.get("SF_VMLINUX")
    if p and os.path.exists(p):
        return p
    try:
        p = subprocess.run(["bash", "-c", '. "$1/qemu/lib.sh" && sf_vmlinux patched', "-", ROOT],
                           check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return p or None


def kcore(vmlinux):
    prog = drgn.Program()
    prog.set_kernel()
    prog.load_debug_info([vmlinux])
    _check_release(prog, vmlinux)
    return prog


# --- vmcoreinfo ----------------------------------------------------------

def parse_vmcoreinfo(text):
    info = {}
    for line in text.decode(errors="replace").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            info[k] = v
    return info


def _note(name, ntype, desc):
    name = name + b"\0"
    pad = lambda b: b + b"\0" * (-len(b) % 4)
    return struct.pack("<III", len(name), len(desc), ntype) + pad(name) + pad(desc)


def _core_with_vmcoreinfo(text):
    """A minimal x86_64 ELF ET_CORE file with one PT_NOTE: VMCOREINFO."""
    note = _note(b"VMCOREINFO", 0, text)
    ehsize, phsize = 64, 56
    eh = struct.pack("<16sHHIQQQIHHHHHH", b"\x7fELF\x02\x01\x01" + b"\0" * 9,
                     4, 62, 1, 0, ehsize, 0, 0, ehsize, phsize, 1, 0, 0, 0)
    ph = struct.pack("<IIQQQQQQ", 4, 0, ehsize + phsize, 0, 0, len(note), len(note), 4)
    fd, path = tempfile.mkstemp(prefix="sfdrgn-", suffix=".core")
    with os.fdopen(fd, "wb") as f:
        f.write(eh + ph + note)
    return path


def _check_release(prog, vmlinux):
    """drgn does not check that vmlinux matches the memory: do it."""
    mem = prog["init_uts_ns"].name.release.string_().decode()
    banner = prog["linux_banner"].string_().decode()
    if mem not in banner:
        raise RuntimeError("%s does not match the guest (release %s)" % (vmlinux, mem))


def _program(read_phys, ram_size, vmcoreinfo, vmlinux):
    """A kernel Program over physical memory read by read_phys(addr, n)."""
    info = parse_vmcoreinfo(vmcoreinfo)
    for k in ("OSRELEASE", "PAGESIZE", "SYMBOL(swapper_pg_dir)"):
        if k not in info:
            raise RuntimeError("vmcoreinfo lacks %s" % k)
    phys_base = int(info.get("NUMBER(phys_base)", "0"))
    core = _core_with_vmcoreinfo(vmcoreinfo)
    prog = drgn.Program()
    try:
        prog.set_core_dump(core)
    finally:
        os.unlink(core)

    def phys(address, count, offset, physical):
        return read_phys(offset, count)

    prog.add_memory_segment(0, ram_size, phys, True)

    def image(address, count, offset, physical):
        return read_phys(address - START_KERNEL_MAP + phys_base, count)

    prog.add_memory_segment(START_KERNEL_MAP, 1 << 30, image, False)
    prog.load_debug_info([vmlinux])
    try:
        pob = prog["page_offset_base"].value_()
    except KeyError:
        pob = DEFAULT_PAGE_OFFSET

    def direct(address, count, offset, physical):
        return read_phys(address - pob, count)

    prog.add_memory_segment(pob, ram_size, direct, False)
    _check_release(prog, vmlinux)
    return prog


# --- vmcore from dump-guest-memory -----------------------------------------

class ElfDump:
    """Physical memory of a QEMU ELF dump (paging: false)."""

    def __init__(self, path):
        self.f = open(path, "rb")
        eh = self.f.read(64)
        if eh[:4] != b"\x7fELF" or eh[4] != 2:
            raise RuntimeError("%s is not a 64-bit ELF dump (use dump-guest-memory"
                               " without format, paging false)" % path)
        phoff, = struct.unpack_from("<Q", eh, 32)
        phentsize, phnum = struct.unpack_from("<HH", eh, 54)
        self.loads, self.vmcoreinfo = [], None
        for i in range(phnum):
            self.f.seek(phoff + i * phentsize)
            p_type, _, p_offset, _, p_paddr, p_filesz, _, _ = struct.unpack(
                "<IIQQQQQQ", self.f.read(56))
            if p_type == 1:
                self.loads.append((p_paddr, p_filesz, p_offset))
            elif p_type == 4:
                self.f.seek(p_offset)
                self._notes(self.f.read(p_filesz))
        self.ram_size = max(a + n for a, n, _ in self.loads)

    def _notes(self, data):
        off = 0
        while off + 12 <= len(data):
            namesz, descsz, _ = struct.unpack_from("<III", data, off)
            name = data[off + 12:off + 12 + namesz].rstrip(b"\0")
            doff = off + 12 + ((namesz + 3) & ~3)
            if name == b"VMCOREINFO":
                self.vmcoreinfo = data[doff:doff + descsz]
            off = doff + ((descsz + 3) & ~3)

    def read(self, addr, count):
        out = bytearray()
        while count:
            for a, n, o in self.loads:
                if a <= addr < a + n:
                    k = min(count, a + n - addr)
                    self.f.seek(o + addr - a)
                    out += self.f.read(k)
                    addr += k
                    count -= k
                    break
            else:
                raise drgn.FaultError("physical address not in the dump", addr)
        return bytes(out)


def vmcore(path, vmlinux):
    d = ElfDump(path)
    info = d.vmcoreinfo
    if info is None:
        # QEMU writes the note only if the guest registered it through
        # fw_cfg (which needs ACPI or fw_cfg.ioport= here): read it from
        # the guest's memory instead, as for a live guest.
        info = find_vmcoreinfo(d.read, vmlinux, d.ram_size)
    return _program(d.read, d.ram_size, info, vmlinux)


# --- live, over QEMU's gdbstub -------------------------------------------

class GdbStub:
    """A GDB remote protocol client for QEMU's gdbstub, physical memory only.

    Pages read are cached for the life of the object: make a new one (and a
    new Program) for each look, since the guest runs in between.
    """

    MAXREAD = 2048

    def __init__(self, host, port, timeout=20):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.cache = {}
        self.packets = 0
        # QEMU may volunteer a stop reply on connect: drain it.
        self.s.settimeout(0.3)
        try:
            while True:
                chunk = self.s.recv(4096)
                if not chunk:
                    break
                self.buf += chunk
        except socket.timeout:
            pass
        self.s.settimeout(timeout)
        if b"$" in self.buf:
            self.s.sendall(b"+")
        self.buf = b""
        self.cmd("qSupported:multiprocess+")
        self.cmd("?")
        if self.cmd("Qqemu.PhyMemMode:1") != b"OK":
            raise RuntimeError("gdbstub refused physical memory mode")

    def _recv_packet(self):
        while True:
            i = self.buf.find(b"$")
            if i >= 0:
                j = self.buf.find(b"#", i)
                if j >= 0 and len(self.buf) >= j + 3:
                    payload = self.buf[i + 1:j]
                    self.buf = self.buf[j + 3:]
                    self.s.sendall(b"+")
                    return self._unescape(payload)
            chunk = self.s.recv(65536)
            if not chunk:
                raise RuntimeError("gdbstub closed the connection")
            self.buf += chunk

    @staticmethod
    def _unescape(p):
        out = bytearray()
        i = 0
        while i < len(p):
            c = p[i]
            if c == 0x7d:		# '}' escape
                i += 1
                out.append(p[i] ^ 0x20)
            elif c == 0x2a:		# '*' run-length
                n = p[i + 1] - 29
                out += bytes([out[-1]]) * n
                i += 1
            else:
                out.append(c)
            i += 1
        return bytes(out)

    def cmd(self, payload):
        data = payload.encode()
        frame = b"$" + data + b"#%02x" % (sum(data) & 0xff)
        self.s.sendall(frame)
        self.packets += 1
        while True:
            self.buf = self.buf.lstrip(b"+")
            r = self._recv_packet()
            # a stop reply QEMU volunteered late is never a memory answer
            if payload[0] in "mMQ" and r[:1] in (b"T", b"S"):
                continue
            return r

    def _read_raw(self, addr, count):
        r = self.cmd("m%x,%x" % (addr, count))
        if r[:1] == b"E" and len(r) == 3:
            raise drgn.FaultError("gdbstub: %s" % r.decode(), addr)
        return bytes.fromhex(r.decode())

    def read(self, addr, count):
        out = bytearray()
        while count:
            page = addr & ~(PAGE - 1)
            data = self.cache.get(page)
            if data is None:
                data = self._read_raw(page, self.MAXREAD) + \
                    self._read_raw(page + self.MAXREAD, PAGE - self.MAXREAD)
                self.cache[page] = data
            k = min(count, page + PAGE - addr)
            out += data[addr - page:addr - page + k]
            addr += k
            count -= k
        return bytes(out)

    def write(self, addr, data):
        """Write guest physical memory (tests use it to break invariants)."""
        r = self.cmd("M%x,%x:%s" % (addr, len(data), data.hex()))
        for page in range(addr & ~(PAGE - 1), addr + len(data), PAGE):
            self.cache.pop(page, None)
        if r != b"OK":
            raise RuntimeError("gdbstub write failed: %r" % r)

    def resume(self):
        """Detach and let the guest run on."""
        try:
            self.cmd("D;1")
        except OSError:
            pass	# the guest is gone: nothing to resume
        finally:
            self.s.close()


def _nm(vmlinux, names):
    out = subprocess.run(["nm", vmlinux], check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] in names:
            syms[parts[2]] = int(parts[0], 16)
    return syms


def find_vmcoreinfo(read_phys, vmlinux, ram_size):
    """The guest's vmcoreinfo, read from its memory: find where the kernel
    image sits physically (linux_banner, 2 MiB aligned steps), then follow
    vmcoreinfo_note."""
    syms = _nm(vmlinux, {"_text", "linux_banner", "vmcoreinfo_note", "page_offset_base"})
    for k in ("_text", "linux_banner", "vmcoreinfo_note"):
        if k not in syms:
            raise RuntimeError("%s has no symbol %s (CONFIG_VMCORE_INFO?)" % (vmlinux, k))
    want = b"Linux version "
    for delta in range(0, ram_size, 2 << 20):
        # delta: physical address of _text
        def pa(sym):
            return sym - syms["_text"] + delta
        try:
            if read_phys(pa(syms["linux_banner"]), len(want)) != want:
                continue
        except drgn.FaultError:
            continue
        note_va, = struct.unpack("<Q", read_phys(pa(syms["vmcoreinfo_note"]), 8))
        pob = DEFAULT_PAGE_OFFSET
        if "page_offset_base" in syms:
            pob, = struct.unpack("<Q", read_phys(pa(syms["page_offset_base"]), 8))
        note = note_va - pob
        namesz, descsz, _ = struct.unpack("<III", read_phys(note, 12))
        name = read_phys(note + 12, namesz).rstrip(b"\0")
        if name != b"VMCOREINFO":
            raise RuntimeError("vmcoreinfo_note at %#x holds %r" % (note, name))
        return read_phys(note + 12 + ((namesz + 3) & ~3), descsz)
    raise RuntimeError("kernel image of %s not found in guest memory" % vmlinux)


def gdb(host, port, vmlinux, ram_size=2 << 30):
    """(Program, GdbStub) of a live guest; call stub.resume() when done."""
    stub = GdbStub(host, port)
    try:
        info = find_vmcoreinfo(stub.read, vmlinux, ram_size)
        return _program(stub.read, ram_size, info, vmlinux), stub
    except BaseException:
        stub.resume()
        raise
