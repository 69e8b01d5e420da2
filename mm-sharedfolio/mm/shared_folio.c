// SPDX-License-Identifier: GPL-2.0
/*
 * Shared folios: one physical copy in memory for data that several files
 * share on disk.
 */

/**
 * DOC: Overview
 *
 * A filesystem whose files share extents (btrfs reflinks, snapshots,
 * dedupe) keeps the data once, in an ordinary page-cache folio of a hidden
 * address space indexed by disk address: the *physical folio*.  It is on
 * the LRU, charged to the memcg of whoever read it first, and reclaimed like
 * any other file folio.
 *
 * Each file that uses it gets an *alias*: a real struct folio, allocated
 * from slab outside the memmap, whose ->mapping and ->index are the file's,
 * so every page-cache path that checks folio->mapping == mapping keeps
 * working.  __page_to_pfn() resolves an alias to the physical PFN, so
 * folio_pfn(), kmap_local_folio() and page_address() of an alias reach the
 * physical memory.  That is the memdesc step: a folio that carries its own
 * PFN.
 *
 * ::
 *
 *	file A i_pages          file B i_pages        extent cache i_pages
 *	 [idx 7] -> alias A7     [idx 2] -> alias B2   [bytenr>>12] -> folio
 *	              |                       |                        ^
 *	              +-------- ->pfn --------+-----> shared_folio ----+
 *	                                              (folio->private)
 *	                                              aliases: A7, B2
 *
 * Aliases are never dirty, never on the LRU, never mapped into page tables
 * themselves (a PTE maps the physical page, see "Mapping"), and not counted
 * as file pages (NR_FILE_PAGES, the memcg's file count); their slab memory is
 * charged to the memcg of the reader that created them.  They are counted
 * in NR_SHARED_FOLIO_ALIAS.
 * When the last reference to an alias goes, __folio_put() hands it to
 * sf_alias_free(), never to the page allocator, which frees it after an RCU
 * grace period (lockless lookups may still try to get it, see struct
 * sf_alias).
 *
 * Reclaim needs nothing new: the shared-folio descriptor is folio->private,
 * so shrink_folio_list() calls the extent cache's ->release_folio, which
 * calls sf_folio_release() to detach every alias, and the folio is then
 * freed as usual.  Truncating the extent cache (an extent was freed) goes
 * through ->invalidate_folio and sf_folio_invalidate() the same way.
 *
 * Coding conventions in this file: "folio" is always the physical folio,
 * "alias" the per-inode struct folio, "a" the struct sf_alias around an
 * alias ("sfa" in a structure), "sf" the descriptor.  What a filesystem
 * calls is named shared_folio_*(), as are the wrappers that adapt a
 * function to an address space operation (shared_folio_<op>());
 * everything else is sf_<object>_<verb>(), the object being the physical
 * folio ("folio"), an alias or the descriptor.  Predicates follow mm's
 * page_is_*() and folio_is_*() (folio_is_sf_alias()).
 */

/**
 * DOC: Mapping
 *
 * A read fault, or fault-around, on an index whose entry is an alias maps
 * the *physical* page read-only in the faulting VMA, in MAP_PRIVATE and
 * MAP_SHARED mappings alike (finish_fault(), filemap_map_pages()).  The
 * VMA stays the file's own: only the page is shared.  The PTE holds a
 * reference on the physical folio and counts in its mapcount, so
 * folio_mapped(), page_mapcount(), /proc/pid/smaps (Pss, Shared_Clean),
 * /proc/pid/pagemap and the memcg's mapped-file count see one page mapped
 * by every process of every sharer.  An alias's own mapcount stays -1.
 *
 * The rules that keep the PTEs and the aliases consistent:
 *
 * - A PTE of the physical page is installed only under the lock of the
 *   alias it was found through, while that alias is in its mapping.
 * - An alias leaves its mapping only under its lock, after its mapping's
 *   PTEs at its index are zapped (truncate_cleanup_folio(),
 *   invalidate_inode_pages2_range(), sf_alias_unshare(),
 *   shared_folio_overwrite(), sf_folio_detach_aliases()), or not at all
 *   while one may exist
 *   (mapping_evict_folio(), a detach that does not wait).  "May exist"
 *   is asked of the physical folio's mapcount (sf_alias_maybe_mapped()).
 * - So every PTE of a physical page lies in some alias's mapping at that
 *   alias's index, and rmap_walk() of the physical folio walks exactly
 *   those places (sf_folio_rmap_walk(), after KSM's rmap_walk_ksm()).
 * - A write never reaches the physical page: a write fault on a MAP_SHARED
 *   mapping replaces the file's alias by a private copy, zapping that
 *   file's PTEs of the index (sf_folio_wp_fault()), then retries; a
 *   MAP_PRIVATE write copies to an anonymous page as for any file page.
 *   Only mappings whose read faults install read-only PTEs map a physical
 *   page (sf_vma_may_map()).
 * - Migration replaces every sharer's PTE by a migration entry and maps
 *   the new folio in its place, with every alias locked throughout and
 *   retargeted to the new folio (DOC: Migration).  Device migration
 *   (migrate_vma_collect_pmd()) leaves a physical folio alone.
 * - A read-only long-term pin (FOLL_LONGTERM) of a shared page in a shared
 *   mapping unshares the file's page first (sf_gup_must_unshare()), so that
 *   the pin sees the file's later writes, as for any page-cache page.
 */

/**
 * DOC: Lock order
 *
 * The one statement of the order; a filesystem takes its own locks before
 * the physical folio lock (for btrfs: the invalidate lock, then the file's
 * extent range lock)::
 *
 *   physical folio lock            (add_alias, detach, release, invalidate,
 *                                   rmap walk)
 *     alias folio lock             (detach, unshare, truncate of the file,
 *                                   a fault mapping the physical page)
 *       mapping->i_mmap_rwsem      (zapping the file's PTEs, rmap walk)
 *         page table lock          (PTE install and zap)
 *       mapping->host->i_lock      (filemap_remove_folio)
 *         mapping->i_pages xa_lock (insert, delete, replace)
 *           sf->lock               (the alias list; irq-safe)
 *           sf_alias_lru lock      (the memcg-aware alias LRU)
 *
 * Nothing takes a physical folio lock while holding an alias lock, and
 * nothing allocates with reclaim under either (see shared_folio_prealloc()).
 * A fault takes the alias lock under the mmap lock (or the VMA lock), as
 * for any page-cache folio; the rmap walk only try-locks aliases.
 * Promotion locks the new alias before it is published and holds it until
 * the moved folio's PTEs are back (remove_migration_ptes()).
 * Migration try-locks every alias of a physical folio and holds them until
 * the folio is moved or restored; while a batch is being migrated it
 * allocates new folios with them held, as it does with the old folios'
 * own locks: reclaim and compaction only try-lock either.
 * The alias shrinker holds the LRU lock and only try-gets and try-locks an
 * alias; it drops the LRU lock before it evicts.
 */

/**
 * DOC: Reference counts
 *
 * A physical folio has one reference for the extent cache's xarray, one
 * for the descriptor (PG_private), one for each alias in existence, and
 * transient ones.  An alias has one for the file's xarray while
 * alias->mapping is set, and transient ones from lookups.
 *
 * Removing an alias from its mapping unlinks it from sf->aliases
 * (sf_alias_unaccount(), under the xa_lock); freeing it drops its
 * reference on the physical folio.  A physical folio therefore cannot be
 * freed while any alias of it can still be reached.
 */

/**
 * DOC: Large physical folios
 *
 * A physical folio may be large: the filesystem reads an extent into
 * folios of the order its place in the extent cache allows (for btrfs:
 * aligned there; when it frees space, it removes every folio the range
 * touches, whole).  Aliases stay order 0, one per page: an alias
 * describes one page of the physical folio, whose PFN it keeps
 * (sf_alias_page()), and holds a reference on the folio.  The one
 * descriptor lists the aliases of every page, and max_sharing bounds them
 * per page on average: a large folio may have max_sharing times its pages
 * in all.  So:
 *
 * - mapping an alias maps its page, never the folio's first one
 *   (finish_fault(), filemap_map_pages()), with a reference and a
 *   mapcount on the large folio, as a PTE-mapped large page-cache folio;
 * - the reverse map walks each alias's pages in its mapping, one for an
 *   order-0 alias: page_vma_mapped_walk() stops at the alias's end
 *   (vma_address_end(), sf_vma_walk_end()) instead of scanning on from
 *   the cache's index into pages that other aliases map;
 * - migration moves the folio whole, and each alias keeps its page's
 *   offset in it;
 * - reclaim detaches every alias of every page, then frees the folio; it
 *   is never split while it has a descriptor (split_huge_page() would
 *   release it, detaching every sharer's aliases, and then fail on the
 *   references of the mapped ones), nor truncated in part (the filesystem
 *   removes whole folios).  So migration that cannot find a large enough
 *   folio fails rather than split; a soft offline of one of its pages
 *   migrates it whole; a memory failure detaches every alias first
 *   (sf_folio_detach_to_split()), then splits it;
 * - a promotion never stores over the shadow of an evicted large folio,
 *   which stands for several indices: the reader reads the page instead.
 *
 * The node counter NR_SHARED_FOLIO and the @pages gauge count pages;
 * @folios counts folios.
 */
/**
 * DOC: Large aliases
 *
 * An alias may describe 2^k pages of a physical folio at once: pages
 * @page to @page + 2^k - 1 of it, @page at a multiple of 2^k, for the
 * file's indices @index to @index + 2^k - 1, @index a multiple of 2^k
 * (shared_folio_add_large_alias()).  It is one struct sf_alias_large (a
 * struct folio, 280 bytes) and one multi-index xarray entry, where order-0
 * aliases would be 2^k objects of 96 bytes and 2^k slots.
 *
 * Its folio is large as far as the page cache can tell: PG_head, order,
 * folio_nr_pages(), the page cache's reference a page, mapcounts of an
 * unmapped folio.  Its tail pages are never used as pages: page 1 keeps
 * the PFN where a tail keeps its compound head, and page arithmetic on an
 * alias would reach slab memory.  So only these paths ever use it whole:
 *
 * - read() and splice, which take their data from the physical folio at
 *   the alias's offset in it (sf_folio_data(): filemap_read(),
 *   filemap_splice_read(); the pipe holds the physical pages, which
 *   page_cache_pipe_buf_try_steal() never steals);
 * - read faults, which map the physical pages it describes, read-only
 *   (fault-around, filemap_map_pages(), maps its pages in the window;
 *   filemap_fault() hands it to finish_fault() as vmf->page, its own
 *   head page, and finish_fault() maps the physical page at vmf->pgoff:
 *   sf_alias_page_at()); a PMD-order alias is mapped by a PMD where the
 *   VMA is aligned, as a PMD-order page-cache folio is (sf_alias_map_pmd());
 * - the reverse map: a physical folio's walk in a sharer's VMA covers the
 *   alias's pages and stops at its end (sf_folio_rmap_walk(), and
 *   sf_vma_walk_end() in vma_address_end()), so every PTE is found once,
 *   through the one alias that covers it;
 * - the page cache's own bookkeeping, which only needs the folio's size
 *   and index: removal (truncate, invalidation, the shrinker, reclaim
 *   of the physical folio), lookups that return it whole to those.  A
 *   removal unmaps its whole range first (sf_folio_mapped()).
 *
 * Every other lookup splits it first into order-0 aliases of the same
 * pages, as split_huge_page() splits a page-cache folio (sf_alias_split(),
 * counted in @breaks; where the order-0 aliases cannot be allocated, it
 * removes it whole, unmapped): __filemap_get_folio() (so a write, a write
 * fault, and a filesystem's own lookups of one index, such as btrfs send
 * or the compare of a dedupe, see order-0 aliases, which they copy from or
 * unshare as before; such a lookup may sleep even without FGP_LOCK, and
 * with FGP_NOWAIT fails with -EAGAIN instead, as a fault that must not
 * wait does), sf_alias_unshare(), and shared_folio_overwrite() for a large
 * alias across an edge of the range a write fills, so that the write
 * replaces only the aliases of the pages it fills (one that it fills whole
 * is removed whole; the overwrite splits into aliases of the largest
 * order at which the edge is a boundary, sf_split_edges()).  A split
 * leaves the PTEs as they are: each new alias covers its PTEs from then
 * on.  It zaps the PMDs that map
 * the alias in its file first (sf_alias_split_pmds()): a PMD covers the
 * pages of 2^9 order-0 aliases, whose walks would each find it; the file's
 * processes fault PTEs again.  fadvise(POSIX_FADV_DONTNEED) of part of
 * a large alias keeps it (invalidate_mapping_pages() passes over a folio
 * that straddles the range), and drop-behind keeps one that goes on past
 * the read.
 *
 * The @aliases gauge counts pages aliased, so that @bytes_saved stays
 * (aliases - pages) pages; @large_aliases counts large alias objects, and
 * NR_SHARED_FOLIO_ALIAS, @reclaims and @drops count alias objects of
 * either size.  The alias trace events give the pages an alias describes.
 */
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/slab.h>
#include <linux/swap.h>
#include <linux/memcontrol.h>
#include <linux/highmem.h>
#include <linux/sched.h>
#include <linux/dax.h>		/* mapping_set_update() in mm/internal.h */
#include <linux/shmem_fs.h>	/* mapping_set_update() in mm/internal.h */
#include <linux/kobject.h>
#include <linux/sysfs.h>
#include <linux/list_lru.h>
#include <linux/shrinker.h>
#include <linux/rmap.h>
#include <linux/memblock.h>
#include <linux/memory_hotplug.h>
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/migrate.h>
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/shared_folio.h>
#include "internal.h"

#define CREATE_TRACE_POINTS
#include <trace/events/shared_folio.h>
#undef CREATE_TRACE_POINTS
#include <trace/events/filemap.h>

static struct kmem_cache *sf_alias_cache __ro_after_init;
static struct kmem_cache *sf_alias_large_cache __ro_after_init;

/*
 * Aliases are charged to the memcg of the reader that creates them, but are
 * on no LRU and keep their inode off the inode LRU: without this list and
 * its shrinker only the reclaim of the physical folio (global, or of the
 * memcg that owns it) would free them, and a memcg reading what another
 * memcg cached could not reclaim its own aliases.  An alias is on the list
 * exactly while it is in a mapping: added and removed under the mapping's
 * xa_lock (the list lock nests inside it, as for the workingset's shadow
 * nodes), so holding the list lock pins an alias on it, its mapping and
 * its inode.  The shrinker walks it oldest first, and passes over an alias
 * read again since it was made or last passed over once, moving it to the
 * young end: folio_mark_accessed() sets the alias's own PG_referenced at
 * its first access (the read that made it) and PG_active at the next.  A
 * file that is read again keeps its aliases; files read once go first.
 */
static struct list_lru sf_alias_lru;
/* The large aliases' (DOC: Large aliases), under the same shrinker. */
static struct list_lru sf_alias_large_lru;
/* Its own lock class: the list lock nests in the IRQ-safe i_pages lock. */
static struct lock_class_key sf_alias_lru_key;

/*
 * Cap on aliases per physical folio, as KSM's max_page_sharing bounds its
 * rmap walks: detaching or unmapping walks every alias.  Read
 * without a lock; a new value applies to aliases added after it.
 * /sys/kernel/mm/shared_folio/max_sharing.
 */
static unsigned int max_sharing = 256;

/*
 * Drop-behind: a read() evicts the aliases it copied from (see
 * shared_folio_drop_behind()).  /sys/kernel/mm/shared_folio/drop_behind;
 * a static key, so that reads pay nothing while it is off.
 */
DEFINE_STATIC_KEY_FALSE(shared_folio_drop_behind_key);
EXPORT_SYMBOL_GPL(shared_folio_drop_behind_key);

/* ==================== descriptor and aliases ==================== */

static inline struct folio *sf_alias_to_folio(struct sf_alias *a)
{
	return (struct folio *)&a->page;
}

/* On its descriptor's list, that is in a mapping (struct sf_alias). */
static inline bool sf_alias_linked(struct sf_alias *a)
{
	return !list_empty(&a->page.lru);
}

/* The descriptor of a linked alias (struct sf_alias). */
static inline struct shared_folio *sf_alias_descriptor(struct sf_alias *a)
{
	return *sf_alias_sfp(a);
}

/* The alias LRU @a is on while it is in a mapping. */
static inline struct list_lru *sf_alias_lru_of(struct sf_alias *a)
{
	return sf_alias_is_large(a) ? &sf_alias_large_lru : &sf_alias_lru;
}

/* The page cache's references on an alias: one per page, as on any folio. */
static inline unsigned int sf_alias_cache_refs(struct sf_alias *a)
{
	return folio_nr_pages(sf_alias_to_folio(a));
}

/*
 * The page flags an alias copies from its physical folio: only the links
 * that page_zone() and page_to_nid() read; no page flag, and none of the
 * LRU generation, refs or cpupid bits of the physical page.  Set when the
 * alias is made, and again when its physical folio migrates.
 */
#define SF_ALIAS_LINKS	((ZONES_MASK << ZONES_PGSHIFT) |		\
			 (NODES_MASK << NODES_PGSHIFT) |		\
			 (SECTIONS_MASK << SECTIONS_PGSHIFT))

/* Not a PFN, bit 0 clear: see sf_alias_init(). */
#define SF_ALIAS_TAIL_POISON	(POISON_POINTER_DELTA + 0x5f0UL)

/* Charged to the reader's memcg, with that memcg's part of the alias LRU. */
static struct sf_alias *sf_alias_alloc(gfp_t gfp)
{
	return kmem_cache_alloc_lru(sf_alias_cache, &sf_alias_lru,
				    (gfp & GFP_RECLAIM_MASK) | __GFP_ZERO);
}

static struct sf_alias_large *sf_alias_large_alloc(gfp_t gfp)
{
	return kmem_cache_alloc_lru(sf_alias_large_cache, &sf_alias_large_lru,
				    (gfp & GFP_RECLAIM_MASK) | __GFP_ZERO);
}

/* Charged, like the aliases, to the memcg of the reader. */
static struct shared_folio *sf_descriptor_alloc(gfp_t gfp)
{
	return kmalloc(sizeof(struct shared_folio),
		       (gfp & GFP_RECLAIM_MASK) | __GFP_ACCOUNT);
}

/**
 * shared_folio_prealloc() - allocate a descriptor and an alias in advance
 * @pa: what is kept; only its empty slots are filled
 * @gfp: allocation flags
 *
 * For a caller that will attach and add an alias under the physical folio
 * lock: allocating there could enter reclaim or memcg throttling with the
 * lock held, and readers of every sharer, the transaction commit of the
 * filesystem and migration wait for that lock.  A slot left empty on
 * failure is allocated with the gfp of the call that needs it.
 */
void shared_folio_prealloc(struct shared_folio_prealloc *pa, gfp_t gfp)
{
	if (!pa->sf)
		pa->sf = sf_descriptor_alloc(gfp);
	if (!pa->sfa)
		pa->sfa = sf_alias_alloc(gfp);
}
EXPORT_SYMBOL_GPL(shared_folio_prealloc);

/**
 * shared_folio_prealloc_large() - allocate a large alias in advance
 * @pa: what is kept; its large alias slot is filled if empty
 * @gfp: allocation flags
 *
 * As shared_folio_prealloc(), for shared_folio_add_large_alias().
 */
void shared_folio_prealloc_large(struct shared_folio_prealloc *pa, gfp_t gfp)
{
	if (!pa->sfl)
		pa->sfl = sf_alias_large_alloc(gfp);
}
EXPORT_SYMBOL_GPL(shared_folio_prealloc_large);

/**
 * shared_folio_prealloc_free() - free what shared_folio_prealloc() kept
 * @pa: the preallocation; empty afterwards
 */
void shared_folio_prealloc_free(struct shared_folio_prealloc *pa)
{
	kfree(pa->sf);
	if (pa->sfa)
		kmem_cache_free(sf_alias_cache, pa->sfa);
	if (pa->sfl)
		kmem_cache_free(sf_alias_large_cache, pa->sfl);
	pa->sf = NULL;
	pa->sfa = NULL;
	pa->sfl = NULL;
}
EXPORT_SYMBOL_GPL(shared_folio_prealloc_free);

/* A new descriptor, with no aliases yet. */
static void sf_descriptor_prepare(struct shared_folio *sf,
				  struct shared_folio_stats *stats)
{
	spin_lock_init(&sf->lock);
	sf->nr_aliases = 0;
	INIT_LIST_HEAD(&sf->aliases);
	sf->stats = stats;
}

/* Attach @sf to locked @folio as its descriptor. */
static void sf_descriptor_attach(struct folio *folio, struct shared_folio *sf)
{
	atomic_long_inc(&sf->stats->folios);
	atomic_long_add(folio_nr_pages(folio), &sf->stats->pages);
	folio_attach_private(folio, sf);
	node_stat_mod_folio(folio, NR_SHARED_FOLIO, folio_nr_pages(folio));
}

/**
 * shared_folio_attach() - give a physical folio its shared-folio descriptor
 * @folio: locked folio in the filesystem's extent cache
 * @stats: the cache's counters
 * @pa: preallocated descriptor to use first, or NULL
 * @gfp: allocation flags if @pa has none
 *
 * Context: process context, @folio locked.
 * Return: the descriptor (possibly already attached), or NULL on ENOMEM.
 */
struct shared_folio *shared_folio_attach(struct folio *folio,
					 struct shared_folio_stats *stats,
					 struct shared_folio_prealloc *pa,
					 gfp_t gfp)
{
	struct shared_folio *sf = folio_get_private(folio);

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio);
	if (sf)
		return sf;
	if (pa && pa->sf) {
		sf = pa->sf;
		pa->sf = NULL;
	} else {
		sf = sf_descriptor_alloc(gfp);
		if (!sf)
			return NULL;
	}
	sf_descriptor_prepare(sf, stats);
	sf_descriptor_attach(folio, sf);
	return sf;
}
EXPORT_SYMBOL_GPL(shared_folio_attach);

/**
 * sf_folio_nr_aliases() - how many aliases a physical folio has
 * @folio: a physical folio
 *
 * Return: the number of aliases currently in a mapping (racy unless the
 * caller holds the folio lock and no mapping can drop one).
 */
unsigned int sf_folio_nr_aliases(struct folio *folio)
{
	struct shared_folio *sf = folio_get_private(folio);

	return sf ? READ_ONCE(sf->nr_aliases) : 0;
}

/*
 * Make @a an alias of the 2^@order pages from @page, pages of @folio, for
 * (@mapping, @index): uptodate, clean, not on the LRU, holding a reference
 * on @folio, and the page cache's (one a page).  Not yet in @mapping.  A
 * large alias is made a large folio as prep_compound_head() makes one, but
 * for its tail pages, which it never uses: its PFN is where page 1 keeps
 * its compound head.
 */
static struct folio *sf_alias_init(struct sf_alias *a, struct folio *folio,
				   struct page *page, unsigned int order,
				   struct shared_folio *sf,
				   struct address_space *mapping, pgoff_t index)
{
	struct folio *alias = sf_alias_to_folio(a);

	a->page.flags = folio->flags & SF_ALIAS_LINKS;
	if (order) {
		__folio_set_head(alias);
		prep_compound_head(&a->page, order);
		/*
		 * page_to_pfn() of page 1 or 2 of the alias reads the next
		 * page's compound-head word: no PFN, so that a path that took
		 * a tail page of an alias (none does) faults at once instead
		 * of reaching physical page 0.
		 */
		alias->_head_2 = SF_ALIAS_TAIL_POISON;
		alias->_head_3 = SF_ALIAS_TAIL_POISON;
	}
	set_page_count(&a->page, 1 << order);
	atomic_set(&a->page._mapcount, -1);
	sf_alias_set_pfn(a, page_to_pfn(page));
	INIT_LIST_HEAD(&a->page.lru);
	*sf_alias_sfp(a) = sf;
	INIT_LIST_HEAD(sf_alias_lru_entry(a));
	alias->mapping = mapping;
	alias->index = index;
	__folio_mark_uptodate(alias);
	folio_get(folio);
	return alias;
}

/*
 * The alias just stored in its mapping joins its descriptor's list, the
 * counters and the alias LRU.  Under the mapping's xa_lock: once that is
 * dropped, the alias (unlocked, referenced only by the page cache) may be
 * removed and freed.
 */
static void sf_alias_link(struct sf_alias *a, struct folio *folio)
{
	struct folio *alias = sf_alias_to_folio(a);
	struct shared_folio *sf = sf_alias_descriptor(a);

	spin_lock(&sf->lock);
	list_add_tail(&a->page.lru, &sf->aliases);
	++sf->nr_aliases;
	spin_unlock(&sf->lock);
	atomic_long_add(folio_nr_pages(alias), &sf->stats->aliases);
	if (sf_alias_is_large(a))
		atomic_long_inc(&sf->stats->large_aliases);
	__node_stat_mod_folio(folio, NR_SHARED_FOLIO_ALIAS, 1);
	list_lru_add_obj(sf_alias_lru_of(a), sf_alias_lru_entry(a));
	trace_mm_filemap_add_to_page_cache(alias);
	trace_shared_folio_share(alias->mapping, alias->index, sf_alias_pfn(a),
				 folio_nr_pages(alias), sf->nr_aliases);
}

/* Undo sf_alias_init() of an alias that never entered a mapping. */
static void sf_alias_discard(struct sf_alias *a, struct folio *folio)
{
	bool large = sf_alias_is_large(a);

	__folio_clear_locked(sf_alias_to_folio(a));
	sf_alias_to_folio(a)->mapping = NULL;
	folio_put(folio);
	if (large)
		kmem_cache_free(sf_alias_large_cache, sf_alias_large(a));
	else
		kmem_cache_free(sf_alias_cache, a);
}

/*
 * May an alias of the 2^@order pages of @folio from @page be added at
 * @index?  Sets *@sfp to @folio's descriptor.
 */
static int sf_alias_check(struct folio *folio, struct page *page,
			  unsigned int order, pgoff_t index,
			  struct shared_folio **sfp)
{
	struct shared_folio *sf = folio_get_private(folio);

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio);
	VM_WARN_ON_ONCE_FOLIO(!folio_test_uptodate(folio), folio);
	if (!sf)
		return -EINVAL;
	if (page_folio(page) != folio || order > folio_order(folio) ||
	    !IS_ALIGNED(folio_page_idx(folio, page), 1UL << order) ||
	    !IS_ALIGNED(index, 1UL << order)) {
		VM_WARN_ON_ONCE_FOLIO(1, folio);
		return -EINVAL;
	}
	/*
	 * max_sharing bounds alias objects per page of the folio: a large
	 * folio has room for that many times its pages, whatever their
	 * sizes (the walks of detach and migration go by objects).
	 */
	if (READ_ONCE(sf->nr_aliases) >=
	    READ_ONCE(max_sharing) * folio_nr_pages(folio))
		return -ENOSPC;
	*sfp = sf;
	return 0;
}

/*
 * Make @a an alias of 2^@order pages of @folio from @page and store it at
 * @index of @mapping, over nothing but shadow entries; or free it.
 */
static int sf_alias_insert(struct sf_alias *a, struct folio *folio,
			   struct page *page, unsigned int order,
			   struct shared_folio *sf,
			   struct address_space *mapping, pgoff_t index,
			   gfp_t gfp)
{
	XA_STATE_ORDER(xas, &mapping->i_pages, index, order);
	struct folio *alias;
	void *entry;

	alias = sf_alias_init(a, folio, page, order, sf, mapping, index);
	mapping_set_update(&xas, mapping);
	do {
		xas_lock_irq(&xas);
		/*
		 * Only over shadow entries no larger than the alias: a store
		 * into part of a larger one would make every index it covers
		 * resolve to the alias.  (A filesystem that shares extents
		 * keeps its files' own folios order 0, and an alias leaves no
		 * shadow, so there are none today.)
		 */
		xas_for_each_conflict(&xas, entry) {
			if (!xa_is_value(entry) || xas_get_order(&xas) > order) {
				xas_set_err(&xas, -EEXIST);
				goto unlock;
			}
		}
		xas_store(&xas, alias);
		if (xas_error(&xas))
			goto unlock;
		mapping->nrpages += 1UL << order;
		sf_alias_link(a, folio);
unlock:
		xas_unlock_irq(&xas);
	} while (xas_nomem(&xas, gfp));

	if (xas_error(&xas)) {
		sf_alias_discard(a, folio);
		return xas_error(&xas);
	}
	return 0;
}

/*
 * shared_folio_add_alias() and shared_folio_add_large_alias(): an alias of
 * 2^@order pages, from @pa's slot of its size or allocated.
 */
static int sf_alias_add(struct folio *folio, struct page *page,
			unsigned int order, struct address_space *mapping,
			pgoff_t index, struct shared_folio_prealloc *pa,
			gfp_t gfp)
{
	struct sf_alias_large *l = NULL;
	struct shared_folio *sf;
	struct sf_alias *a = NULL;
	int err;

	err = sf_alias_check(folio, page, order, index, &sf);
	if (err)
		return err;
	gfp &= GFP_RECLAIM_MASK;
	if (order) {
		if (pa && pa->sfl)
			swap(l, pa->sfl);
		else
			l = sf_alias_large_alloc(gfp);
		if (l)
			a = folio_sf_alias(&l->folio);
	} else if (pa && pa->sfa) {
		swap(a, pa->sfa);
	} else {
		a = sf_alias_alloc(gfp);
	}
	if (!a)
		return -ENOMEM;
	return sf_alias_insert(a, folio, page, order, sf, mapping, index, gfp);
}

/**
 * shared_folio_add_alias() - install an alias of a page of @folio in @mapping
 * @folio: locked, uptodate physical folio with a descriptor attached
 * @page: the page of @folio the alias describes (any page of a large
 *        folio: DOC: Large physical folios)
 * @mapping: the file's mapping
 * @index: where, in @mapping
 * @pa: preallocated alias to use first, or NULL
 * @gfp: allocation flags (only the reclaim bits are used)
 *
 * The alias is inserted only into an empty slot (or over a shadow entry).
 * It is uptodate, clean, not on the LRU and not accounted as page cache.
 *
 * Context: process context, @folio locked; may sleep if @gfp allows.
 * Return: 0, -EEXIST if @mapping already has a folio at @index, -ENOSPC if
 * @folio has max_sharing aliases per page, -EINVAL without a descriptor
 * (or if @page is not @folio's), -ENOMEM.
 */
int shared_folio_add_alias(struct folio *folio, struct page *page,
			   struct address_space *mapping, pgoff_t index,
			   struct shared_folio_prealloc *pa, gfp_t gfp)
{
	return sf_alias_add(folio, page, 0, mapping, index, pa, gfp);
}
EXPORT_SYMBOL_GPL(shared_folio_add_alias);

/**
 * shared_folio_add_large_alias() - install one alias of 2^@order pages
 * @folio: locked, uptodate physical folio with a descriptor attached
 * @page: the first page the alias describes: a page of @folio at a
 *        multiple of 2^@order in it
 * @order: the alias's order, at least 1, at most @folio's
 * @mapping: the file's mapping, where page @page + i is the file's page
 *           @index + i for each i below 2^@order
 * @index: where, in @mapping: a multiple of 2^@order
 * @pa: preallocated large alias to use first, or NULL
 * @gfp: allocation flags (only the reclaim bits are used)
 *
 * As shared_folio_add_alias(), for an aligned run of pages (DOC: Large
 * aliases): only read() and splice see the alias whole; every other path
 * that finds it removes it first.  The whole range must be free of
 * folios in @mapping.
 *
 * Context: process context, @folio locked; may sleep if @gfp allows.
 * Return: as shared_folio_add_alias(); -EEXIST also if any index of the
 * range holds a folio.
 */
int shared_folio_add_large_alias(struct folio *folio, struct page *page,
				 unsigned int order, struct address_space *mapping,
				 pgoff_t index, struct shared_folio_prealloc *pa,
				 gfp_t gfp)
{
	return sf_alias_add(folio, page, order, mapping, index, pa, gfp);
}
EXPORT_SYMBOL_GPL(shared_folio_add_large_alias);

/* ==================== promotion ==================== */

/*
 * The step of shared_folio_promote() that moves @folio: frozen, into
 * @cache at @index, and out of its file's slot, where the alias @a (made,
 * holding its reference) goes in its place; all in one section under
 * both xa_locks, as __remove_mapping() freezes, so that no lookup spins
 * on the frozen folio across a preemption.  Only the file's xa_lock and
 * then the cache's are ever held together.
 */
static int sf_folio_move_to_cache(struct folio *folio,
				  struct address_space *cache, pgoff_t index,
				  struct sf_alias *a, gfp_t gfp)
{
	struct address_space *mapping = folio->mapping;
	XA_STATE(xas, &mapping->i_pages, folio->index);
	XA_STATE(cxas, &cache->i_pages, index);
	void *entry;

	mapping_set_update(&xas, mapping);
	mapping_set_update(&cxas, cache);
	do {
		/* A node seen before an allocation may be gone since. */
		xas_reset(&xas);
		xas_lock_irq(&xas);
		/* The file's xarray, the caller and the alias: nobody else. */
		if (xas_load(&xas) != folio || !folio_ref_freeze(folio, 3)) {
			xas_unlock_irq(&xas);
			/* A node allocated by an earlier pass. */
			xas_destroy(&cxas);
			return -EBUSY;
		}
		spin_lock_nested(&cache->i_pages.xa_lock, SINGLE_DEPTH_NESTING);
		entry = xas_load(&cxas);
		/*
		 * A shadow may stand for an evicted large folio, over several
		 * indices: an order-0 store would cover them all.  Give way;
		 * the reader reads the page into a folio of its own, which
		 * __filemap_add_folio() splits the shadow for.
		 */
		if (entry && (!xa_is_value(entry) || xas_get_order(&cxas)))
			xas_set_err(&cxas, -EEXIST);
		else
			xas_store(&cxas, folio);
		if (!xas_error(&cxas)) {
			cache->nrpages++;
			trace_mm_filemap_delete_from_page_cache(folio);
			/* @cache's xarray reference is the file's, handed over. */
			WRITE_ONCE(folio->mapping, cache);
			folio->index = index;
			trace_mm_filemap_add_to_page_cache(folio);
			xas_store(&xas, sf_alias_to_folio(a));
			xas_init_marks(&xas);
			sf_alias_link(a, folio);
		}
		spin_unlock(&cache->i_pages.xa_lock);
		folio_ref_unfreeze(folio, 3);
		xas_unlock_irq(&xas);
	} while (xas_nomem(&cxas, gfp & GFP_RECLAIM_MASK));
	return xas_error(&cxas);
}

static bool sf_pte_writable_one(struct folio *folio, struct vm_area_struct *vma,
				unsigned long address, void *arg)
{
	DEFINE_FOLIO_VMA_WALK(pvmw, folio, vma, address, PVMW_SYNC);
	bool *writable = arg;
	pte_t pte;

	while (page_vma_mapped_walk(&pvmw)) {
		/* Order 0: never a PMD. */
		pte = ptep_get(pvmw.pte);
		if (pte_write(pte) || pte_dirty(pte)) {
			*writable = true;
			page_vma_mapped_walk_done(&pvmw);
			return false;
		}
	}
	return true;
}

/*
 * Does a writable or dirty PTE map @folio, a locked order-0 folio of a
 * file?  Only looks: unlike folio_mkclean(), which would have to dirty a
 * folio whose PTE it cleaned, behind the filesystem's back.
 */
static bool sf_folio_mapped_writable(struct folio *folio)
{
	bool writable = false;
	struct rmap_walk_control rwc = {
		.rmap_one = sf_pte_writable_one,
		.arg = &writable,
	};

	rmap_walk(folio, &rwc);
	return writable;
}

/**
 * shared_folio_promote() - make a file's private folio a physical folio
 * @folio: locked page-cache folio of a file, clean and uptodate
 * @cache: the extent cache's mapping
 * @index: the index of @folio's data in @cache
 * @stats: @cache's counters
 * @gfp: allocation flags (only the reclaim bits; the switch itself never
 *       sleeps)
 *
 * A file cached data privately before a second file shared its extent (a
 * snapshot or reflink made later, or a first reader that read privately
 * because nobody else did).  Instead of reading the data again, @folio
 * itself moves, without I/O or a copy, into @cache at @index, and its
 * file gets an alias of it in its place.  The PFN stays, and so do the
 * folio's memcg charge, LRU position and NR_FILE_PAGES count; the file's
 * nrpages is unchanged.  The alias and the descriptor are charged to the
 * folio's memcg, as if its reader had read it shared.
 *
 * A page-cache folio's ->mapping and ->index are stable while anyone holds
 * a reference (filemap_get_read_batch() steps to folio_next_index(),
 * truncate_inode_pages_range() waits for the lock and then expects the
 * index it looked up): so, as for migration, the refcount is frozen while
 * they change, and any reference beyond the file's xarray, the caller's
 * and the new alias's (a reader, a pipe, GUP, an LRU batch) makes this
 * fail with -EBUSY.  Lockless lookups in the file and in @cache retry
 * meanwhile and find the alias, or @folio in @cache.  For the same reason
 * no PTE may map @folio while it is frozen (a concurrent zap would put
 * it): as migration does, its PTEs become migration entries first
 * (try_to_migrate()), and after the move they map it again, found
 * through the new alias (remove_migration_ptes()), or as before if it
 * stays private.  A process that maps @folio keeps mapping the same page,
 * read-only: the file must write-notify its shared mappings
 * (->page_mkwrite), so that a clean folio has no writable PTE (should one
 * be writable or dirty, the folio stays private and untouched).  A
 * fault on a migration entry meanwhile waits for @folio's lock, so a
 * mapped folio's move never reclaims.  The caller checks what else a
 * sharer may not see (for a file: the page holding EOF).
 *
 * The caller vouches that @folio holds the data of @index in @cache (for
 * btrfs: the file's extent map, looked up under its extent range lock) and
 * has taken away the filesystem's private data.  The lock of @folio keeps
 * writers and new PTEs out; a path that found @folio in the file before
 * finds ->mapping changed once it holds the lock, as after a truncate.
 *
 * Left private (-EBUSY): a dirty, writeback, mlocked, large or poisoned
 * folio, one with private data, one with other references (pinned, for
 * one), one of an unevictable mapping, one a PTE dirtied meanwhile.
 *
 * Context: process context, @folio locked; allocates with @gfp.
 * Return: 0, -EBUSY, -EEXIST if @cache has a folio at @index (or the
 * shadow of a large one there), -ENOMEM.
 */
int shared_folio_promote(struct folio *folio, struct address_space *cache,
			 pgoff_t index, struct shared_folio_stats *stats,
			 gfp_t gfp)
{
	struct address_space *mapping = folio->mapping;
	struct shared_folio_prealloc pa = { };
	struct mem_cgroup *old;
	struct shared_folio *sf;
	bool migrated = false;
	struct sf_alias *a;
	int ret;

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio);
	if (!mapping || mapping == cache || cache->a_ops != &shared_folio_aops ||
	    folio_is_sf_alias(folio) || folio_is_sf_physical(folio) ||
	    folio_test_large(folio) || !folio_test_uptodate(folio) ||
	    folio_test_dirty(folio) || folio_test_writeback(folio) ||
	    folio_test_mlocked(folio) || folio_test_private(folio) ||
	    folio_test_private_2(folio) || folio_test_hwpoison(folio) ||
	    folio_maybe_dma_pinned(folio) || mapping_unevictable(mapping))
		return -EBUSY;

	old = set_active_memcg(folio_memcg(folio));
	shared_folio_prealloc(&pa, gfp);
	set_active_memcg(old);
	if (!pa.sf || !pa.sfa) {
		shared_folio_prealloc_free(&pa);
		return -ENOMEM;
	}
	sf = pa.sf;
	a = pa.sfa;
	sf_descriptor_prepare(sf, stats);
	/*
	 * Locked before anyone can see it, so that remove_migration_ptes()
	 * walks it (sf_folio_rmap_walk() with every alias locked).
	 */
	__folio_set_locked(sf_alias_init(a, folio, &folio->page, 0, sf, mapping,
					 folio->index));
	if (folio_mapped(folio)) {
		/*
		 * No writable or dirty PTE may come back on shared memory.  A
		 * file that write-notifies has none on a clean folio, and none
		 * can appear under the folio lock.
		 */
		if (sf_folio_mapped_writable(folio)) {
			ret = -EBUSY;
			goto discard;
		}
		migrated = true;
		try_to_migrate(folio, TTU_SYNC);
		/* Poisoned meanwhile: hwpoison entries, not migration entries. */
		if (folio_mapped(folio) || folio_test_dirty(folio) ||
		    folio_test_hwpoison(folio)) {
			ret = -EBUSY;
			goto discard;
		}
		/*
		 * Faults on the migration entries sleep on the folio lock
		 * meanwhile: no reclaim (or memcg OOM) while they wait.
		 */
		gfp &= ~__GFP_DIRECT_RECLAIM;
	}
	ret = sf_folio_move_to_cache(folio, cache, index, a, gfp);
	if (ret == -EBUSY && folio_ref_count(folio) == 4) {
		/*
		 * One reference too many: most likely this CPU's LRU batch
		 * (a reader marked the folio accessed).  Other CPUs' batches
		 * are the caller's to drain, before the lock.
		 */
		lru_add_drain();
		ret = sf_folio_move_to_cache(folio, cache, index, a, gfp);
	}
	if (ret)
		goto discard;
	folio_clear_readahead(folio);
	/*
	 * Under the folio lock, which everything that reads the descriptor
	 * of a physical folio holds; the alias linked to it meanwhile only
	 * updates it (sf_alias_unaccount()).
	 */
	sf_descriptor_attach(folio, sf);
	if (migrated)
		remove_migration_ptes(folio, folio, RMP_LOCKED);
	folio_unlock(sf_alias_to_folio(a));
	shared_folio_count_promotions(stats, 1);
	return 0;

discard:
	/* Still the file's own folio: its PTEs come back as they were. */
	if (migrated)
		remove_migration_ptes(folio, folio, 0);
	sf_alias_discard(a, folio);
	kfree(sf);
	return ret;
}
EXPORT_SYMBOL_GPL(shared_folio_promote);

/*
 * Called by filemap_unaccount_folio() when any path removes an alias from
 * its mapping, under the mapping's xa_lock with interrupts off: there is no
 * page-cache accounting to undo, only the alias list.
 */
void sf_alias_unaccount(struct folio *alias)
{
	struct sf_alias *a = folio_sf_alias(alias);
	struct shared_folio *sf;

	list_lru_del_obj(sf_alias_lru_of(a), sf_alias_lru_entry(a));
	if (WARN_ON_ONCE(!sf_alias_linked(a)))
		return;
	sf = sf_alias_descriptor(a);
	atomic_long_sub(folio_nr_pages(alias), &sf->stats->aliases);
	if (sf_alias_is_large(a))
		atomic_long_dec(&sf->stats->large_aliases);
	/* The shrinker's eviction: @sf and the mapping are pinned here. */
	if (folio_test_checked(alias)) {
		shared_folio_count_reclaims(sf->stats, 1);
		trace_shared_folio_reclaim(alias->mapping, alias->index,
					   sf_alias_pfn(a), folio_nr_pages(alias),
					   READ_ONCE(sf->nr_aliases) - 1);
	}
	spin_lock(&sf->lock);
	list_del_init(&a->page.lru);
	*sf_alias_sfp(a) = NULL;
	sf->nr_aliases--;
	spin_unlock(&sf->lock);
	/* sf may be freed as soon as the lock is dropped: no more use. */
	__node_stat_mod_folio(sf_alias_physical(alias), NR_SHARED_FOLIO_ALIAS, -1);
}

/*
 * The last reference to an alias is gone (from __folio_put() or
 * folios_put_refs()).  It is no longer in any mapping, but an RCU page-cache
 * lookup may have loaded it from the xarray just before it was removed and
 * be about to folio_try_get() it: the memory must stay an alias with a zero
 * refcount until that reader has left its RCU read section.  The physical
 * reference can go now; no lookup that fails folio_try_get() touches it.
 */
void sf_alias_free(struct folio *alias)
{
	struct sf_alias *a = folio_sf_alias(alias);

	if (WARN_ON_ONCE(sf_alias_linked(a) || alias->mapping ||
			 !list_empty(sf_alias_lru_entry(a)))) {
		/* Freed while still in a mapping: a refcount bug elsewhere. */
		dump_page(&a->page, "shared folio alias freed while in a mapping");
		return;	/* leak rather than corrupt */
	}
	folio_put(sf_alias_physical(alias));
	/* Over @page.lru, which is unlinked; from either cache. */
	kfree_rcu(a, page.rcu_head);
}

/* ==================== detach ==================== */

enum sf_next { SF_NEXT_EMPTY, SF_NEXT_GOT, SF_NEXT_FROZEN };

/*
 * Take the alias at the head of @sf's list and rotate it to the tail, so
 * that nr_aliases calls visit each alias once.  SF_NEXT_FROZEN: its refcount
 * is frozen at zero, that is __remove_mapping() is removing it from its
 * mapping; that caller holds the mapping's xa_lock from the freeze until
 * sf_alias_unaccount() has unlinked the alias from @sf.
 */
static enum sf_next sf_alias_next(struct shared_folio *sf, struct folio **aliasp)
{
	enum sf_next ret = SF_NEXT_EMPTY;
	struct sf_alias *a;

	spin_lock_irq(&sf->lock);
	a = list_first_entry_or_null(&sf->aliases, struct sf_alias, page.lru);
	if (a) {
		list_move_tail(&a->page.lru, &sf->aliases);
		*aliasp = sf_alias_to_folio(a);
		ret = folio_try_get(*aliasp) ? SF_NEXT_GOT : SF_NEXT_FROZEN;
	}
	spin_unlock_irq(&sf->lock);
	return ret;
}

/**
 * sf_folio_detach_aliases() - remove every alias of @folio from its mapping
 * @folio: locked physical folio
 * @sync: wait for busy aliases until none is left; otherwise one pass that
 *        skips them
 *
 * An alias that someone is still using (a reader copying from it) is removed
 * from its mapping all the same; it keeps @folio referenced until it is
 * freed, so the caller's freeze of @folio's refcount fails until then.
 *
 * No alias can be added meanwhile (that needs the lock of @folio), so a pass
 * of nr_aliases steps sees each alias once: without @sync the walk is
 * bounded whatever is locked.  With @sync it ends only when the list is
 * empty, also waiting out aliases that __remove_mapping() is removing: the
 * descriptor must not be freed while one of them can still unlink itself.
 *
 * Context: process context, @folio locked.  May sleep.
 * Return: the number of aliases detached.
 */
unsigned int sf_folio_detach_aliases(struct folio *folio, bool sync)
{
	struct shared_folio *sf = folio_get_private(folio);
	unsigned int detached = 0, n;
	unsigned long deadline = 0;
	struct folio *alias;

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio);
	if (!sf)
		return 0;
	while ((n = READ_ONCE(sf->nr_aliases))) {
		while (n--) {
			struct address_space *mapping;
			enum sf_next got = sf_alias_next(sf, &alias);

			if (got == SF_NEXT_EMPTY)
				goto out;
			if (got == SF_NEXT_FROZEN)
				continue;
			if (sync) {
				folio_lock(alias);
			} else if (!folio_trylock(alias)) {
				/* Busy: leave it; the caller sees it remaining. */
				folio_put(alias);
				continue;
			}
			mapping = alias->mapping;
			/* Its file's PTEs of this page go first (DOC: Mapping). */
			if (mapping && sf_alias_maybe_mapped(alias)) {
				if (!sync) {
					folio_unlock(alias);
					folio_put(alias);
					continue;
				}
				unmap_mapping_folio(alias);
			}
			if (mapping) {
				trace_shared_folio_reclaim(mapping, alias->index,
							   folio_pfn(alias),
							   folio_nr_pages(alias),
							   READ_ONCE(sf->nr_aliases) - 1);
				/* Removes it from sf->aliases via sf_alias_unaccount(). */
				filemap_remove_folio(alias);
				detached++;
			}
			folio_unlock(alias);
			folio_put(alias);
			cond_resched();
		}
		if (!sync)
			break;
		/*
		 * Only frozen aliases can be left: their removal is imminent.
		 * One that stays (a refcount bug elsewhere, see sf_alias_free())
		 * must not hang the caller for ever.
		 */
		if (!deadline)
			deadline = jiffies + 10 * HZ;
		else if (WARN_ON_ONCE(time_after(jiffies, deadline)))
			break;
		cond_resched();
	}
out:
	if (detached)
		shared_folio_count_reclaims(sf->stats, detached);
	return detached;
}

static void sf_descriptor_free(struct folio *folio)
{
	struct shared_folio *sf = folio_detach_private(folio);
	bool busy;

	/* Wait out a sf_alias_unaccount() that has not dropped the lock. */
	spin_lock_irq(&sf->lock);
	busy = sf->nr_aliases || !list_empty(&sf->aliases);
	spin_unlock_irq(&sf->lock);
	atomic_long_dec(&sf->stats->folios);
	atomic_long_sub(folio_nr_pages(folio), &sf->stats->pages);
	node_stat_mod_folio(folio, NR_SHARED_FOLIO, -folio_nr_pages(folio));
	/* An alias still linked would unlink itself from freed memory. */
	if (WARN_ON_ONCE(busy))
		return;		/* leak rather than corrupt */
	kfree(sf);
}

/**
 * sf_folio_release() - ->release_folio for an extent cache
 * @folio: locked physical folio
 *
 * Detaches the aliases whose lock can be taken without waiting and, if
 * none is left, frees the descriptor.
 *
 * Context: process context (reclaim, invalidation), @folio locked.
 * Return: true if @folio no longer has private data.
 */
bool sf_folio_release(struct folio *folio)
{
	struct shared_folio *sf = folio_get_private(folio);

	if (!sf)
		return true;
	sf_folio_detach_aliases(folio, false);
	if (READ_ONCE(sf->nr_aliases))
		return false;
	sf_descriptor_free(folio);
	return true;
}

/**
 * sf_folio_invalidate() - ->invalidate_folio for an extent cache
 * @folio: locked physical folio being removed from its extent cache
 * @offset: start of the invalidated range in @folio
 * @len: length of the range
 *
 * The data is going away (the extent was freed, or the cache is torn down):
 * every alias is detached, waiting for busy ones.
 *
 * Context: process context, @folio locked.  Sleeps.
 */
void sf_folio_invalidate(struct folio *folio, size_t offset, size_t len)
{
	if (!folio_get_private(folio))
		return;
	sf_folio_detach_aliases(folio, true);
	if (offset == 0 && len == folio_size(folio))
		sf_descriptor_free(folio);
}

/**
 * sf_folio_detach_to_split() - let memory failure split a physical folio
 * @folio: locked folio, a reference held
 *
 * A large physical folio is never split while it has a descriptor (DOC:
 * Large physical folios), but memory_failure() must split it to isolate
 * the poisoned page.  So detach every alias, unmapping each sharer's
 * pages, and free the descriptor, as truncation of the extent cache
 * would: the folio is then an ordinary clean page-cache folio of the
 * extent cache, which split_huge_page() splits and memory_failure() drops
 * the poisoned page of, as stock does with a clean page-cache page.  Each
 * sharer faults the folio's pages in again: the others from the extent
 * cache, shared again at the same PFNs; the poisoned one from the disk,
 * never from the poisoned page (btrfs_sf_install_one() checks).  An alias
 * still referenced (a read() copying from it) keeps the folio from being
 * split, as any extra reference does.  Anything but a physical folio
 * with a descriptor is left alone.
 *
 * Context: process context, @folio locked.  Sleeps.
 */
void sf_folio_detach_to_split(struct folio *folio)
{
	if (!folio_is_sf_physical(folio) || !folio_get_private(folio))
		return;
	sf_folio_invalidate(folio, 0, folio_size(folio));
}

/**
 * shared_folio_detach_mapping() - remove every alias from a file's mapping
 * @mapping: the file's mapping
 *
 * For a filesystem that must stop a file from sharing what it shares now,
 * such as btrfs when a subvolume moves to another trust domain: each alias
 * is unmapped from every process that maps the file and removed, and the
 * next access finds nothing cached (private pages are left alone).
 *
 * Context: process context; sleeps.  The caller holds @mapping's
 * invalidate lock exclusively, so that nothing installs a new alias from
 * the old sharing meanwhile, and pins @mapping's inode.
 * Return: how many aliases were removed.
 */
unsigned long shared_folio_detach_mapping(struct address_space *mapping)
{
	struct folio_batch fbatch;
	unsigned long detached = 0;
	pgoff_t index = 0;
	unsigned int i;

	folio_batch_init(&fbatch);
	while (filemap_get_folios(mapping, &index, ULONG_MAX, &fbatch)) {
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			struct folio *alias = fbatch.folios[i];

			if (!folio_is_sf_alias(alias))
				continue;
			folio_lock(alias);
			if (alias->mapping == mapping) {
				/* Its file's PTEs go first (DOC: Mapping). */
				if (sf_alias_maybe_mapped(alias))
					unmap_mapping_folio(alias);
				filemap_remove_folio(alias);
				detached++;
			}
			folio_unlock(alias);
		}
		folio_batch_release(&fbatch);
		cond_resched();
	}
	return detached;
}
EXPORT_SYMBOL_GPL(shared_folio_detach_mapping);

/* ==================== unshare ==================== */

/*
 * A private folio to take an alias's place, charged to the current task's
 * memcg as filemap_add_folio() would charge it.  Allocated before any alias
 * lock is taken (DOC: Lock order).
 */
static struct folio *sf_private_alloc(gfp_t gfp)
{
	struct folio *new = filemap_alloc_folio(gfp, 0);

	if (new && mem_cgroup_charge(new, NULL, gfp)) {
		folio_put(new);
		return NULL;
	}
	return new;
}

/*
 * Put @new, a private folio allocated and charged for @mapping, in the place
 * of @alias, which is locked, in @mapping, and no longer mapped there.  @new
 * is marked uptodate if @uptodate (the caller filled it); otherwise its
 * data is to be written whole (shared_folio_overwrite()) or read.  It ends
 * on the LRU, unlocked, with the page cache's reference added to the
 * caller's; @alias loses the page cache's.  Counted as an unshare (and, if
 * not @uptodate, as an overwrite) and traced.
 * Return: false, with @new unlocked and only the caller's reference, if
 * @alias is not at its index.
 */
static bool sf_alias_replace(struct address_space *mapping, struct folio *alias,
			     struct folio *new, bool uptodate)
{
	XA_STATE(xas, &mapping->i_pages, alias->index);
	struct folio *folio = sf_alias_physical(alias);
	struct shared_folio_stats *stats;
	unsigned int nr;

	__folio_set_locked(new);
	if (uptodate)
		__folio_mark_uptodate(new);
	new->mapping = mapping;
	new->index = alias->index;
	folio_ref_add(new, 1);		/* the page cache's reference */

	xas_lock_irq(&xas);
	if (WARN_ON_ONCE(xas_load(&xas) != alias)) {
		xas_unlock_irq(&xas);
		new->mapping = NULL;
		folio_ref_sub(new, 1);
		__folio_clear_locked(new);
		return false;
	}
	xas_store(&xas, new);
	/* As if the alias was deleted and @new added, in one step. */
	trace_mm_filemap_delete_from_page_cache(alias);
	trace_mm_filemap_add_to_page_cache(new);
	__lruvec_stat_mod_folio(new, NR_FILE_PAGES, 1);
	nr = sf_folio_nr_aliases(folio);
	stats = sf_alias_descriptor(folio_sf_alias(alias))->stats;
	sf_alias_unaccount(alias);
	alias->mapping = NULL;
	xas_unlock_irq(&xas);

	folio_add_lru(new);
	folio_unlock(new);
	shared_folio_count_unshares(stats, 1);
	if (!uptodate)
		shared_folio_count_overwrites(stats, 1);
	trace_shared_folio_unshare(mapping, new->index, folio_pfn(alias), 1,
				   nr ? nr - 1 : 0);
	folio_put(alias);	/* the page cache's reference */
	return true;
}

/*
 * Remove @alias, a large alias locked in @mapping, whole, as truncation
 * removes a folio (DOC: Large aliases): a path that works on order-0
 * folios of the file is about to look at one of its pages.  Its pages are
 * read again as order-0 aliases or private folios.  Counted as a break.
 */
static void sf_alias_break(struct address_space *mapping, struct folio *alias)
{
	struct shared_folio_stats *stats;

	stats = sf_alias_descriptor(folio_sf_alias(alias))->stats;
	/* Its pages go from every process that maps them through it. */
	if (sf_alias_maybe_mapped(alias))
		unmap_mapping_folio(alias);
	trace_shared_folio_reclaim(mapping, alias->index, folio_pfn(alias),
				   folio_nr_pages(alias),
				   sf_folio_nr_aliases(sf_alias_physical(alias)) - 1);
	truncate_inode_folio(mapping, alias);
	shared_folio_count_breaks(stats, 1);
}

/*
 * Before @alias, PMD-order and locked, is split: zap the PMDs that map its
 * physical folio (locked) in @mapping's VMAs, as try_to_unmap() splits a
 * file PMD (a file VMA's PMD is cleared, and faults map PTEs again).  A PMD
 * mapping is found by the reverse-map walk of every alias over its range,
 * so after the split each of 2^9 order-0 aliases would find it again.
 */
static void sf_alias_split_pmds(struct address_space *mapping,
				struct folio *alias, struct folio *folio)
{
	struct vm_area_struct *vma;
	unsigned long address;

	if (!IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE) ||
	    folio_order(alias) != PMD_ORDER || !folio_entire_mapcount(folio))
		return;
	i_mmap_lock_read(mapping);
	vma_interval_tree_foreach(vma, &mapping->i_mmap, alias->index,
				  alias->index) {
		address = vma_address(vma, alias->index, 1);
		if (address != -EFAULT)
			split_huge_pmd_address(vma, address, false, folio);
	}
	i_mmap_unlock_read(mapping);
}

/*
 * Split @alias, a large alias in @mapping, into aliases of order
 * @new_order of the same pages, so that a path that works on order-0
 * folios of the file keeps them shared (DOC: Large aliases), or so that
 * an overwrite fills whole the ones it covers: as split_huge_page_to_list
 * _to_order() splits a page-cache folio, one xarray split and a store an
 * alias, under the xa_lock.  The new aliases are allocated, charged to
 * the caller, before any lock; the physical folio is locked first, as for
 * any alias added, then @alias.  Where the split cannot be had (no
 * memory) @alias is removed whole (sf_alias_break()), unmapped first.
 * Either way it is counted as a break.  @alias's reference is consumed.
 *
 * Context: process context, no folio lock held; sleeps.
 */
static void sf_alias_split(struct address_space *mapping, struct folio *alias,
			   unsigned int new_order, gfp_t gfp)
{
	unsigned int order = folio_order(alias), i = 0;
	unsigned int nr = 1U << (order - new_order);
	XA_STATE_ORDER(xas, &mapping->i_pages, alias->index, new_order);
	struct folio *folio = sf_alias_physical(alias);
	struct sf_alias_large *l;
	struct shared_folio *sf;
	struct sf_alias **small;
	bool split = false;
	pgoff_t index;

	if (WARN_ON_ONCE(new_order >= order)) {
		folio_put(alias);
		return;
	}
	/*
	 * Nodes that xas_split_alloc() allocates may end up holding shadow
	 * entries: they go on the workingset's node list, as for
	 * split_huge_page_to_list_to_order().
	 */
	mapping_set_update(&xas, mapping);
	gfp &= GFP_RECLAIM_MASK;
	small = kmalloc_array(nr, sizeof(*small), gfp);
	if (small) {
		for (i = 0; i < nr; i++) {
			if (new_order) {
				l = sf_alias_large_alloc(gfp);
				small[i] = l ? folio_sf_alias(&l->folio) : NULL;
			} else {
				small[i] = sf_alias_alloc(gfp);
			}
			if (!small[i])
				break;
		}
		if (i == nr)
			xas_split_alloc(&xas, alias, order, gfp);
	}
	/* Held by @alias's reference: no alias comes or goes under its lock. */
	folio_lock(folio);
	folio_lock(alias);
	/* Gone, or moved to a new physical folio by migration meanwhile. */
	if (alias->mapping != mapping || sf_alias_physical(alias) != folio) {
		if (alias->mapping == mapping)
			sf_alias_break(mapping, alias);
		goto unlock;
	}
	sf = sf_alias_descriptor(folio_sf_alias(alias));
	index = alias->index;
	sf_alias_split_pmds(mapping, alias, folio);
	/*
	 * Not bounded by max_sharing: the split adds objects to walk, but no
	 * PTE, and a removal would zap the alias's pages in every process
	 * that maps them, for one page's lookup.
	 */
	if (i == nr && !xas_error(&xas)) {
		for (i = 0; i < nr; i++)
			sf_alias_init(small[i], folio,
				      nth_page(sf_alias_page(alias), i << new_order),
				      new_order, sf, mapping,
				      index + (i << new_order));
		xas_lock_irq(&xas);
		xas_reset(&xas);
		if (xas_load(&xas) == alias) {
			xas_split(&xas, alias, order);
			for (i = 0; i < nr; i++) {
				/* Each entry of order @new_order (xas's). */
				xas_set(&xas, index + (i << new_order));
				xas_store(&xas, sf_alias_to_folio(small[i]));
				sf_alias_link(small[i], folio);
			}
			trace_mm_filemap_delete_from_page_cache(alias);
			trace_shared_folio_reclaim(mapping, index, folio_pfn(alias),
						   1U << order,
						   READ_ONCE(sf->nr_aliases) - 1);
			sf_alias_unaccount(alias);
			alias->mapping = NULL;
			split = true;
		}
		xas_unlock_irq(&xas);
		if (split) {
			shared_folio_count_breaks(sf->stats, 1);
			/* The page cache's references; the caller's remains. */
			folio_put_refs(alias, 1U << order);
		} else {
			for (i = 0; i < nr; i++)
				sf_alias_discard(small[i], folio);
		}
		i = 0;	/* none left to free */
	} else {
		sf_alias_break(mapping, alias);
	}
unlock:
	folio_unlock(alias);
	folio_unlock(folio);
	folio_put(alias);
	xas_destroy(&xas);
	while (i--) {
		if (new_order)
			kmem_cache_free(sf_alias_large_cache, sf_alias_large(small[i]));
		else
			kmem_cache_free(sf_alias_cache, small[i]);
	}
	kfree(small);
}

/**
 * sf_alias_unshare() - replace an alias by a private copy
 * @mapping: the mapping the caller found @alias in
 * @alias: an alias, referenced by the caller; the reference is consumed
 * @gfp: allocation flags for the private folio
 *
 * For every path about to modify or map the page: a buffered write, a
 * truncate of a partial page, a fault.  The private folio holds the same
 * data (bytes past EOF zeroed), is uptodate, clean, on the LRU and charged
 * to the current task's memcg.
 *
 * The private folio is allocated and charged before the alias lock is
 * taken: reclaim and extent invalidation wait for alias locks (under the
 * physical folio lock, in the transaction commit for btrfs), so nothing
 * that can wait for reclaim or a memcg OOM runs under one.  The copy is
 * machine-check safe: a poisoned physical page fails the unshare.
 *
 * A large alias is split instead (sf_alias_split()), and NULL returned:
 * the caller looks its page up again and finds an order-0 alias there (or
 * nothing, if the split could not be had).
 *
 * Context: process context; sleeps.
 * Return: the private folio with a reference (unlocked); NULL if @alias
 * left @mapping meanwhile or was large (look it up again);
 * ERR_PTR(-ENOMEM), or ERR_PTR(-EHWPOISON) if the shared page is poisoned.
 */
struct folio *sf_alias_unshare(struct address_space *mapping,
			       struct folio *alias, gfp_t gfp)
{
	struct folio *new;
	loff_t isize;
	size_t tail;

	if (folio_test_large(alias)) {
		sf_alias_split(mapping, alias, 0, gfp);
		return NULL;
	}
	new = sf_private_alloc(gfp);
	if (!new)
		goto nomem;
	folio_lock(alias);
	/* The file's PTEs of the shared page go before the alias does. */
	if (alias->mapping == mapping && sf_alias_maybe_mapped(alias))
		unmap_mapping_folio(alias);
	if (alias->mapping != mapping || copy_mc_highpage(&new->page, sf_alias_page(alias))) {
		bool gone = alias->mapping != mapping;

		folio_unlock(alias);
		folio_put(alias);
		folio_put(new);
		return gone ? NULL : ERR_PTR(-EHWPOISON);
	}
	isize = i_size_read(mapping->host);
	if (folio_pos(alias) + PAGE_SIZE > isize) {
		tail = isize > folio_pos(alias) ? isize - folio_pos(alias) : 0;
		folio_zero_segment(new, tail, PAGE_SIZE);
	}
	if (!sf_alias_replace(mapping, alias, new, true)) {
		folio_put(new);
		folio_unlock(alias);
		folio_put(alias);
		return NULL;
	}
	folio_unlock(alias);
	folio_put(alias);	/* the caller's */
	return new;

nomem:
	folio_put(alias);
	return ERR_PTR(-ENOMEM);
}

/*
 * A reference on @alias, just loaded by @xas under RCU, if it is still
 * there (not being freed, not moved meanwhile).
 */
static bool sf_xas_try_get(struct xa_state *xas, struct folio *alias)
{
	if (!folio_try_get(alias))
		return false;
	if (unlikely(alias != xas_reload(xas))) {
		folio_put(alias);
		return false;
	}
	return true;
}

/*
 * Call @fn on each alias of @mapping in [@first, @last], locked, still in
 * @mapping and referenced; with @trylock, pass over an alias whose lock is
 * taken.  The walk takes references under RCU, a folio batch at a time,
 * passing over private folios, shadow entries and aliases being freed;
 * @prep, if any, sees each batch before its aliases are locked, where it
 * may allocate.
 * Return: how many calls of @fn returned true.
 */
static unsigned long
sf_mapping_for_each_alias(struct address_space *mapping, pgoff_t first,
			  pgoff_t last, bool trylock,
			  void (*prep)(struct folio_batch *fbatch, void *arg),
			  bool (*fn)(struct address_space *mapping,
				     struct folio *alias, void *arg),
			  void *arg)
{
	XA_STATE(xas, &mapping->i_pages, first);
	struct folio_batch fbatch;
	unsigned long done = 0;
	struct folio *alias;
	unsigned int i;
	bool more;

	folio_batch_init(&fbatch);
	do {
		more = false;
		rcu_read_lock();
		xas_for_each(&xas, alias, last) {
			if (xas_retry(&xas, alias))
				continue;
			if (xa_is_value(alias) || !folio_is_sf_alias(alias) ||
			    !sf_xas_try_get(&xas, alias))
				continue;
			if (!folio_batch_add(&fbatch, alias)) {
				xas_pause(&xas);
				more = true;
				break;
			}
		}
		rcu_read_unlock();

		if (prep)
			prep(&fbatch, arg);
		for (i = 0; i < folio_batch_count(&fbatch); i++) {
			alias = fbatch.folios[i];
			if (trylock) {
				if (!folio_trylock(alias))
					continue;
			} else {
				folio_lock(alias);
			}
			/* Locked, it stays in its mapping and linked, or it left. */
			if (alias->mapping == mapping && fn(mapping, alias, arg))
				done++;
			folio_unlock(alias);
		}
		/* The batch's references; may be the last of a removed alias. */
		folios_put(&fbatch);
		cond_resched();
	} while (more);
	return done;
}

/* The large alias of @mapping that holds @index, referenced, or NULL. */
static struct folio *sf_large_alias_at(struct address_space *mapping,
				       pgoff_t index)
{
	XA_STATE(xas, &mapping->i_pages, index);
	struct folio *alias;

	rcu_read_lock();
	do {
		/* The entry of a multi-index alias, from any of its indices. */
		alias = xas_load(&xas);
	} while (xas_retry(&xas, alias));
	if (alias && (xa_is_value(alias) || !folio_is_sf_alias(alias) ||
		      !folio_test_large(alias) || !sf_xas_try_get(&xas, alias)))
		alias = NULL;
	rcu_read_unlock();
	return alias;
}

/*
 * The order to split to for an edge at a multiple of 2^@k inside a large
 * alias (below its order): @k, but 0 for 1, as two order-0 aliases (96
 * bytes each) cost less than one order-1 alias (a whole struct folio).
 */
static unsigned int sf_split_order(unsigned int k)
{
	return k == 1 ? 0 : k;
}

/*
 * Split the large aliases of @mapping that a write of [@first, @end],
 * whose chunk [@first, @last] comes next, fills only in part: the one that
 * holds @first and starts before it, and the one that holds @end and goes
 * on past it, if the chunk reaches it (a later chunk splits it otherwise).
 * Each into aliases of the largest order at which the write's edge in it
 * is a boundary (order 0 at worst; removed where they cannot be had), so
 * that the write fills whole the ones it covers: a write of 1 MiB into an
 * alias of 2 MiB leaves two of 1 MiB, one for it and one for the next
 * write of a sequential writer.  A large alias inside [@first, @end] stays
 * whole (sf_alias_overwrite() removes it).
 *
 * Context: process context, no folio lock held; sleeps (folio locks,
 * allocations with @gfp).
 */
static void sf_split_edges(struct address_space *mapping, pgoff_t first,
			   pgoff_t last, pgoff_t end, gfp_t gfp)
{
	struct folio *alias;

	alias = sf_large_alias_at(mapping, first);
	/* Its index is fixed: a large alias is never moved. */
	if (alias && alias->index < first)
		sf_alias_split(mapping, alias,
			       sf_split_order(__ffs(first - alias->index)), gfp);
	else if (alias)
		folio_put(alias);
	alias = sf_large_alias_at(mapping, end);
	if (alias && alias->index <= last && folio_next_index(alias) - 1 > end)
		sf_alias_split(mapping, alias,
			       sf_split_order(__ffs(end + 1 - alias->index)), gfp);
	else if (alias)
		folio_put(alias);
}

/* Private folios for shared_folio_overwrite(), allocated before the locks. */
struct sf_overwrite {
	gfp_t gfp;
	pgoff_t first;		/* the chunk's first index */
	pgoff_t end;		/* the last index the whole write fills */
	unsigned int nr;
	struct folio *spare[PAGEVEC_SIZE];
};

/* A spare for each order-0 alias of the batch: a large one needs none. */
static void sf_overwrite_prep(struct folio_batch *fbatch, void *arg)
{
	struct sf_overwrite *ow = arg;
	unsigned int i, want = 0;
	struct folio *new;

	for (i = 0; i < folio_batch_count(fbatch); i++)
		want += !folio_test_large(fbatch->folios[i]);
	while (ow->nr < want) {
		new = sf_private_alloc(ow->gfp);
		if (!new)
			return;
		ow->spare[ow->nr++] = new;
	}
}

/*
 * Remove @alias, locked in @mapping, as truncation does, counting its pages
 * as unshared by an overwrite: the write allocates their private folios as
 * it does in a file with nothing cached there.
 */
static void sf_alias_overwrite_remove(struct address_space *mapping,
				      struct folio *alias)
{
	struct shared_folio_stats *stats;
	unsigned long pfn = folio_pfn(alias);
	unsigned int nr_pages = folio_nr_pages(alias);
	pgoff_t index = alias->index;
	unsigned int nr;

	stats = sf_alias_descriptor(folio_sf_alias(alias))->stats;
	nr = sf_folio_nr_aliases(sf_alias_physical(alias));
	truncate_inode_folio(mapping, alias);
	shared_folio_count_unshares(stats, nr_pages);
	shared_folio_count_overwrites(stats, nr_pages);
	trace_shared_folio_unshare(mapping, index, pfn, nr_pages, nr ? nr - 1 : 0);
}

/*
 * Replace @alias, locked in @mapping, by a spare private folio that is not
 * uptodate, for a write that fills its page; without a spare (allocation
 * failed), remove it as truncation does.  A large alias that the write
 * fills whole is removed whole: one xarray store, where a split would make
 * an order-0 alias of each page only for each to be replaced.
 */
static bool sf_alias_overwrite(struct address_space *mapping,
			       struct folio *alias, void *arg)
{
	struct sf_overwrite *ow = arg;

	/* Either way, truncate_cleanup_folio() zaps the file's PTEs first. */
	if (folio_test_large(alias)) {
		if (alias->index >= ow->first &&
		    folio_next_index(alias) - 1 <= ow->end)
			sf_alias_overwrite_remove(mapping, alias);
		else
			/*
			 * Across an edge, where sf_split_edges() could not
			 * split it: the pages the write does not fill are
			 * read again (counted as a break, not as unshares).
			 */
			sf_alias_break(mapping, alias);
		return true;
	}
	if (ow->nr) {
		struct folio *new = ow->spare[ow->nr - 1];

		/* The file's PTEs of the shared page go before the alias does. */
		if (sf_alias_maybe_mapped(alias))
			unmap_mapping_folio(alias);
		if (!sf_alias_replace(mapping, alias, new, false))
			return false;
		ow->nr--;
		folio_put(new);		/* the page cache holds it */
		return true;
	}
	sf_alias_overwrite_remove(mapping, alias);
	return true;
}

/**
 * shared_folio_overwrite() - unshare, without a copy, what a write will fill
 * @mapping: the file's mapping
 * @first: first index the write covers whole
 * @last: last index it covers whole
 * @end: last index that the whole write covers whole, @last or beyond (a
 *       write done in chunks gives its chunk's @first and @last, and this)
 * @gfp: allocation flags of the write's page-cache folios
 *
 * A buffered write that replaces whole pages needs neither the shared data
 * nor a copy of it, yet sf_alias_unshare() would copy each page only for
 * the write to overwrite it.  Called before the write looks its pages up,
 * this replaces each order-0 alias in [@first, @last] by a private folio
 * that is not uptodate, zapping the file's PTEs of the physical page first,
 * in one xarray store; the write then finds its pages as in a file whose
 * pages are cached.  The folios are allocated and charged to the caller's
 * memcg before any alias lock is taken; an alias left without one
 * (allocation failure) is removed as truncation removes it.  A large alias
 * that [@first, @end] covers whole is removed whole, and the write
 * allocates its pages as in a file with nothing cached there (those past
 * @last with its next chunks; for a file with a VMA, @end is taken to be
 * @last); one across @first or @end is split first, into aliases of the
 * largest order at which the edge is a boundary (sf_split_edges()).
 * Each page whose alias is replaced or removed is counted, when it is, as
 * an unshare and as an overwrite (a write that stops early has then
 * counted pages past where it stopped; a split is counted as a break).
 *
 * Only aliases are replaced; a private folio in the range stays.  A reader
 * that installs a new alias before the write gets to its page is harmless:
 * the write unshares that one with a copy.  A page the write then does not
 * fill (its copy from user memory faulted) is left not uptodate, and is
 * read from its file, whose extent still holds the shared data, by whoever
 * reads it next, the write included (for btrfs, force_page_uptodate).
 *
 * Context: process context; sleeps (alias locks, i_mmap_rwsem).  No folio
 * lock may be held; the caller may hold the inode lock, and pins @mapping
 * (an open file).
 * Return: how many aliases were replaced or removed.
 */
unsigned long shared_folio_overwrite(struct address_space *mapping,
				     pgoff_t first, pgoff_t last, pgoff_t end,
				     gfp_t gfp)
{
	struct sf_overwrite ow = { .gfp = gfp, .first = first };
	unsigned long done;

	if (first > last)
		return 0;
	/*
	 * Removing pages past the chunk zaps the file's PTEs of them, which
	 * may be the write's own source (an mmap of the file, faulted in
	 * before this): with a VMA, only the chunk's pages go.
	 */
	ow.end = mapping_mapped(mapping) ? last : max(end, last);
	/* Only around the write: a large alias across its edges is split. */
	sf_split_edges(mapping, first, last, ow.end, gfp);
	done = sf_mapping_for_each_alias(mapping, first, last, false,
					 sf_overwrite_prep, sf_alias_overwrite,
					 &ow);
	while (ow.nr)
		folio_put(ow.spare[--ow.nr]);
	return done;
}
EXPORT_SYMBOL_GPL(shared_folio_overwrite);

/* ==================== drop-behind ==================== */

/*
 * Evict @alias, locked in @mapping, unless its page may be mapped, or it
 * is a large alias that goes on past *@arg, the last index the read
 * used (the reader's next read needs it).
 */
static bool sf_alias_drop(struct address_space *mapping, struct folio *alias,
			  void *arg)
{
	if (folio_next_index(alias) - 1 > *(pgoff_t *)arg)
		return false;
	return mapping_evict_folio(mapping, alias);
}

/**
 * shared_folio_drop_behind() - evict the aliases a read() used
 * @mapping: the file's mapping
 * @first: first index the read copied from
 * @last: last index the read copied from
 *
 * With /sys/kernel/mm/shared_folio/drop_behind set, an alias lives only
 * while a path needs a struct folio for it.  A read() that got its data
 * through aliases evicts them afterwards with mapping_evict_folio(), as
 * the alias shrinker does (but counted as drops, not reclaims), so N
 * sharers that have all been read hold one copy of the data and almost no
 * aliases.  The next read of the range finds the physical folios in the
 * extent cache (no I/O) and makes new aliases: memory is traded for the
 * work of making them again.  An alias stays if its page may be mapped
 * (the reverse map goes through it; mapping_evict_folio() asks), if it is
 * locked, or if someone else holds a reference (a pipe, another reader).
 * A file with any VMA keeps all its aliases: a fault may be about to map
 * one that its populate installed.
 *
 * Context: process context, no locks held; may sleep.  The caller pins
 * @mapping (an open file).
 * Return: how many aliases were evicted.
 */
unsigned long shared_folio_drop_behind(struct address_space *mapping,
				       pgoff_t first, pgoff_t last)
{
	if (!shared_folio_drop_behind_enabled() || first > last ||
	    mapping_mapped(mapping))
		return 0;
	return sf_mapping_for_each_alias(mapping, first, last, true, NULL,
					 sf_alias_drop, &last);
}
EXPORT_SYMBOL_GPL(shared_folio_drop_behind);

/* ==================== mapping ==================== */

/**
 * sf_alias_maybe_mapped() - may a PTE of its mapping map an alias's page?
 * @alias: a locked alias
 *
 * False means that no PTE of @alias's mapping maps the physical page at
 * @alias's index, and under the alias lock none can appear: every path
 * that installs one holds it.  The VMA tree is looked at under the i_mmap
 * lock only: a VMA being merged or split is out of the tree for a moment,
 * PTEs and all (vma_prepare() to vma_complete(), under the write lock),
 * so an unlocked mapping_mapped() could miss it.  A contended lock counts
 * as mapped.
 *
 * Return: true if such a PTE may exist.
 */
bool sf_alias_maybe_mapped(struct folio *alias)
{
	struct address_space *mapping = alias->mapping;
	struct folio *folio = sf_alias_physical(alias);
	bool mapped;

	if (!folio_mapped(folio))
		return false;
	/*
	 * A page of a large folio keeps its own mapcount, as in 6.12: none
	 * of the alias's pages mapped anywhere (and no PMD), none here.
	 */
	if (folio_test_large(folio) && !folio_entire_mapcount(folio)) {
		long i, nr = folio_nr_pages(alias);
		struct page *page = sf_alias_page(alias);

		for (i = 0; i < nr; i++)
			if (atomic_read(&nth_page(page, i)->_mapcount) >= 0)
				break;
		if (i == nr)
			return false;
	}
	if (!mapping || !i_mmap_trylock_read(mapping))
		return true;
	mapped = vma_interval_tree_iter_first(&mapping->i_mmap, alias->index,
					      folio_next_index(alias) - 1);
	i_mmap_unlock_read(mapping);
	return mapped;
}

/**
 * sf_folio_rmap_walk() - rmap_walk() of a physical folio
 * @folio: locked physical folio
 * @rwc: the walk
 * @locked: the caller holds the lock of every alias of @folio
 *          (sf_folio_lock_aliases(), for rmap_walk_locked())
 *
 * Every PTE of @folio lies in an alias's mapping at that alias's index
 * (DOC: Mapping): walk those.  Each alias is locked with a trylock, which
 * keeps it in its mapping and its inode alive during its part of the walk;
 * a busy alias is skipped (the walk reports contention if @rwc asks for
 * it), so try_to_unmap() may leave @folio mapped and the caller keeps it.
 * The walk is bounded by the aliases there are (max_sharing).
 *
 * There is no single i_mmap lock for a physical folio to hold, so
 * rmap_walk_locked() means here that the caller holds every alias lock:
 * the walk then visits every alias and skips none, as migration needs
 * (try_to_migrate(), remove_migration_ptes()).  Nothing can add an alias
 * (that takes @folio's lock) or remove one (that takes its lock), so the
 * list is walked as it stands.
 *
 * Context: @folio locked, so no alias is added or detached meanwhile.
 */
void sf_folio_rmap_walk(struct folio *folio, struct rmap_walk_control *rwc,
			bool locked)
{
	struct shared_folio *sf = folio_get_private(folio);
	struct folio *alias;
	struct sf_alias *a;
	unsigned int n;

	if (!sf)
		return;
	if (locked) {
		list_for_each_entry(a, &sf->aliases, page.lru) {
			alias = sf_alias_to_folio(a);
			VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(alias), alias);
			if (!rmap_walk_file_mapping(folio, alias->mapping,
						    alias->index,
						    folio_nr_pages(alias), rwc,
						    false))
				return;
		}
		return;
	}
	n = READ_ONCE(sf->nr_aliases);
	while (n--) {
		struct address_space *mapping;
		bool more = true;

		switch (sf_alias_next(sf, &alias)) {
		case SF_NEXT_EMPTY:
			return;
		case SF_NEXT_FROZEN:
			/* Being evicted, so not mapped (mapping_evict_folio()). */
			continue;
		case SF_NEXT_GOT:
			break;
		}
		if (!folio_trylock(alias)) {
			folio_put(alias);
			if (rwc->try_lock) {
				rwc->contended = true;
				return;
			}
			continue;
		}
		/* Not mapping_mapped(): see sf_alias_maybe_mapped(). */
		mapping = alias->mapping;
		if (mapping)
			more = rmap_walk_file_mapping(folio, mapping, alias->index,
						      folio_nr_pages(alias), rwc,
						      false);
		folio_unlock(alias);
		folio_put(alias);
		if (!more)
			return;
	}
}

/**
 * sf_vma_walk_end() - where a reverse-map walk of a physical folio ends
 * @vma: the VMA walked, of a file that maps the folio through its aliases
 * @address: the walk's current address in @vma
 *
 * A page_vma_mapped_walk() of a physical folio in a sharer's VMA starts
 * where one alias maps it (sf_folio_rmap_walk()) and covers that alias's
 * pages and no other's: neighbouring pages of the same physical folio may
 * be mapped there through other aliases, whose own walks find them.  The
 * alias at @address's index in the VMA's file says how far: to the end of
 * a large alias, else one page.  A walk from sf_folio_rmap_walk() holds
 * the alias's lock (or every alias's, for rmap_walk_locked()), so the
 * alias there is the walk's and cannot be split or removed meanwhile.  A
 * direct walk (uprobes' __replace_page()) holds only the physical folio's
 * lock, which a split also takes, so it sees the alias before or after a
 * split, never during one; a removal zaps the range under the alias's
 * lock, so a walk bounded by a removed alias finds nothing more than one
 * of a large page-cache folio being truncated would.  An alias's memory
 * is freed after a grace period: looking under RCU is safe whatever it
 * finds.  (Carrying the alias's range in the walk would avoid the
 * lookup, at the price of a field in struct page_vma_mapped_walk, which
 * every rmap user includes.)
 *
 * Return: the first address past the walk, at most @vma's end.
 */
unsigned long sf_vma_walk_end(struct vm_area_struct *vma, unsigned long address)
{
	unsigned long end = address + PAGE_SIZE;
	struct folio *alias;
	pgoff_t index;

	if (!vma->vm_file)
		return end;
	index = linear_page_index(vma, address);
	rcu_read_lock();
	alias = xa_load(&vma->vm_file->f_mapping->i_pages, index);
	if (alias && !xa_is_value(alias) && folio_is_sf_alias(alias) &&
	    folio_test_large(alias) && folio_contains(alias, index))
		end += (folio_next_index(alias) - 1 - index) << PAGE_SHIFT;
	rcu_read_unlock();
	return min(end, vma->vm_end);
}

/**
 * sf_folio_wp_fault() - a write fault on a shared page in a MAP_SHARED VMA
 * @vmf: the fault; its PTE maps @folio read-only, and is unlocked
 * @folio: the physical folio the PTE mapped (compared, not dereferenced)
 *
 * The faulting file gets a private copy of the page in place of its alias,
 * which zaps that file's PTEs of the index in every process; the other
 * sharers keep mapping @folio.  The fault is then retried and goes through
 * ->fault and ->page_mkwrite of the private copy, as for any write.
 *
 * Return: 0 (retry the access), VM_FAULT_OOM or VM_FAULT_HWPOISON.
 */
vm_fault_t sf_folio_wp_fault(struct vm_fault *vmf, struct folio *folio)
{
	struct address_space *mapping = vmf->vma->vm_file->f_mapping;
	struct folio *alias, *new;

	/* Unsharing allocates and takes the alias lock. */
	if (vmf->flags & FAULT_FLAG_RETRY_NOWAIT)
		return VM_FAULT_RETRY;
	alias = filemap_get_folio(mapping, vmf->pgoff);
	if (!IS_ERR(alias) && folio_is_sf_alias(alias) &&
	    sf_alias_physical(alias) == folio)
		goto unshare;
	if (!IS_ERR(alias))
		folio_put(alias);
	/*
	 * Unshared meanwhile: its unshare zapped the file's PTEs of the
	 * index, or is about to.  Should a PTE of @folio still be there, it
	 * belongs to no alias: zap it rather than fault on it for ever.
	 */
	unmap_mapping_pages(mapping, vmf->pgoff, 1, false);
	return 0;

unshare:
	new = sf_alias_unshare(mapping, alias, vmf->gfp_mask);
	if (IS_ERR(new))
		return PTR_ERR(new) == -EHWPOISON ? VM_FAULT_HWPOISON :
						    VM_FAULT_OOM;
	if (new)
		folio_put(new);
	return 0;
}

/**
 * sf_alias_map_pmd() - map a PMD-sized alias's physical folio with a PMD
 * @vmf: a read fault in the PMD that @alias covers
 * @alias: a locked alias, referenced by the caller, who keeps the reference
 *
 * A read fault, or fault-around, maps a PMD-order alias as the page cache
 * maps a PMD-order folio: do_set_pmd() on its physical folio, which is
 * PMD-order too (an alias is never larger than its folio), with a reference
 * of the PMD's own.  Not where its pages may not be mapped
 * (sf_alias_may_map(), as fault-around asks for any alias), nor for an
 * unshare fault (FAULT_FLAG_UNSHARE, a long-term pin or the populate of an
 * mlock that must not pin the shared page: see sf_gup_must_unshare()),
 * which would map the PMD again after wp_huge_pmd() split it; the PTE
 * fault that follows unshares the page.  do_set_pmd() checks the VMA's
 * alignment and THP settings.
 *
 * Return: 0 if mapped, else do_set_pmd()'s: VM_FAULT_FALLBACK (map PTEs),
 * or VM_FAULT_OOM.
 */
vm_fault_t sf_alias_map_pmd(struct vm_fault *vmf, struct folio *alias)
{
	struct folio *folio = sf_alias_physical(alias);
	vm_fault_t ret;

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(alias), alias);
	if (!IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE) ||
	    folio_order(alias) != PMD_ORDER ||
	    (vmf->flags & (FAULT_FLAG_UNSHARE | FAULT_FLAG_WRITE)) ||
	    !sf_alias_may_map(vmf->vma, alias))
		return VM_FAULT_FALLBACK;
	folio_get(folio);
	ret = do_set_pmd(vmf, &folio->page);
	if (ret)
		folio_put(folio);
	return ret;
}

/* ==================== migration ==================== */

/**
 * DOC: Migration
 *
 * A physical folio migrates as any page-cache folio does, and its aliases
 * follow it: sharing, the sharers' page-cache entries and their mlocks are
 * kept.  The precedent is KSM's stable node, whose rmap items follow a
 * migrated KSM page (ksm_migrate_folio()).
 *
 * - migrate_folio_unmap() locks every alias with a trylock, under the
 *   physical folio lock (sf_folio_lock_aliases()); a busy alias fails
 *   the attempt with -EAGAIN, and migrate_pages() tries again.  The alias
 *   locks are held until the move is done or undone: no alias can leave
 *   its mapping, and no fault can map the page, meanwhile.
 * - try_to_migrate() then replaces every sharer's PTE by a migration
 *   entry, through the aliases' mappings (sf_folio_rmap_walk() with
 *   @locked).  A mlocked VMA is no obstacle, as for any page: the mlock
 *   moves to the new folio when remove_migration_ptes() maps it again.
 * - ->migrate_folio (shared_folio_migrate_folio()) copies the data, freezes
 *   every alias's refcount (a reader that holds one fails the attempt),
 *   moves the page-cache entry with folio_migrate_mapping(), counting one
 *   reference per alias, moves the descriptor, and retargets each alias's
 *   PFN and zone and node links to the new folio before unfreezing it.
 * - remove_migration_ptes() maps the new folio in every sharer, through
 *   the same aliases, and sf_folio_unlock_aliases() releases them.
 *
 * Device migration (migrate_vma_*()) still leaves a physical folio alone.
 */

/**
 * sf_folio_lock_aliases() - lock every alias of a physical folio
 * @folio: locked physical folio about to be migrated
 *
 * Context: @folio locked; does not sleep.
 * Return: 0 with every alias locked and referenced (none if @folio has no
 * descriptor), or -EAGAIN with none, if an alias is busy.
 */
int sf_folio_lock_aliases(struct folio *folio)
{
	struct shared_folio *sf = folio_get_private(folio);
	struct folio *alias;
	struct sf_alias *a;

	VM_WARN_ON_ONCE_FOLIO(!folio_test_locked(folio), folio);
	if (!sf)
		return 0;
	spin_lock_irq(&sf->lock);
	list_for_each_entry(a, &sf->aliases, page.lru) {
		alias = sf_alias_to_folio(a);
		/* Frozen: __remove_mapping() is removing it. */
		if (!folio_try_get(alias))
			goto busy;
		if (!folio_trylock(alias)) {
			folio_put(alias);	/* not the last: it is linked */
			goto busy;
		}
	}
	spin_unlock_irq(&sf->lock);
	return 0;

busy:
	list_for_each_entry_continue_reverse(a, &sf->aliases, page.lru) {
		alias = sf_alias_to_folio(a);
		folio_unlock(alias);
		folio_put(alias);
	}
	spin_unlock_irq(&sf->lock);
	return -EAGAIN;
}

/**
 * sf_folio_unlock_aliases() - release what sf_folio_lock_aliases() took
 * @folio: the physical folio that holds the descriptor now: the new folio
 *         after a move, the old one after a failure
 *
 * Context: @folio locked.
 */
void sf_folio_unlock_aliases(struct folio *folio)
{
	struct shared_folio *sf = folio_get_private(folio);
	struct folio *alias;
	struct sf_alias *a;

	/* None was locked: it had no descriptor, and none can be attached. */
	if (!sf)
		return;
	/*
	 * Once unlocked, an alias may be removed, but that unlinks it under
	 * sf->lock, which is held until the walk is over: the reference put
	 * here is never the last (its mapping holds one while it is linked).
	 */
	spin_lock_irq(&sf->lock);
	list_for_each_entry(a, &sf->aliases, page.lru) {
		alias = sf_alias_to_folio(a);
		folio_unlock(alias);
		folio_put(alias);
	}
	spin_unlock_irq(&sf->lock);
}

/* Undo the freeze of the aliases before @stop (all of them if NULL). */
static void sf_alias_unfreeze(struct shared_folio *sf, struct sf_alias *stop)
{
	struct sf_alias *a;

	list_for_each_entry(a, &sf->aliases, page.lru) {
		if (a == stop)
			break;
		/* Its mapping's references and sf_folio_lock_aliases()'s. */
		folio_ref_unfreeze(sf_alias_to_folio(a),
				   sf_alias_cache_refs(a) + 1);
	}
}

#ifdef CONFIG_MIGRATION
/*
 * ->migrate_folio of an extent cache (DOC: Migration).  @src and @dst are
 * locked, @src is unmapped (migration entries) and its aliases are locked
 * by sf_folio_lock_aliases().
 */
static int shared_folio_migrate_folio(struct address_space *mapping,
				      struct folio *dst, struct folio *src,
				      enum migrate_mode mode)
{
	struct shared_folio *sf = folio_get_private(src);
	unsigned long pfn = folio_pfn(dst);
	unsigned int nr;
	struct sf_alias *a;
	int rc;

	if (!sf)
		return migrate_folio(mapping, dst, src, mode);
	/* Stable: adding needs @src's lock, removing the alias locks. */
	nr = sf->nr_aliases;
	/* The page cache, the descriptor, each alias, the isolation. */
	if (folio_ref_count(src) != folio_expected_ref_count(src) + nr + 1)
		return -EAGAIN;
	/* The data of a physical folio never changes: copy it first. */
	rc = folio_mc_copy(dst, src);
	if (unlikely(rc))
		return rc;

	/*
	 * A lockless page-cache lookup retries on a frozen alias until it is
	 * unfrozen, as on a frozen page-cache folio.  Nothing here sleeps,
	 * and the window is short; it is not made non-preemptible, because
	 * folio_migrate_mapping() takes the xa_lock, which sleeps on
	 * PREEMPT_RT.
	 */
	list_for_each_entry(a, &sf->aliases, page.lru) {
		if (!folio_ref_freeze(sf_alias_to_folio(a),
				      sf_alias_cache_refs(a) + 1)) {
			/* A reader holds it, and may be copying from @src. */
			sf_alias_unfreeze(sf, a);
			return -EAGAIN;
		}
	}
	rc = folio_migrate_mapping(mapping, dst, src, nr);
	if (rc != MIGRATEPAGE_SUCCESS) {
		sf_alias_unfreeze(sf, NULL);
		return rc;
	}
	folio_attach_private(dst, folio_detach_private(src));
	folio_migrate_flags(dst, src);

	list_for_each_entry(a, &sf->aliases, page.lru) {
		/* Each keeps its page: the same offset in the new folio. */
		sf_alias_set_pfn(a, pfn + (sf_alias_pfn(a) - folio_pfn(src)));
		a->page.flags = (a->page.flags & ~SF_ALIAS_LINKS) |
				(dst->flags & SF_ALIAS_LINKS);
	}
	/* Each alias's reference moves with it. */
	folio_ref_add(dst, nr);
	folio_ref_sub(src, nr);
	if (folio_pgdat(src) != folio_pgdat(dst)) {
		node_stat_mod_folio(src, NR_SHARED_FOLIO, -folio_nr_pages(src));
		node_stat_mod_folio(dst, NR_SHARED_FOLIO, folio_nr_pages(dst));
		node_stat_mod_folio(src, NR_SHARED_FOLIO_ALIAS, -(long)nr);
		node_stat_mod_folio(dst, NR_SHARED_FOLIO_ALIAS, nr);
	}
	/* Release: a reader that gets an alias now reads its new PFN. */
	sf_alias_unfreeze(sf, NULL);
	trace_shared_folio_migrate(src, dst, nr);
	return MIGRATEPAGE_SUCCESS;
}
#endif /* CONFIG_MIGRATION */

/* ==================== sharers and tenants ==================== */

/**
 * DOC: Sharers and tenants
 *
 * Files that share a physical folio may belong to different users and to
 * different memcgs: snapshots of one image in several containers.  What one
 * sharer does must act on its own view, as it would on a kernel without
 * sharing, where each file had its own page:
 *
 * - Mlock.  The physical folio is charged to the memcg of its first reader
 *   ("first toucher pays").  An mlock pins it only if the locker's memcg is
 *   that memcg or below it, that is if the pinned memory counts against
 *   the locker's own limit.  A locker elsewhere gets its own copy, charged
 *   to itself, as it would have had on a kernel without sharing: its fault
 *   and its populate unshare the page (filemap_fault(), fault-around,
 *   sf_gup_must_unshare()), and mlock_vma_folio() and mlock_pte_range()
 *   never mark the shared folio on its behalf.  Munlock is not guarded:
 *   the memcg of an exiting mm may read as the root, and an munlock too
 *   many only makes a folio evictable until reclaim finds the VMA that
 *   still locks it and marks it again, as mlock_count is kept anyway.  Should such a VMA still
 *   map the shared page (mlock2(MLOCK_ONFAULT) of a range already mapped,
 *   or a populate that failed), reclaim treats that mapping as unlocked
 *   (folio_referenced_one(), try_to_unmap_one()).  So a tenant cannot
 *   make another tenant's memory unevictable, and pays for what it locks.
 * - Eviction hints.  MADV_COLD and MADV_PAGEOUT deactivate or reclaim a
 *   physical folio only if every file that shares it is the caller's (its
 *   owner's fsuid) or the caller has CAP_FOWNER: what the caller could do
 *   to each file on its own (madvise's can_do_file_pageout()).  Otherwise
 *   the hint leaves it.  Write permission, which can_do_file_pageout()
 *   also accepts for the file the caller names, is not asked of the other
 *   files: checking it may sleep (ACLs), and this runs under the PTE lock.
 *   fadvise(POSIX_FADV_DONTNEED), drop-behind and the
 *   invalidation of a file's mapping only ever remove that file's aliases;
 *   POSIX_FADV_NOREUSE only hides the caller's own references from aging.
 * - Memory pressure, drop_caches and memcg limits reclaim physical folios
 *   as before: they act for the system or for the memcg that pays.
 */

/**
 * __sf_folio_may_mlock() - may an mlock in @vma pin a physical folio?
 * @folio: a physical folio
 * @vma: the mlocked VMA that maps it, or is about to
 *
 * Context: any; the caller holds @folio mapped, locked or referenced.
 * Return: true if @vma's memcg is the memcg charged for @folio, or below
 * it, or if @folio is not charged.
 */
bool __sf_folio_may_mlock(struct folio *folio, struct vm_area_struct *vma)
{
	struct mem_cgroup *owner, *locker;
	bool ok;

	if (mem_cgroup_disabled())
		return true;
	locker = get_mem_cgroup_from_mm(vma->vm_mm);
	rcu_read_lock();
	owner = folio_memcg_check(folio);
	ok = !owner || !locker || mem_cgroup_is_descendant(locker, owner);
	rcu_read_unlock();
	mem_cgroup_put(locker);
	return ok;
}

/**
 * __sf_folio_may_evict() - may the current task's hint act on a physical folio?
 * @folio: a physical folio mapped in @vma
 * @vma: the VMA the hint (MADV_COLD, MADV_PAGEOUT) is given for
 *
 * Context: the page table lock of a PTE of @folio in @vma is held, so the
 * alias it was mapped through, and with it the descriptor, stays.
 * Return: true if every file that shares @folio is @vma's or owned by the
 * caller's fsuid, or the caller has CAP_FOWNER.
 */
bool __sf_folio_may_evict(struct folio *folio, struct vm_area_struct *vma)
{
	struct shared_folio *sf = folio_get_private(folio);
	struct address_space *own = vma->vm_file ? vma->vm_file->f_mapping : NULL;
	kuid_t fsuid = current_fsuid();
	struct sf_alias *a;
	bool ok = true;

	if (!sf)
		return true;
	/* A linked alias's mapping, and its inode, stay while sf->lock is held. */
	spin_lock_irq(&sf->lock);
	list_for_each_entry(a, &sf->aliases, page.lru) {
		struct address_space *mapping = sf_alias_to_folio(a)->mapping;

		if (mapping != own && !uid_eq(mapping->host->i_uid, fsuid)) {
			ok = false;
			break;
		}
	}
	spin_unlock_irq(&sf->lock);
	/* Asked only when it matters: it marks the task PF_SUPERPRIV. */
	return ok || ns_capable_noaudit(&init_user_ns, CAP_FOWNER);
}

/* ==================== side channels ==================== */

/**
 * DOC: Side channels
 *
 * A sharer learns whether another sharer has the same data cached by
 * reading its own copy: a read served from a physical folio that is
 * already there is a hit, one that goes to disk a miss.  Closed:
 *
 * - The counters that say so page by page are readable only with
 *   CAP_SYS_ADMIN: the per-filesystem counters (mode 0400), and the
 *   shared-folio lines of /proc/vmstat, /proc/zoneinfo and each node's
 *   vmstat, which read 0 for other readers, as /proc/pid/pagemap hides
 *   PFNs (shared_folio_counters_visible()).
 * - A sharer cannot evict another's cache to probe it again (DOC: Sharers
 *   and tenants): each probe is one read, after which the page is cached
 *   whatever the other did.
 * - fincore, mincore and cachestat report the caller's own file: its
 *   aliases, not the physical folio.
 *
 * What remains, as for KSM and for any page cache that two users share
 * (a library both map, overlayfs): the time a read takes; the global
 * counters every cached page moves (Cached in /proc/meminfo, pgpgin, a
 * memcg's own file count when it is charged); and, for a page the caller
 * maps, whether others map it too (Pss and Shared_Clean in its smaps, the
 * exclusively-mapped bit of its pagemap).  Against those the answer is
 * not to share: trust domains (btrfs) keep tenants apart.  A node's
 * vmstat in sysfs has no opener to ask: its reader's capability is.
 */

/**
 * shared_folio_counters_visible() - may this reader see the shared-folio counters?
 * @file: the file being read, whose opener counts; NULL: the current task
 *
 * Return: true with CAP_SYS_ADMIN (DOC: Side channels).
 */
bool shared_folio_counters_visible(const struct file *file)
{
	if (file)
		return file_ns_capable(file, &init_user_ns, CAP_SYS_ADMIN);
	return ns_capable_noaudit(&init_user_ns, CAP_SYS_ADMIN);
}

/* ==================== address space operations ==================== */

static bool shared_folio_release_folio(struct folio *folio, gfp_t gfp)
{
	return sf_folio_release(folio);
}

/*
 * Nothing may dirty a physical folio: writes go to private copies, and its
 * PTEs are never writable.  Refuse, rather than leave a folio that no
 * ->writepage would ever clean.
 */
static bool shared_folio_dirty_folio(struct address_space *mapping,
				     struct folio *folio)
{
	VM_WARN_ON_ONCE_FOLIO(1, folio);
	return false;
}

/*
 * shared_folio_aops: the address space operations of an extent cache.
 * A filesystem's extent cache uses these: folio_is_sf_physical() knows a
 * physical folio by them.  Physical folios are never dirtied (an attempt
 * warns and fails); reclaim detaches the aliases (->release_folio),
 * invalidation and memory failure detach them and wait (->invalidate_folio),
 * and migration takes them along (->migrate_folio, DOC: Migration).
 */
const struct address_space_operations shared_folio_aops = {
	.dirty_folio = shared_folio_dirty_folio,
	.release_folio = shared_folio_release_folio,
	.invalidate_folio = sf_folio_invalidate,
#ifdef CONFIG_MIGRATION
	.migrate_folio = shared_folio_migrate_folio,
#endif
	.error_remove_folio = generic_error_remove_folio,
};
EXPORT_SYMBOL_GPL(shared_folio_aops);

/* ==================== alias shrinker ==================== */

/*
 * Called with the list lock held and interrupts off.  The alias is in its
 * mapping (see sf_alias_lru), so it has the page cache's reference; take
 * it off the list and evict it as fadvise(DONTNEED) would, or put it back
 * if it is busy.
 */
static enum lru_status sf_alias_isolate(struct sf_alias *a,
					struct list_head *item,
					struct list_lru_one *lru,
					spinlock_t *lru_lock, void *arg)
	__must_hold(lru_lock)
{
	struct folio *alias = sf_alias_to_folio(a);
	unsigned long *freed = arg;
	struct address_space *mapping;

	/* Frozen: its remover is about to take it off the list. */
	if (!folio_try_get(alias))
		return LRU_SKIP;
	/*
	 * Read again since it was made or last passed over (PG_active, set
	 * by folio_mark_accessed()): a second chance, as inode_lru_isolate()
	 * gives a referenced inode.  It keeps PG_referenced, so that one more
	 * read earns it another.
	 */
	if (folio_test_clear_active(alias)) {
		folio_put(alias);	/* not the last: the page cache has one */
		return LRU_ROTATE;
	}
	/* Locked: in use; look at the others first. */
	if (!folio_trylock(alias)) {
		folio_put(alias);	/* not the last: the page cache has one */
		return LRU_ROTATE;
	}
	list_lru_isolate(lru, item);
	spin_unlock_irq(lru_lock);

	/*
	 * The alias lock keeps it in its mapping and the inode alive.  Once
	 * evicted, nothing pins the inode or its filesystem any more: the
	 * eviction is counted by sf_alias_unaccount(), under the xa_lock.
	 */
	mapping = alias->mapping;
	folio_set_checked(alias);
	if (mapping_evict_folio(mapping, alias)) {
		(*freed)++;
	} else {
		folio_clear_checked(alias);
		/*
		 * Busy (a reader holds it): back on the list, under the
		 * xa_lock as every insertion; it is still in @mapping.
		 */
		xa_lock_irq(&mapping->i_pages);
		list_lru_add_obj(sf_alias_lru_of(a), item);
		xa_unlock_irq(&mapping->i_pages);
	}
	folio_unlock(alias);
	folio_put(alias);
	cond_resched();
	spin_lock_irq(lru_lock);
	return LRU_REMOVED_RETRY;
}

static enum lru_status sf_alias_lru_isolate(struct list_head *item,
					    struct list_lru_one *lru,
					    spinlock_t *lru_lock, void *arg)
	__must_hold(lru_lock)
{
	return sf_alias_isolate(container_of(item, struct sf_alias, lru),
				item, lru, lru_lock, arg);
}

static enum lru_status sf_alias_large_lru_isolate(struct list_head *item,
						  struct list_lru_one *lru,
						  spinlock_t *lru_lock, void *arg)
	__must_hold(lru_lock)
{
	struct sf_alias_large *l = container_of(item, struct sf_alias_large, lru);

	return sf_alias_isolate(folio_sf_alias(&l->folio), item, lru, lru_lock,
				arg);
}

static unsigned long sf_shrinker_count(struct shrinker *shrinker,
				       struct shrink_control *sc)
{
	return (list_lru_shrink_count(&sf_alias_lru, sc) +
		list_lru_shrink_count(&sf_alias_large_lru, sc)) ?: SHRINK_EMPTY;
}

/*
 * The two lists share the scan in proportion to their lengths, as a
 * superblock's dentry and inode lists do (super_cache_scan()).
 */
static unsigned long sf_shrinker_scan(struct shrinker *shrinker,
				      struct shrink_control *sc)
{
	unsigned long small, large, total, nr = sc->nr_to_scan, freed = 0;

	small = list_lru_shrink_count(&sf_alias_lru, sc);
	large = list_lru_shrink_count(&sf_alias_large_lru, sc);
	total = small + large + 1;
	/* The list lock nests inside the IRQ-safe i_pages lock. */
	sc->nr_to_scan = mult_frac(nr, small, total) + 1;
	list_lru_shrink_walk_irq(&sf_alias_lru, sc, sf_alias_lru_isolate, &freed);
	if (large) {
		sc->nr_to_scan = mult_frac(nr, large, total) + 1;
		list_lru_shrink_walk_irq(&sf_alias_large_lru, sc,
					 sf_alias_large_lru_isolate, &freed);
	}
	return freed;
}

/* ==================== sysfs ==================== */

#ifdef CONFIG_SYSFS
static ssize_t max_sharing_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(max_sharing));
}

static ssize_t max_sharing_store(struct kobject *kobj,
				 struct kobj_attribute *attr,
				 const char *buf, size_t count)
{
	unsigned int val;
	int err;

	err = kstrtouint(buf, 10, &val);
	if (err)
		return err;
	if (!val)
		return -EINVAL;
	WRITE_ONCE(max_sharing, val);
	return count;
}

static struct kobj_attribute max_sharing_attr = __ATTR_RW(max_sharing);

static ssize_t drop_behind_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  static_key_enabled(&shared_folio_drop_behind_key));
}

static ssize_t drop_behind_store(struct kobject *kobj,
				 struct kobj_attribute *attr,
				 const char *buf, size_t count)
{
	bool val;
	int err;

	err = kstrtobool(buf, &val);
	if (err)
		return err;
	if (val)
		static_branch_enable(&shared_folio_drop_behind_key);
	else
		static_branch_disable(&shared_folio_drop_behind_key);
	return count;
}

static struct kobj_attribute drop_behind_attr = __ATTR_RW(drop_behind);

static struct attribute *shared_folio_attrs[] = {
	&max_sharing_attr.attr,
	&drop_behind_attr.attr,
	NULL,
};

static const struct attribute_group shared_folio_attr_group = {
	.name = "shared_folio",
	.attrs = shared_folio_attrs,
};

static void __init sf_sysfs_init(void)
{
	if (sysfs_create_group(mm_kobj, &shared_folio_attr_group))
		pr_warn("shared folios: cannot create /sys/kernel/mm/shared_folio\n");
}
#else
static inline void sf_sysfs_init(void) { }
#endif

/* ==================== debugfs audit ==================== */

#ifdef CONFIG_DEBUG_FS
static bool sf_audit_one(struct folio *folio, struct vm_area_struct *vma,
			 unsigned long address, void *arg)
{
	DEFINE_FOLIO_VMA_WALK(pvmw, folio, vma, address, 0);
	unsigned long *counts = arg;	/* mappings found, PMDs among them */

	while (page_vma_mapped_walk(&pvmw)) {
		counts[0]++;
		counts[1] += !pvmw.pte;
	}
	return true;
}

/*
 * /sys/kernel/debug/shared_folio/audit: for every physical folio on the
 * LRU, compare its mapcount with the PTEs that rmap_walk() finds through
 * its aliases (a physical folio without aliases must be unmapped).  Faults
 * and zaps do not take the physical folio lock, so the figures are exact
 * only on a quiet system, as after a test.  The first line counts the
 * folios by order, the second their aliases by order, the third the PMDs
 * that map them (each counts once in a folio's mapcount, as a PTE does),
 * the last one sums up ("ptes": pages mapped, all of a folio's for a PMD).
 */
static int sf_audit_show(struct seq_file *m, void *v)
{
	unsigned long pfn, folios = 0, mapped = 0, ptes_all = 0, pmds = 0, bad = 0;
	unsigned long orders[MAX_PAGE_ORDER + 1] = { };
	unsigned long aorders[MAX_PAGE_ORDER + 1] = { };
	struct shared_folio *sf;
	unsigned int order;
	struct sf_alias *a;

	for (pfn = 0; pfn < max_pfn; pfn++) {
		struct page *page = pfn_to_online_page(pfn);
		struct rmap_walk_control rwc = { .rmap_one = sf_audit_one };
		unsigned long ptes[2] = { };
		struct folio *folio;
		int mapcount;

		if (!(pfn % 4096))
			cond_resched();
		if (!page || !PageLRU(page) || PageTail(page))
			continue;
		folio = page_folio(page);
		if (!folio_try_get(folio))
			continue;
		/* Still a page-cache or anonymous folio: ->mapping is one. */
		if (folio != page_folio(page) || !folio_test_lru(folio) ||
		    folio_test_anon(folio) || !folio_is_sf_physical(folio))
			goto put;
		folio_lock(folio);
		if (!folio_is_sf_physical(folio))
			goto unlock;
		folios++;
		orders[min_t(unsigned int, folio_order(folio), MAX_PAGE_ORDER)]++;
		sf = folio_get_private(folio);
		if (sf) {
			spin_lock_irq(&sf->lock);
			list_for_each_entry(a, &sf->aliases, page.lru)
				aorders[min_t(unsigned int,
					      folio_order(sf_alias_to_folio(a)),
					      MAX_PAGE_ORDER)]++;
			spin_unlock_irq(&sf->lock);
		}
		mapcount = folio_mapcount(folio);
		rwc.arg = ptes;
		rmap_walk(folio, &rwc);
		mapped += !!mapcount;
		/* Pages mapped: a PMD maps all of the folio's. */
		ptes_all += ptes[0] - ptes[1] + ptes[1] * folio_nr_pages(folio);
		pmds += ptes[1];
		if (ptes[0] != mapcount && ++bad <= 10)
			seq_printf(m, "mismatch: pfn %#lx mapcount %d ptes %lu pmds %lu aliases %u\n",
				   pfn, mapcount, ptes[0], ptes[1],
				   sf_folio_nr_aliases(folio));
unlock:
		folio_unlock(folio);
put:
		folio_put(folio);
	}
	seq_puts(m, "orders");
	for (order = 0; order <= MAX_PAGE_ORDER; order++)
		if (orders[order])
			seq_printf(m, " %u:%lu", order, orders[order]);
	seq_puts(m, "\nalias orders");
	for (order = 0; order <= MAX_PAGE_ORDER; order++)
		if (aorders[order])
			seq_printf(m, " %u:%lu", order, aorders[order]);
	seq_printf(m, "\npmds %lu", pmds);
	seq_printf(m, "\nfolios %lu mapped %lu ptes %lu mismatches %lu\n",
		   folios, mapped, ptes_all, bad);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(sf_audit);

static void __init sf_debugfs_init(void)
{
	struct dentry *dir = debugfs_create_dir("shared_folio", NULL);

	debugfs_create_file("audit", 0400, dir, NULL, &sf_audit_fops);
}
#else
static inline void sf_debugfs_init(void) { }
#endif

/* ==================== init ==================== */

static int __init shared_folio_init(void)
{
	struct shrinker *shrinker;

	/* Aliases are charged to the memcg of the reader that creates them. */
	sf_alias_cache = KMEM_CACHE(sf_alias, SLAB_PANIC | SLAB_NO_MERGE |
				    SLAB_ACCOUNT);
	sf_alias_large_cache = KMEM_CACHE(sf_alias_large, SLAB_PANIC |
					  SLAB_NO_MERGE | SLAB_ACCOUNT);
	shrinker = shrinker_alloc(SHRINKER_NUMA_AWARE | SHRINKER_MEMCG_AWARE,
				  "sf-alias");
	if (!shrinker ||
	    __list_lru_init(&sf_alias_lru, true, &sf_alias_lru_key, shrinker) ||
	    __list_lru_init(&sf_alias_large_lru, true, &sf_alias_lru_key,
			    shrinker))
		panic("shared folios: cannot set up the alias shrinker\n");
	shrinker->count_objects = sf_shrinker_count;
	shrinker->scan_objects = sf_shrinker_scan;
	shrinker->seeks = DEFAULT_SEEKS;
	shrinker_register(shrinker);
	sf_sysfs_init();
	sf_debugfs_init();
	return 0;
}
subsys_initcall(shared_folio_init);
