# SPDX-License-Identifier: GPL-2.0
"""drgn helpers for shared folios (mm/shared_folio.c, fs/btrfs/shared-folio.c).

Nothing here prints.  Every function takes a drgn Program (or objects of
one) and reads the kernel's own structures; drgn 0.0.22 has no folio
helpers, so the fields are read directly.

Vocabulary, as in the kernel: a *physical* folio is a folio of a btrfs
filesystem's hidden extent-cache inode (indexed by disk bytenr >> 12) with
a ``struct shared_folio`` descriptor in ->private; an *alias* is a
``struct sf_alias`` (a struct page allocated from slab, below the vmemmap)
in a file's page cache, pointing at its physical folio.
"""
from collections import namedtuple

from drgn import Object, cast, container_of
from drgn.helpers.linux.fs import d_path, dentry_path, hlist_for_each_entry
from drgn.helpers.linux.list import list_for_each_entry
from drgn.helpers.linux.mm import pfn_to_page
from drgn.helpers.linux.percpu import per_cpu_ptr
from drgn.helpers.linux.cpumask import for_each_possible_cpu
from drgn.helpers.linux.rbtree import rbtree_inorder_for_each_entry
from drgn.helpers.linux.xarray import xa_for_each, xa_is_value, xa_load

PAGE_SHIFT = 12

Shared = namedtuple("Shared", "fs bytenr folio pfn sf aliases")
CacheEntry = namedtuple("CacheEntry", "index kind folio pfn physical")


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
        return sf_alias_of(prog, folio).pfn.value_()
    return (addr - base) // page_size_of(prog)


def sf_alias_of(prog, alias):
    """The struct sf_alias around an alias folio."""
    return cast("struct sf_alias *", alias)


def alias_folio(prog, a):
    """The struct folio * of a struct sf_alias *."""
    return cast("struct folio *", a.page.address_of_())


def alias_physical(prog, alias):
    """(physical folio, PFN) of an alias folio."""
    a = sf_alias_of(prog, alias)
    return a.folio, a.pfn.value_()


def flag(prog, folio, name):
    """Test page flag PG_<name> of a folio (alias or not)."""
    bit = prog.constant("PG_" + name).value_()
    return bool(folio.flags.value_() & (1 << bit))


def refcount(folio):
    return folio._refcount.counter.value_()


def mapcount(folio):
    """Mappings of an order-0 folio (page->_mapcount + 1)."""
    return folio._mapcount.counter.value_() + 1


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
    """The extent cache's struct address_space *, or None."""
    if not has_sharing(fs_info):
        return None
    return fs_info.sf_inode.i_mapping


def sf_descriptor(prog, folio):
    """The struct shared_folio * of a physical folio, or None."""
    if not folio.private:
        return None
    return cast("struct shared_folio *", folio.private)


def folio_aliases(prog, sf):
    """The struct sf_alias * on a descriptor's list."""
    return list(list_for_each_entry("struct sf_alias", sf.aliases.address_of_(), "node"))


def for_each_shared_folio(prog, fs_info=None):
    """Yield a Shared tuple for every physical folio with a descriptor."""
    for fs in ([fs_info] if fs_info is not None else for_each_btrfs(prog)):
        ec = extent_cache(fs)
        if ec is None:
            continue
        for index, entry in xa_for_each(ec.i_pages.address_of_()):
            if xa_is_value(entry):
                continue
            folio = cast("struct folio *", entry)
            sf = sf_descriptor(prog, folio)
            if sf is None:
                continue
            yield Shared(fs, index << PAGE_SHIFT, folio, folio_pfn(prog, folio), sf,
                         folio_aliases(prog, sf))


def extent_cache_folios(prog, fs_info):
    """Yield (index, folio) of every folio in the extent cache, shared or not."""
    ec = extent_cache(fs_info)
    if ec is None:
        return
    for index, entry in xa_for_each(ec.i_pages.address_of_()):
        if not xa_is_value(entry):
            yield index, cast("struct folio *", entry)


# --- inodes and paths ----------------------------------------------------

def for_each_inode(prog, fs_info):
    sb = fs_info.sb
    for inode in list_for_each_entry("struct inode", sb.s_inodes.address_of_(), "i_sb_list"):
        yield inode


def inode_cache(prog, inode):
    """Yield a CacheEntry per page-cache entry of an inode."""
    for index, entry in xa_for_each(inode.i_mapping.i_pages.address_of_()):
        if xa_is_value(entry):
            yield CacheEntry(index, "shadow", None, None, None)
            continue
        folio = cast("struct folio *", entry)
        if is_alias(prog, folio):
            phys, pfn = alias_physical(prog, folio)
            yield CacheEntry(index, "alias", folio, pfn, phys)
        else:
            yield CacheEntry(index, "private", folio, folio_pfn(prog, folio), None)


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


def owners_of(prog, physical_sf):
    """(inode, index) of every alias on a descriptor."""
    out = []
    for a in folio_aliases(prog, physical_sf):
        alias = alias_folio(prog, a)
        if alias.mapping:
            out.append((alias.mapping.host, alias.index.value_()))
    return out


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


def fs_counters(prog, fs_info):
    """The per-filesystem counters shown in /sys/fs/btrfs/<uuid>/shared_folio/:
    one structure, struct shared_folio_stats."""
    st = fs_info.sf_stats
    c = {f: getattr(st, f).counter.value_()
         for f in ("folios", "aliases", "hits", "misses", "unshares", "reclaims")}
    # shared_folio_bytes_saved()
    c["bytes_saved"] = max(0, c["aliases"] - c["folios"]) << PAGE_SHIFT
    c["enabled"] = int(fs_info.sf_enabled.value_())
    return c


def totals(prog):
    """Counted by walking the structures, next to the kernel's counters."""
    t = {"filesystems": 0, "folios": 0, "aliases": 0, "bytes_saved": 0,
         "kernel_folios": 0, "kernel_aliases": 0}
    for fs in for_each_btrfs(prog):
        if not has_sharing(fs):
            continue
        t["filesystems"] += 1
        c = fs_counters(prog, fs)
        t["kernel_folios"] += c["folios"]
        t["kernel_aliases"] += c["aliases"]
        for s in for_each_shared_folio(prog, fs):
            t["folios"] += 1
            t["aliases"] += len(s.aliases)
    t["bytes_saved"] = max(0, t["aliases"] - t["folios"]) << PAGE_SHIFT
    t["vmstat_nr_shared_folio"] = node_stat_exact(prog, "NR_SHARED_FOLIO")
    t["vmstat_nr_shared_folio_alias"] = node_stat_exact(prog, "NR_SHARED_FOLIO_ALIAS")
    return t


# --- invariants ----------------------------------------------------------

def audit(prog, counted=None):
    """Check the invariants of design/shared-folios.md; return a list of
    violations (strings), empty when all hold.  One walk: if counted is a
    dict, it receives what the walk found ("filesystems", "folios",
    "aliases"), so that callers need not walk again."""
    bad = []
    listed = {}
    seen = {"filesystems": 0, "folios": 0, "aliases": 0}
    for fs in for_each_btrfs(prog):
        if not has_sharing(fs):
            continue
        seen["filesystems"] += 1
        ec = extent_cache(fs)
        nfolios = naliases = 0
        for s in for_each_shared_folio(prog, fs):
            f, sf = s.folio, s.sf
            where = "physical pfn %#x (bytenr %#x)" % (s.pfn, s.bytenr)
            nfolios += 1
            naliases += len(s.aliases)
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
            need = 2 + len(s.aliases) + mapcount(f)
            if refcount(f) < need:
                bad.append("%s: refcount %d does not cover cache + descriptor + %d aliases"
                           " + %d mappings" % (where, refcount(f), len(s.aliases), mapcount(f)))
            for a in s.aliases:
                alias = alias_folio(prog, a)
                aw = "alias %#x of %s" % (alias.value_(), where)
                listed[alias.value_()] = s
                if a.sf != sf:
                    bad.append("%s: points at another descriptor" % aw)
                if a.folio != f:
                    bad.append("%s: points at another physical folio" % aw)
                if a.pfn.value_() != s.pfn:
                    bad.append("%s: pfn %#x, physical is %#x" % (aw, a.pfn.value_(), s.pfn))
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
                if mapcount(alias) != 0:
                    bad.append("%s: alias mapped %d times" % (aw, mapcount(alias)))
                if refcount(alias) < 1:
                    bad.append("%s: alias refcount %d" % (aw, refcount(alias)))
        seen["folios"] += nfolios
        seen["aliases"] += naliases
        c = fs_counters(prog, fs)
        if c["folios"] != nfolios:
            bad.append("%s: counter says %d shared folios, walk finds %d"
                       % (fs_name(fs), c["folios"], nfolios))
        if c["aliases"] != naliases:
            bad.append("%s: counter says %d aliases, walk finds %d"
                       % (fs_name(fs), c["aliases"], naliases))
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
                elif e.folio.mapping != inode.i_mapping:
                    bad.append("alias %#x: in %s but its mapping is another"
                               % (e.folio.value_(), inode_name(prog, inode)))
    # the node counters of /proc/vmstat agree with the walk of every btrfs
    for item, name in (("folios", "NR_SHARED_FOLIO"), ("aliases", "NR_SHARED_FOLIO_ALIAS")):
        v = node_stat_exact(prog, name)
        if v != seen[item]:
            bad.append("vmstat %s %d, walk finds %d" % (name.lower(), v, seen[item]))
    if counted is not None:
        counted.update(seen)
    return bad
