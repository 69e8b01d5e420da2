# SPDX-License-Identifier: GPL-2.0
"""drgn helpers for shared folios (mm/shared_folio.c, fs/btrfs/shared-folio.c).

Nothing here prints.  Every function takes a drgn Program (or objects of
one) and reads the kernel's own structures; drgn 0.0.22 has no folio
helpers, so the fields are read directly.

Vocabulary, as in the kernel: a *physical* folio is a folio of a btrfs
filesystem's hidden extent-cache inode (indexed by logical address in
phased 2 MiB granules, and decompressed pages of compressed extents above
2^62 (2^57 before RFC v15): extent_place()) with a ``struct shared_folio`` descriptor in
->private; an *alias* is a ``struct sf_alias`` (a struct page allocated
from slab, below the vmemmap) in a file's page cache, pointing at its
physical folio.  A physical folio may be large (order k, up to 9); an
alias is order 0, one page of it (folio_pfn + j for j in [0, 2^k)), or
large (``struct sf_alias_large``, a whole struct folio: an aligned run of
2^m of its pages, m <= k); the one descriptor lists the aliases of every
page.  An alias's PFN is alias_pfn(): ->pfn_word >> 1.

Mappings (mmap sharing): a read fault on an alias maps the
*physical* page read-only into the file's own VMA, so the physical page's
mapcount counts PTEs in every sharer's processes, and each of those PTEs
lies in the mapping (alias->mapping->i_mmap) of some alias of that page,
at that alias's index.  ``page_ptes()`` and ``alias_ptes()`` find them by
walking the VMAs of a mapping and the page tables of each VMA's mm
(x86_64, by hand: drgn 0.0.22 has no page-table or VMA helpers).  They
take a ``memo`` dict that caches each mapping's VMAs and each mm's process
(and page_aliases() each descriptor's aliases) for one look; pass the same
dict to every call of a look, never across looks.
"""
import os
import struct
from collections import namedtuple
from itertools import islice

from drgn import FaultError, Object, cast, container_of
from drgn.helpers.linux.fs import d_path, dentry_path, hlist_for_each_entry
from drgn.helpers.linux.list import list_for_each_entry
from drgn.helpers.linux.mm import pfn_to_page
from drgn.helpers.linux.percpu import per_cpu_ptr
from drgn.helpers.linux.pid import for_each_task
from drgn.helpers.linux.cpumask import for_each_possible_cpu
from drgn.helpers.linux.rbtree import rbtree_inorder_for_each_entry
from drgn.helpers.linux.xarray import xa_for_each, xa_is_value, xa_load, xa_to_value

PAGE_SHIFT = 12
DEFAULT_PAGE_OFFSET = 0xffff888000000000	# x86_64 without KASLR of memory
DEFAULT_MAX_SHARING = 256	# mm/shared_folio.c: max_sharing
ALIAS_LIST_LIMIT = 1 << 16	# never read more of a descriptor's list
VMA_WALK_LIMIT = 1 << 20	# never read more VMAs of one mapping

# bytenr: the page's logical address, or for a page of a compressed extent
# the extent's; zoff: None, or the page's offset in the decompressed data.
Shared = namedtuple("Shared", "fs bytenr zoff folio pfn sf aliases")
# The extent cache's index space ("DOC: btrfs extent cache index space").
# RFC v15 on: a space of 2^BTRFS_SF_PHASE_SPACE_SHIFT bytes per phase, the
# compressed regions from 2^62; RFC v12-v14: a 4 MiB slot per granule, the
# compressed regions from 2^57 (extent_place() tells them apart).
COMP_BASE = 1 << 57
COMP_BASE_V15 = 1 << 62
GRANULE_SHIFT = 21
MAX_UNCOMPRESSED = 128 << 10
CacheEntry = namedtuple("CacheEntry", "index kind folio pfn physical")
# A present page-table entry: the PFN it maps at the address looked up,
# its R/W and dirty bits, and the size it maps (4 KiB, 2 MiB, 1 GiB).
Pte = namedtuple("Pte", "pfn writable dirty size")
# A VMA of a mapping's i_mmap, its range in page-cache indices and addresses.
VmaRange = namedtuple("VmaRange", "first last start end vma mm")
# A PTE found at index of mapping: in vma (of mm, process pid/comm; pid is
# None if no task uses mm) at address.
Mapper = namedtuple("Mapper", "pid comm mm vma address pte mapping index")


class WalkError(RuntimeError):
    """A walk read more than its bound: a corrupt list or tree."""


# --- basics --------------------------------------------------------------

def vmemmap(prog):
    """Address of the memmap (struct page of PFN 0)."""
    return pfn_to_page(prog, 0).value_()


def page_size_of(prog):
    return prog.type("struct page").size


def is_alias(prog, folio):
    """True if @folio (struct folio * or address) is a shared-folio alias."""
    addr = folio if isinstance(folio, int) else folio.value_()
    return addr < vmemmap(prog)


def folio_pfn(prog, folio):
    """PFN a folio describes: an alias resolves to its physical PFN, as the
    kernel's __page_to_pfn() does."""
    addr = folio.value_()
    base = vmemmap(prog)
    if addr < base:
        return alias_pfn(prog, sf_alias_of(prog, folio))
    return (addr - base) // page_size_of(prog)


def sf_alias_of(prog, alias):
    """The struct sf_alias around an alias folio."""
    return cast("struct sf_alias *", alias)


def alias_pfn(prog, a):
    """The PFN of an alias's (first) physical page, from its struct sf_alias
    *: ->pfn_word >> 1 since large aliases (RFC v12: bit 0 kept clear for
    page_fixed_fake_head()), ->pfn before."""
    if prog.type("struct sf_alias").has_member("pfn_word"):
        return a.pfn_word.value_() >> 1
    return a.pfn.value_()


def alias_order(prog, a):
    """The order of an alias (struct sf_alias *): 0, or a large alias's
    (DOC: Large aliases), kept in its folio's _flags_1 as for any folio."""
    if not a.page.flags.value_() & (1 << prog.constant("PG_head").value_()):
        return 0
    return cast("struct folio *", a.page.address_of_())._flags_1.value_() & 0xff


def alias_descriptor(prog, a):
    """->sf of an alias (struct sf_alias *): a large alias keeps it in its
    struct sf_alias_large (the order-0 place is its folio's _flags_1)."""
    if alias_order(prog, a):
        return cast("struct sf_alias_large *", a).sf
    return a.sf


def alias_folio(prog, a):
    """The struct folio * of a struct sf_alias *."""
    return cast("struct folio *", a.page.address_of_())


def alias_keeps_folio(prog):
    """True for the 128-byte struct sf_alias of RFC v4 and earlier, which
    kept the physical folio (->folio) and its own list node (->node).
    Since RFC v5 both are derived: the physical folio from ->pfn, and the
    list node is the struct page's lru (96 bytes: the struct page, the
    PFN, the alias LRU's head and ->sf)."""
    try:
        return prog.type("struct sf_alias").has_member("folio")
    except LookupError:
        return False


def page_folio(prog, page):
    """page_folio(): the struct folio * of a memmap page, which for a tail
    page of a large folio is its head (page->compound_head holds the
    head's address | 1)."""
    head = page.compound_head.value_()
    if head & 1:
        return Object(prog, "struct folio *", value=head - 1)
    return cast("struct folio *", page)


def pfn_folio(prog, pfn):
    """pfn_folio(): the folio the page at pfn belongs to."""
    return page_folio(prog, pfn_to_page(prog, pfn))


def alias_physical(prog, alias):
    """(physical folio, PFN) of an alias folio: the PFN of the alias's page,
    and the (head) folio that page belongs to, large or not."""
    a = sf_alias_of(prog, alias)
    pfn = alias_pfn(prog, a)
    if alias_keeps_folio(prog):
        return a.folio, pfn
    return pfn_folio(prog, pfn), pfn


def flag(prog, folio, name):
    """Test page flag PG_<name> of a folio (alias or not)."""
    bit = prog.constant("PG_" + name).value_()
    return bool(folio.flags.value_() & (1 << bit))


def refcount(folio):
    return folio._refcount.counter.value_()


def mapcount(folio):
    """Mappings of an order-0 folio (page->_mapcount + 1)."""
    return folio._mapcount.counter.value_() + 1


def folio_order(prog, folio):
    """folio_order(): 0, or the order kept in _flags_1 of a large folio."""
    if not flag(prog, folio, "head"):
        return 0
    return folio._flags_1.value_() & 0xff


def folio_nr_pages(prog, folio):
    return 1 << folio_order(prog, folio)


def folio_mapcount(prog, folio):
    """folio_mapcount(): _mapcount + 1 of an order-0 folio, _large_mapcount
    + 1 of a large one."""
    if folio_order(prog, folio) == 0:
        return mapcount(folio)
    return folio._large_mapcount.counter.value_() + 1


def entire_mapcount(folio):
    """The PMDs that map a large folio whole (_entire_mapcount + 1)."""
    return folio._entire_mapcount.counter.value_() + 1


def page_mapcount(prog, folio, pfn):
    """The PTEs that map the page at pfn of folio: folio_mapcount() of an
    order-0 folio, that page's own _mapcount + 1 in a large one (6.12
    keeps a mapcount per page; a PMD that maps the folio whole counts in
    entire_mapcount() instead)."""
    if folio_order(prog, folio) == 0:
        return mapcount(folio)
    return mapcount(pfn_to_page(prog, pfn))


# --- btrfs filesystems and their extent caches ---------------------------

def for_each_btrfs(prog):
    """Yield struct btrfs_fs_info * of every mounted btrfs."""
    for sb in list_for_each_entry("struct super_block", prog["super_blocks"].address_of_(),
                                  "s_list"):
        if sb.s_type.name.string_() == b"btrfs" and sb.s_fs_info:
            yield cast("struct btrfs_fs_info *", sb.s_fs_info)


def fs_name(fs_info):
    """A short name: the filesystem UUID."""
    u = bytes(fs_info.fs_devices.fsid.read_())
    return "%s-%s-%s-%s-%s" % (u[:4].hex(), u[4:6].hex(), u[6:8].hex(), u[8:10].hex(),
                               u[10:16].hex())


def has_sharing(fs_info):
    try:
        return bool(fs_info.sf_inode)
    except AttributeError:
        return False


def extent_cache(fs_info):
    """The extent cache's struct address_space * (trust domain 0), or None."""
    if not has_sharing(fs_info):
        return None
    return fs_info.sf_inode.i_mapping


def extent_caches(fs_info):
    """[(domain, struct address_space *)]: domain 0's extent cache, then the
    cache of every other trust domain (fs_info->sf_caches; a kernel without
    trust domains has domain 0's only)."""
    if not has_sharing(fs_info):
        return []
    caches = [(0, fs_info.sf_inode.i_mapping)]
    try:
        xa = fs_info.sf_caches.address_of_()
    except AttributeError:
        return caches
    for domain, entry in xa_for_each(xa):
        caches.append((domain, cast("struct inode *", entry).i_mapping))
    return caches


def sf_descriptor(prog, folio):
    """The struct shared_folio * of a physical folio, or None."""
    if not folio.private:
        return None
    return cast("struct shared_folio *", folio.private)


def max_sharing(prog):
    """The cap on aliases per physical page (/sys/kernel/mm/shared_folio/max_sharing):
    a physical folio of n pages has at most n times as many."""
    try:
        return prog["max_sharing"].value_()
    except KeyError:
        return DEFAULT_MAX_SHARING


def alias_walk_limit(prog, sf, nr_pages=1):
    """How many entries of a descriptor's list a walk reads at most: the cap
    for its folio of nr_pages pages (max_sharing, 256 by default, per page)
    or the descriptor's count if larger (the cap may have been lowered
    since), plus one, so that a list that does not end (a cycle that misses
    the head) shows as one entry too many."""
    n = min(sf.nr_aliases.value_(), ALIAS_LIST_LIMIT)
    return max(max_sharing(prog) * nr_pages, n) + 1


def folio_aliases(prog, sf, nr_pages=1):
    """The struct sf_alias * on a descriptor's list (of a physical folio of
    nr_pages pages: folio_nr_pages()), at most alias_walk_limit() of them."""
    node = "node" if alias_keeps_folio(prog) else "page.lru"
    return list(islice(list_for_each_entry("struct sf_alias", sf.aliases.address_of_(),
                                           node), alias_walk_limit(prog, sf, nr_pages)))


def aliases_by_pfn(prog, aliases):
    """{pfn: [struct sf_alias *]}: a descriptor's aliases by the page each
    stands for (a large alias, by each of its pages)."""
    out = {}
    for a in aliases:
        pfn = alias_pfn(prog, a)
        for j in range(1 << alias_order(prog, a)):
            out.setdefault(pfn + j, []).append(a)
    return out


def page_aliases(prog, sf, folio, pfn, memo=None):
    """The struct sf_alias * of descriptor sf (of physical folio folio)
    whose page is the one at pfn: every alias of an order-0 folio, those of
    one page of a large one.  memo caches each descriptor's list, by PFN,
    for one look."""
    key = ("aliases", sf.value_())
    if memo is not None and key in memo:
        byp = memo[key]
    else:
        byp = aliases_by_pfn(prog, folio_aliases(prog, sf, folio_nr_pages(prog, folio)))
        if memo is not None:
            memo[key] = byp
    return byp.get(pfn, [])


def extent_place(fs_info, index):
    """(bytenr, zoff) of extent-cache page index: its logical address and
    None, or for a decompressed page its compressed extent's logical address
    and its offset in the decompressed data."""
    pos = index << PAGE_SHIFT
    try:
        space = fs_info.prog_.constant("BTRFS_SF_PHASE_SPACE_SHIFT").value_()
    except LookupError:
        space = None
    comp_base = COMP_BASE_V15 if space else COMP_BASE
    if pos < comp_base:
        try:
            phases = fs_info.sf_phases.address_of_()
        except (AttributeError, LookupError):
            return pos, None	# before RFC v12: the logical address itself
        if space:
            # phase f's space: f * 2^space + logical + f * 4 KiB
            phase = pos >> space
            logical = (pos & ((1 << space) - 1)) - (phase << PAGE_SHIFT)
            entry = xa_load(phases, logical >> GRANULE_SHIFT) if logical >= 0 else None
            if not entry or not xa_is_value(entry) or xa_to_value(entry) != phase:
                return None, None	# not its granule's phase: no place
            return logical, None
        # a granule of 2 MiB of logical addresses in a 4 MiB slot, from
        # its phase
        granule, within = index >> (GRANULE_SHIFT + 1 - PAGE_SHIFT), \
            index & ((1 << (GRANULE_SHIFT + 1 - PAGE_SHIFT)) - 1)
        entry = xa_load(phases, granule)
        if not entry or not xa_is_value(entry):
            return None, None	# no phase: a page the kernel cannot place
        j = within - xa_to_value(entry)
        return (granule << GRANULE_SHIFT) + (j << PAGE_SHIFT), None
    sector = (pos - comp_base) // MAX_UNCOMPRESSED
    return sector * fs_info.sectorsize.value_(), (pos - comp_base) % MAX_UNCOMPRESSED


def place_str(bytenr, zoff):
    if bytenr is None:
        return "no phase recorded"
    return ("bytenr %#x" % bytenr if zoff is None
            else "compressed extent %#x + %#x" % (bytenr, zoff))


def shared(prog, fs_info, index, folio, sf):
    """The Shared tuple of an extent-cache folio with descriptor sf."""
    bytenr, zoff = extent_place(fs_info, index)
    return Shared(fs_info, bytenr, zoff, folio, folio_pfn(prog, folio), sf,
                  folio_aliases(prog, sf, folio_nr_pages(prog, folio)))


def for_each_shared_folio(prog, fs_info=None):
    """Yield a Shared tuple for every physical folio with a descriptor."""
    for fs in ([fs_info] if fs_info is not None else for_each_btrfs(prog)):
        for _, ec in extent_caches(fs):
            for index, entry in xa_for_each(ec.i_pages.address_of_()):
                if xa_is_value(entry):
                    continue
                folio = cast("struct folio *", entry)
                sf = sf_descriptor(prog, folio)
                if sf is None:
                    continue
                yield shared(prog, fs, index, folio, sf)


def extent_cache_folios(prog, fs_info):
    """Yield (index, folio, cache) of every folio in every trust domain's
    extent cache, shared or not."""
    for _, ec in extent_caches(fs_info):
        for index, entry in xa_for_each(ec.i_pages.address_of_()):
            if not xa_is_value(entry):
                yield index, cast("struct folio *", entry), ec


# --- inodes and paths ----------------------------------------------------

def for_each_inode(prog, fs_info):
    sb = fs_info.sb
    for inode in list_for_each_entry("struct inode", sb.s_inodes.address_of_(), "i_sb_list"):
        yield inode


def inode_cache(prog, inode, pages=False):
    """Yield a CacheEntry per page-cache entry of an inode (an alias whose
    PFN has no readable struct page has physical None).  With pages, one
    per page: a large alias (DOC: Large aliases) or a large private folio
    yields each of its pages, at its own index and PFN, with the same
    folio."""
    for index, entry in xa_for_each(inode.i_mapping.i_pages.address_of_()):
        if xa_is_value(entry):
            yield CacheEntry(index, "shadow", None, None, None)
            continue
        folio = cast("struct folio *", entry)
        if is_alias(prog, folio):
            a = sf_alias_of(prog, folio)
            try:
                phys, pfn = alias_physical(prog, folio)
            except FaultError:
                phys, pfn = None, alias_pfn(prog, a)
            kind, order = "alias", alias_order(prog, a)
        else:
            phys, pfn = None, folio_pfn(prog, folio)
            kind, order = "private", folio_order(prog, folio)
        first = folio.index.value_() if pages else index
        for j in range(1 << order if pages else 1):
            yield CacheEntry(first + j, kind, folio, pfn + j, phys)


def btrfs_mounts(prog):
    """Yield struct mount * of every btrfs mount in init's namespace."""
    ns = prog["init_task"].nsproxy.mnt_ns
    for mnt in rbtree_inorder_for_each_entry("struct mount", ns.mounts.address_of_(),
                                             "mnt_node"):
        if mnt.mnt.mnt_sb.s_type.name.string_() == b"btrfs":
            yield mnt


def inode_paths(prog, inode):
    """Full paths of an inode's dentries (through a mount where one covers
    it, else relative to the filesystem)."""
    paths = []
    mounts = [m for m in btrfs_mounts(prog) if m.mnt.mnt_sb == inode.i_sb]
    for dentry in hlist_for_each_entry("struct dentry", inode.i_dentry.address_of_(),
                                       "d_u.d_alias"):
        p = None
        for m in mounts:
            try:
                p = d_path(m.mnt.address_of_(), dentry).decode(errors="replace")
                break
            except Exception:
                continue
        if p is None:
            p = "<btrfs>" + dentry_path(dentry).decode(errors="replace")
        paths.append(p)
    return paths


def inode_name(prog, inode):
    p = inode_paths(prog, inode)
    if p:
        return p[0]
    root = cast("struct btrfs_inode *", container_of(inode, "struct btrfs_inode", "vfs_inode")).root
    return "<ino %d in subvolume %d>" % (inode.i_ino.value_(), root.root_key.objectid.value_())


def _child(dentry, name):
    for d in hlist_for_each_entry("struct dentry", dentry.d_children.address_of_(), "d_sib"):
        if d.d_name.name.string_() == name:
            return d
    return None


def lookup_path(prog, path):
    """The struct inode * of an absolute path on a btrfs mount, found
    through the dentry cache (drgn 0.0.22's path_lookup() is broken on
    6.12).  Raises LookupError if no cached dentry leads there."""
    best = None
    for m in btrfs_mounts(prog):
        mp = d_path(m.mnt.address_of_(), m.mnt.mnt_root).decode()
        if path == mp or path.startswith(mp.rstrip("/") + "/"):
            if best is None or len(mp) > len(best[0]):
                best = (mp, m)
    if best is None:
        raise LookupError("%s is not on a mounted btrfs" % path)
    mp, m = best
    d = m.mnt.mnt_root
    for comp in [c for c in path[len(mp):].split("/") if c]:
        nxt = _child(d, comp.encode())
        if nxt is None:
            raise LookupError("%s: no cached dentry for %r below %s" % (path, comp, mp))
        d = nxt
        # a subvolume or a mount on top: follow into the mounted root
        for mm in btrfs_mounts(prog):
            if mm.mnt_mountpoint == d and mm.mnt_parent == m:
                m, d = mm, mm.mnt.mnt_root
                break
    if not d.d_inode:
        raise LookupError("%s: negative dentry" % path)
    return d.d_inode


def alias_owners(prog, aliases):
    """(inode, index) of every alias (struct sf_alias *) in a mapping."""
    out = []
    for a in aliases:
        alias = alias_folio(prog, a)
        if alias.mapping:
            out.append((alias.mapping.host, alias.index.value_()))
    return out


def owners_of(prog, physical_sf, nr_pages=1):
    """(inode, index) of every alias on a descriptor (of a physical folio of
    nr_pages pages), whatever its page."""
    return alias_owners(prog, folio_aliases(prog, physical_sf, nr_pages))


# --- page tables, VMAs and the processes that map a page -----------------

_PAGE_PRESENT = 1 << 0
_PAGE_RW = 1 << 1
_PAGE_DIRTY = 1 << 6
_PAGE_PSE = 1 << 7
_PAGE_PROTNONE = 1 << 8		# _PAGE_GLOBAL's bit, in a non-present entry
_PHYSICAL_MASK = (1 << 52) - 1	# __PHYSICAL_MASK_SHIFT 52: PFN bits 12..51
_PTE_PFN_MASK = _PHYSICAL_MASK & ~((1 << PAGE_SHIFT) - 1)


def direct_map_base(prog):
    """PAGE_OFFSET: page_offset_base under CONFIG_RANDOMIZE_MEMORY, else
    the fixed 4-level base (as sfattach maps the direct map)."""
    try:
        return prog["page_offset_base"].value_()
    except KeyError:
        return DEFAULT_PAGE_OFFSET


def pgtable_levels(prog):
    """4, or 5 when CONFIG_X86_5LEVEL is built and LA57 in use."""
    try:
        return 5 if prog["__pgtable_l5_enabled"].value_() else 4
    except KeyError:
        return 4


def _leaf(val, address, shift):
    """The Pte of a leaf entry mapping 1 << shift bytes, or None."""
    if not val & (_PAGE_PRESENT | _PAGE_PROTNONE):
        return None		# none, swap or migration entry
    pfnval = val if val & _PAGE_PRESENT else ~val	# PROT_NONE: PFN inverted (L1TF)
    base = pfnval & _PHYSICAL_MASK & ~((1 << shift) - 1)
    return Pte((base >> PAGE_SHIFT) + ((address & ((1 << shift) - 1)) >> PAGE_SHIFT),
               bool(val & _PAGE_RW), bool(val & _PAGE_DIRTY), 1 << shift)


def follow_pte(prog, mm, address, memo=None):
    """The Pte that maps a user address in mm (struct mm_struct *), or None.

    Walks mm->pgd by hand (x86_64, 4- or 5-level), reading every table
    through the direct map (page_offset_base + physical address), so it
    works the same on /proc/kcore, an ELF dump and the gdbstub (drgn 0.0.22
    has no follow_pfn() and cannot read physical-only Programs).  A 2 MiB
    or 1 GiB leaf gives the PFN of the 4 KiB page at address.  Raises
    WalkError if a table cannot be read."""
    memo = {} if memo is None else memo
    if "paging" not in memo:
        memo["paging"] = (direct_map_base(prog), pgtable_levels(prog))
    base, levels = memo["paging"]
    shifts = (48, 39, 30, 21, 12) if levels == 5 else (39, 30, 21, 12)
    table = mm.pgd.value_()
    for shift in shifts:
        try:
            val = prog.read_u64(table + ((address >> shift) & 511) * 8)
        except FaultError:
            raise WalkError("mm %#x: page table at %#x unreadable (looking up %#x)"
                            % (mm.value_(), table, address))
        if shift == PAGE_SHIFT:
            return _leaf(val, address, shift)
        if shift in (30, 21) and val & _PAGE_PSE:
            return _leaf(val, address, shift)	# pud_leaf(), pmd_leaf()
        if not val & _PAGE_PRESENT:
            return None
        table = base + (val & _PTE_PFN_MASK)
    return None


def mapping_vmas(prog, mapping, memo=None):
    """The VMAs of mapping->i_mmap (struct rb_root_cached of vm_area_struct
    linked by shared.rb), as VmaRange tuples in vm_pgoff order, read once
    per look (memo).  Raises WalkError past VMA_WALK_LIMIT."""
    key = ("vmas", mapping.value_())
    if memo is not None and key in memo:
        return memo[key]
    out = []
    root = mapping.i_mmap.rb_root.address_of_()
    try:
        for vma in islice(rbtree_inorder_for_each_entry("struct vm_area_struct", root,
                                                        "shared.rb"), VMA_WALK_LIMIT + 1):
            start, end = vma.vm_start.value_(), vma.vm_end.value_()
            first = vma.vm_pgoff.value_()
            out.append(VmaRange(first, first + ((end - start) >> PAGE_SHIFT) - 1, start, end,
                                vma, vma.vm_mm.read_()))
    except RecursionError:
        raise WalkError("mapping %#x: i_mmap tree too deep (corrupt?)" % mapping.value_())
    if len(out) > VMA_WALK_LIMIT:
        raise WalkError("mapping %#x: more than %d VMAs in i_mmap (corrupt?)"
                        % (mapping.value_(), VMA_WALK_LIMIT))
    if memo is not None:
        memo[key] = out
    return out


def vmas_covering(prog, mapping, index, memo=None):
    """The VmaRange tuples of mapping whose range covers index
    (vma_interval_tree_foreach(vma, &mapping->i_mmap, index, index))."""
    out = []
    for v in mapping_vmas(prog, mapping, memo):
        if v.first > index:
            break
        if v.last >= index:
            out.append(v)
    return out


def mm_process(prog, mm, memo=None):
    """(pid, comm) of the process whose mm this is: mm->owner's thread
    group (CONFIG_MEMCG), else a task whose ->mm is mm, preferring a
    thread-group leader; (None, None) if no task uses it."""
    memo = {} if memo is None else memo
    key = ("mm", mm.value_())
    if key in memo:
        return memo[key]
    res = (None, None)
    try:
        owner = mm.owner.read_()
    except (AttributeError, FaultError):	# !CONFIG_MEMCG, or unreadable
        owner = None
    try:
        if owner:
            task = owner.group_leader.read_()
            res = (task.tgid.value_(), task.comm.string_().decode(errors="replace"))
    except FaultError:	# a stale owner: search instead
        pass
    if res[0] is None:
        if "tasks" not in memo:
            tasks = {}
            for t in for_each_task(prog):
                m = t.mm.value_()
                if m and (m not in tasks or t.pid.value_() == t.tgid.value_()):
                    tasks[m] = t
            memo["tasks"] = tasks
        task = memo["tasks"].get(mm.value_())
        if task is not None:
            res = (task.tgid.value_(), task.comm.string_().decode(errors="replace"))
    memo[key] = res
    return res


def index_ptes(prog, mapping, index, memo=None):
    """A Mapper for every present PTE at index in mapping's VMAs, whatever
    page it maps (the caller compares Mapper.pte.pfn)."""
    out = []
    for v in vmas_covering(prog, mapping, index, memo):
        address = v.start + ((index - v.first) << PAGE_SHIFT)
        if not v.start <= address < v.end:
            continue
        pte = follow_pte(prog, v.mm, address, memo)
        if pte is None:
            continue
        pid, comm = mm_process(prog, v.mm, memo)
        out.append(Mapper(pid, comm, v.mm, v.vma, address, pte, mapping, index))
    return out


def pfn_is_anon(prog, pfn):
    """True if the page at pfn is anonymous (its head's mapping has
    PAGE_MAPPING_ANON): a MAP_PRIVATE copy-on-write page, not a file's."""
    try:
        return bool(pfn_folio(prog, pfn).mapping.value_() & 1)
    except FaultError:
        return False


def page_ptes(prog, mapping, index, pfn, memo=None):
    """(mapped, others): the Mappers at index of mapping whose PTE maps pfn,
    and those whose PTE maps some other page that is not anonymous (a stale
    PTE: a file's PTE must map its page-cache page).  Copy-on-write pages
    of MAP_PRIVATE VMAs are left out."""
    mapped, others = [], []
    for m in index_ptes(prog, mapping, index, memo):
        if m.pte.pfn == pfn:
            mapped.append(m)
        elif not pfn_is_anon(prog, m.pte.pfn):
            others.append(m)
    return mapped, others


def alias_ptes(prog, aliases, pfn, memo=None):
    """page_ptes() over every alias (struct sf_alias *, as folio_aliases()
    gives them) in its mapping at its index: the PTEs of a physical page
    (DOC: Mapping in mm/shared_folio.c), each (mm, address) once.  Pass
    the aliases of that one page (page_aliases(), aliases_by_pfn()): at
    the index of an alias of another page of a large folio, the PTE maps
    that other page and would count as stale."""
    mapped, others, seen, done = [], [], set(), set()
    for a in aliases:
        if a.value_() in done:	# a list that loops: each alias once
            continue
        done.add(a.value_())
        alias = alias_folio(prog, a)
        mapping = alias.mapping.read_()
        if not mapping:
            continue
        # a large alias's page at pfn is at its own index in the file
        index = alias.index.value_() + pfn - alias_pfn(prog, a)
        m1, o1 = page_ptes(prog, mapping, index, pfn, memo)
        for found, out in ((m1, mapped), (o1, others)):
            for m in found:
                k = (m.mm.value_(), m.address)
                if k not in seen:
                    seen.add(k)
                    out.append(m)
    return mapped, others


def process_name(m):
    """"pid comm" of a Mapper, or "? <mm ADDR>" when no task uses its mm."""
    if m.pid is None:
        return "? <mm %#x>" % m.mm.value_()
    return "%d %s" % (m.pid, m.comm)


# --- counters ------------------------------------------------------------

def node_stat_exact(prog, name):
    """A node_stat_item summed exactly: global counter plus every CPU's
    pending delta on every node (what /proc/vmstat shows after
    vm.stat_refresh)."""
    item = prog.constant(name).value_()
    total = prog["vm_node_stat"][item].counter.value_()
    try:
        pgdats = [prog["node_data"][nid] for nid in range(prog["nr_online_nodes"].value_())]
    except KeyError:	# !CONFIG_NUMA
        pgdats = [prog["contig_page_data"].address_of_()]
    for pgdat in pgdats:
        for cpu in for_each_possible_cpu(prog):
            total += per_cpu_ptr(pgdat.per_cpu_nodestats, cpu).vm_node_stat_diff[item].value_()
    return total


def has_pages_counter(prog):
    """True if struct shared_folio_stats counts the pages of physical folios
    (->pages, with large physical folios; NR_SHARED_FOLIO then counts pages
    too).  Before, every physical folio was one page and ->folios said it."""
    try:
        return prog.type("struct shared_folio_stats").has_member("pages")
    except LookupError:
        return False


def fs_counters(prog, fs_info):
    """The per-filesystem counters shown in /sys/fs/btrfs/<uuid>/shared_folio/:
    one structure, struct shared_folio_stats.  "pages" only if the kernel
    has it (has_pages_counter())."""
    st = fs_info.sf_stats
    names = ("folios", "aliases", "hits", "misses", "unshares", "reclaims")
    if has_pages_counter(prog):
        names += ("pages",)
    if st.type_.has_member("large_aliases"):
        names += ("large_aliases", "breaks")
    c = {f: getattr(st, f).counter.value_() for f in names}
    if "large_aliases" in c:	# its sysfs name
        c["large_alias_count"] = c.pop("large_aliases")
    # shared_folio_bytes_saved(): aliases less the pages they stand on
    c["bytes_saved"] = max(0, c["aliases"] - c.get("pages", c["folios"])) << PAGE_SHIFT
    c["enabled"] = int(fs_info.sf_enabled.value_())
    return c


def orders_str(orders):
    """"0:N 8:M" of an {order: folios} dict, "-" if empty."""
    return " ".join("%d:%d" % (o, orders[o]) for o in sorted(orders)) or "-"


def totals(prog):
    """Counted by walking the structures, next to the kernel's counters
    ("kernel_pages" None on a kernel without the pages counter)."""
    t = {"filesystems": 0, "folios": 0, "pages": 0, "aliases": 0, "bytes_saved": 0,
         "orders": {}, "alias_objects": 0, "alias_orders": {},
         "kernel_folios": 0, "kernel_aliases": 0,
         "kernel_pages": 0 if has_pages_counter(prog) else None}
    for fs in for_each_btrfs(prog):
        if not has_sharing(fs):
            continue
        t["filesystems"] += 1
        c = fs_counters(prog, fs)
        t["kernel_folios"] += c["folios"]
        t["kernel_aliases"] += c["aliases"]
        if "pages" in c:
            t["kernel_pages"] += c["pages"]
        for s in for_each_shared_folio(prog, fs):
            order = folio_order(prog, s.folio)
            t["folios"] += 1
            t["pages"] += 1 << order
            t["orders"][order] = t["orders"].get(order, 0) + 1
            # pages aliased (the kernel's counter), and the objects
            for a in s.aliases:
                ao = alias_order(prog, a)
                t["aliases"] += 1 << ao
                t["alias_objects"] += 1
                t["alias_orders"][ao] = t["alias_orders"].get(ao, 0) + 1
    t["bytes_saved"] = max(0, t["aliases"] - t["pages"]) << PAGE_SHIFT
    t["vmstat_nr_shared_folio"] = node_stat_exact(prog, "NR_SHARED_FOLIO")
    t["vmstat_nr_shared_folio_alias"] = node_stat_exact(prog, "NR_SHARED_FOLIO_ALIAS")
    return t


# --- invariants ----------------------------------------------------------

def _where_pte(m):
    """pid comm @address of a Mapper."""
    return "%s @%#x" % (process_name(m), m.address)


def _mapping_checks(prog, s, order, where, memo, bad):
    """The mapping checks of one physical folio (Shared s, of order):
    every PTE of one of its pages lies in the mapping of an alias of that
    page, at the alias's index, read-only, and the page's mapcount counts
    them; a PMD that maps a PMD-order folio counts in its entire mapcount
    instead (6.12), once however many of its pages' aliases lead to it; a
    large folio's mapcount counts them all.  Returns the mappings found
    (PTEs and PMDs)."""
    npages = 1 << order
    bypage = {}
    for pfn, aliases in aliases_by_pfn(prog, s.aliases).items():
        if s.pfn <= pfn < s.pfn + npages:	# the others are the alias checks'
            bypage[pfn - s.pfn] = aliases
    if order == 0:
        counts = {0: mapcount(s.folio)}
    else:	# the pages with an alias or a PTE (6.12's per-page mapcounts)
        counts = {}
        for j in range(npages):
            n = mapcount(pfn_to_page(prog, s.pfn + j))
            if n or j in bypage:
                counts[j] = n
    found, walked, pmds = 0, True, set()
    for j in sorted(counts):
        pfn = s.pfn + j
        pw = where if order == 0 else "%s page %d (pfn %#x)" % (where, j, pfn)
        try:
            maps, stale = alias_ptes(prog, bypage.get(j, []), pfn, memo)
        except WalkError as e:
            bad.append("%s: %s" % (pw, e))
            walked = False
            continue
        ptes = [m for m in maps if m.pte.size == 1 << PAGE_SHIFT]
        for m in maps:
            if m.pte.size != 1 << PAGE_SHIFT:	# a PMD (or PUD) leaf
                pmds.add((m.mm.value_(), m.address & ~(m.pte.size - 1)))
        found += len(ptes)
        if len(ptes) != counts[j]:
            bad.append("%s: mapcount %d, %d PTEs in its aliases' mappings%s"
                       % (pw, counts[j], len(ptes),
                          "".join(" [%s]" % _where_pte(m) for m in ptes[:8])))
        for m in maps:
            if m.pte.writable:
                bad.append("%s: mapped writable by %s" % (pw, _where_pte(m)))
        for m in stale:
            bad.append("%s: %s index %d maps pfn %#x, not its alias's page"
                       % (pw, _where_pte(m), m.index, m.pte.pfn))
    if order and walked and len(pmds) != entire_mapcount(s.folio):
        bad.append("%s: entire mapcount %d, %d PMDs in its pages' aliases' mappings"
                   % (where, entire_mapcount(s.folio), len(pmds)))
    if order and walked and found + len(pmds) != folio_mapcount(prog, s.folio):
        bad.append("%s: folio mapcount %d, %d PTEs and %d PMDs in its pages' aliases' mappings"
                   % (where, folio_mapcount(prog, s.folio), found, len(pmds)))
    return found + len(pmds)


def audit(prog, counted=None):
    """Check the invariants of design/design.md; return a list of
    violations (strings), empty when all hold.  One walk: if counted is a
    dict, it receives what the walk found ("filesystems", "folios",
    "pages": their pages, "aliases", "mapped": physical folios with a PTE,
    "ptes": their PTEs, "orders": {order: physical folios}), so that
    callers need not walk again.

    The mapping checks compare each physical page's mapcount with the PTEs
    found in the mappings of its aliases (alias_ptes()), and a large
    folio's total mapcount with all of them; on a live guest read through
    /proc/kcore a fault or zap in between can make them differ."""
    bad = []
    listed = {}
    memo = {}
    cap = max_sharing(prog)
    by_pages = has_pages_counter(prog)
    seen = {"filesystems": 0, "folios": 0, "pages": 0, "aliases": 0, "mapped": 0, "ptes": 0,
            "orders": {}, "alias_orders": {}}
    for fs in for_each_btrfs(prog):
        if not has_sharing(fs):
            continue
        seen["filesystems"] += 1
        nfolios = npages_fs = naliases = npages_fs_aliased = 0
        for index, f, ec in extent_cache_folios(prog, fs):
            sf = sf_descriptor(prog, f)
            if sf is None:
                # no descriptor, no alias, so no PTE may map it
                if folio_mapcount(prog, f):
                    bad.append("extent-cache pfn %#x (%s): no descriptor but mapped"
                               " %d times" % (folio_pfn(prog, f),
                                              place_str(*extent_place(fs, index)),
                                              folio_mapcount(prog, f)))
                continue
            s = shared(prog, fs, index, f, sf)
            order = folio_order(prog, f)
            npages = 1 << order
            where = ("physical pfn %#x (%s)" % (s.pfn, place_str(s.bytenr, s.zoff)) if order == 0
                     else "physical pfn %#x order %d (%s)"
                     % (s.pfn, order, place_str(s.bytenr, s.zoff)))
            nfolios += 1
            npages_fs += npages
            naliases += len(s.aliases)
            seen["orders"][order] = seen["orders"].get(order, 0) + 1
            if f.mapping != ec:
                bad.append("%s: mapping is not the extent cache" % where)
            if not flag(prog, f, "private"):
                bad.append("%s: descriptor without PG_private" % where)
            if not flag(prog, f, "uptodate"):
                bad.append("%s: shared but not uptodate" % where)
            for fl in ("dirty", "writeback"):
                if flag(prog, f, fl):
                    bad.append("%s: shared folio is %s" % (where, fl))
            if sf.nr_aliases.value_() != len(s.aliases):
                bad.append("%s: descriptor counts %d aliases, its list holds %d"
                           % (where, sf.nr_aliases.value_(), len(s.aliases)))
            if len(s.aliases) >= alias_walk_limit(prog, sf, npages):
                bad.append("%s: alias list does not end within %d entries (cap %d)"
                           % (where, len(s.aliases), cap * npages))
            # the page cache holds one reference per page
            mapped = folio_mapcount(prog, f)
            need = npages + 1 + len(s.aliases) + mapped
            if refcount(f) < need:
                bad.append("%s: refcount %d does not cover cache%s + descriptor + %d aliases"
                           " + %d mappings" % (where, refcount(f),
                                               "" if order == 0 else " (%d pages)" % npages,
                                               len(s.aliases), mapped))
            # every PTE of a physical page lies in the mapping of an alias
            # of that page, at the alias's index, read-only, and the
            # mapcount counts them
            found = _mapping_checks(prog, s, order, where, memo, bad)
            seen["mapped"] += bool(found)
            seen["ptes"] += found
            for a in s.aliases:
                alias = alias_folio(prog, a)
                aw = "alias %#x of %s" % (alias.value_(), where)
                if listed.get(alias.value_()) is s:
                    continue	# a list that loops: checked once
                listed[alias.value_()] = s
                if alias_descriptor(prog, a) != sf:
                    bad.append("%s: points at another descriptor" % aw)
                apfn = alias_pfn(prog, a)
                aorder = alias_order(prog, a)
                npages_fs_aliased += 1 << aorder
                if aorder:
                    seen["alias_orders"][aorder] = seen["alias_orders"].get(aorder, 0) + 1
                    if (apfn - s.pfn) % (1 << aorder) or alias.index.value_() % (1 << aorder):
                        bad.append("%s: order %d at pfn %#x, index %d: not aligned"
                                   % (aw, aorder, apfn, alias.index.value_()))
                    if refcount(alias) < (1 << aorder):
                        bad.append("%s: order %d, refcount %d below the page cache's"
                                   % (aw, aorder, refcount(alias)))
                try:
                    phys = alias_physical(prog, alias)[0]
                except FaultError:	# a PFN outside the memmap
                    phys = None
                if phys is None or phys != f:
                    bad.append("%s: points at another physical folio" % aw)
                if not s.pfn <= apfn <= apfn + (1 << aorder) - 1 < s.pfn + npages:
                    bad.append("%s: pfn %#x, physical is %#x%s"
                               % (aw, apfn, s.pfn,
                                  "" if order == 0 else "-%#x" % (s.pfn + npages - 1)))
                if not alias.mapping:
                    bad.append("%s: listed but in no mapping" % aw)
                elif xa_load(alias.mapping.i_pages.address_of_(), alias.index.value_()) != alias:
                    bad.append("%s: not in its mapping at index %d"
                               % (aw, alias.index.value_()))
                for fl in ("dirty", "lru", "writeback", "private"):
                    if flag(prog, alias, fl):
                        bad.append("%s: alias is %s" % (aw, fl))
                if not flag(prog, alias, "uptodate"):
                    bad.append("%s: alias not uptodate" % aw)
                if alias._mapcount.counter.value_() != -1:
                    bad.append("%s: alias _mapcount %d, must stay -1 (the physical page"
                               " is mapped, never an alias)"
                               % (aw, alias._mapcount.counter.value_()))
                if refcount(alias) < 1:
                    bad.append("%s: alias refcount %d" % (aw, refcount(alias)))
        seen["folios"] += nfolios
        seen["pages"] += npages_fs
        seen["aliases"] += naliases
        c = fs_counters(prog, fs)
        if c["folios"] != nfolios:
            bad.append("%s: counter says %d shared folios, walk finds %d"
                       % (fs_name(fs), c["folios"], nfolios))
        if "pages" in c and c["pages"] != npages_fs:
            bad.append("%s: counter says %d pages of shared folios, walk finds %d"
                       % (fs_name(fs), c["pages"], npages_fs))
        # the aliases counter counts pages aliased since large aliases
        want = npages_fs_aliased if "large_alias_count" in c else naliases
        if c["aliases"] != want:
            bad.append("%s: counter says %d aliases, walk finds %d"
                       % (fs_name(fs), c["aliases"], want))
        # every alias in a file's page cache is on its descriptor's list
        for inode in for_each_inode(prog, fs):
            if not inode.i_mapping or not inode.i_mapping.nrpages:
                continue
            for e in inode_cache(prog, inode):
                if e.kind != "alias":
                    continue
                if e.folio.value_() not in listed:
                    bad.append("alias %#x of %s index %d: in the page cache but on no"
                               " descriptor's list" % (e.folio.value_(),
                                                       inode_name(prog, inode), e.index))
                    if e.folio._mapcount.counter.value_() != -1:
                        bad.append("alias %#x: _mapcount %d, must stay -1"
                                   % (e.folio.value_(), e.folio._mapcount.counter.value_()))
                elif e.folio.mapping != inode.i_mapping:
                    bad.append("alias %#x: in %s but its mapping is another"
                               % (e.folio.value_(), inode_name(prog, inode)))
    # the node counters of /proc/vmstat agree with the walk of every btrfs
    # (NR_SHARED_FOLIO counts pages since large physical folios, folios
    # before, when each was one page)
    for item, name in (("pages" if by_pages else "folios", "NR_SHARED_FOLIO"),
                       ("aliases", "NR_SHARED_FOLIO_ALIAS")):
        v = node_stat_exact(prog, name)
        if v != seen[item]:
            bad.append("vmstat %s %d, walk finds %d" % (name.lower(), v, seen[item]))
    if counted is not None:
        counted.update(seen)
    return bad


# --- orphans ---------------------------------------------------------------

# /proc/kpageflags bits (Documentation/admin-guide/mm/pagemap.rst).
KPF_LRU, KPF_SLAB, KPF_ANON, KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL = 5, 7, 12, 15, 16
Orphan = namedtuple("Orphan", "pfn order refcount mapcount index flags memcg aliases")
# An alias object that still points into an orphan (sfdrgn orphans): its
# folio address, order, refcount, mapping (0 once removed), index, and
# whether it is still on a descriptor's list.
AliasRef = namedtuple("AliasRef", "addr order refcount mapping index linked")


def kpageflags_pfns(match, path="/proc/kpageflags"):
    """PFNs whose /proc/kpageflags word satisfies @match (read in multiples
    of 8 bytes, as it requires), or None if it cannot be read (not in the
    guest, not root)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    pfns, pfn = [], 0
    try:
        while True:
            b = os.read(fd, 8 << 16)
            if not b:
                break
            for (fl,) in struct.iter_unpack("<Q", b):
                if match(fl):
                    pfns.append(pfn)
                pfn += 1
    finally:
        os.close(fd)
    return pfns


def kpageflags_large_lru(path="/proc/kpageflags"):
    """PFNs of large folio heads on the LRU and not anonymous."""
    want = (1 << KPF_LRU) | (1 << KPF_COMPOUND_HEAD)
    return kpageflags_pfns(lambda fl: fl & want == want and not fl & (1 << KPF_ANON), path)


def slab_objects(prog, name, typ):
    """The allocated objects of slab cache @name as @typ pointers.  drgn
    0.0.22's slab_cache_for_each_allocated_object() looks for slab pages by
    PG_slab, which 6.10 replaced by a page type; here the slab pages come
    from /proc/kpageflags (KPF_SLAB, heads only) and drgn's own helper sorts
    each slab's free objects out (its freelists, hardened or not)."""
    from drgn.helpers.linux import slab as dslab
    sc = dslab.find_slab_cache(prog, name)
    if sc is None:
        return
    try:
        prog.constant("PG_slab")
        yield from dslab.slab_cache_for_each_allocated_object(sc, typ)
        return
    except LookupError:
        pass
    pfns = kpageflags_pfns(lambda fl: fl & (1 << KPF_SLAB) and not fl & (1 << KPF_COMPOUND_TAIL))
    if pfns is None:
        raise RuntimeError("slab walk: cannot read /proc/kpageflags (inside the guest, as root)")
    helper = dslab._get_slab_cache_helper(sc)
    ptype = prog.pointer_type(prog.type(typ))
    stype = prog.type("struct slab *")
    for pfn in pfns:
        try:
            page = pfn_to_page(prog, pfn)
            slab = cast(stype, page)
            if slab.slab_cache != sc:
                continue
            yield from helper._page_objects(page, slab, ptype)
        except FaultError:
            continue


def orphans(prog, candidates):
    """The large folios among the PFNs @candidates (heads on the LRU) that
    belong to no mapping: folios that left a page cache (an extent cache's
    truncate, a file's) while something still held references, which
    nothing but that holder can free, and which neither reclaim nor
    migration can move.  A few may be in flight (a pipe, a reader copying);
    once every process is gone, none."""
    out = []
    for pfn in candidates:
        try:
            folio = pfn_folio(prog, pfn)
            if folio.value_() != pfn_to_page(prog, pfn).value_() or folio.mapping.value_():
                continue
            out.append(Orphan(pfn, folio_order(prog, folio), refcount(folio),
                              folio_mapcount(prog, folio), folio.index.value_(),
                              folio.flags.value_(), folio.memcg_data.value_(), []))
        except FaultError:
            continue
    if out:
        alias_refs_into(prog, out)
    return out


def alias_refs_into(prog, found):
    """Fill each Orphan's .aliases with the alias objects, allocated in
    the two alias slab caches, whose physical pages lie inside it.  One
    with a refcount holds a reference on its physical folio (and its own
    refcount says who holds it on); one at refcount 0 was freed and waits
    for its RCU grace period (kfree_rcu()): sf_alias_free() dropped its
    physical reference already, and its list head (linked) overlays the
    rcu_head."""
    spans = sorted((o.pfn, o.pfn + (1 << o.order), o) for o in found)
    for cache, typ in (("sf_alias", "struct sf_alias"),
                       ("sf_alias_large", "struct sf_alias_large")):
        for obj in slab_objects(prog, cache, typ):
            try:
                a = cast("struct sf_alias *", obj)
                p = alias_pfn(prog, a)
                for lo, hi, o in spans:
                    if lo <= p < hi:
                        f = alias_folio(prog, a)
                        o.aliases.append(AliasRef(f.value_(), alias_order(prog, a), refcount(f),
                                                  f.mapping.value_(), f.index.value_(),
                                                  a.page.lru.next.value_() != a.page.lru.address_of_().value_()))
                        break
            except FaultError:
                continue
