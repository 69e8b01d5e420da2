/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared folios: one physical folio, several per-inode alias folios.
 *
 * Conventions (also in mm/shared_folio.c): "folio" is always the physical
 * folio, an ordinary page-cache folio of the filesystem's hidden extent
 * cache; "alias" is a per-(mapping, index) struct folio allocated outside
 * the memmap that describes the same memory.
 */
#ifndef _LINUX_SHARED_FOLIO_H
#define _LINUX_SHARED_FOLIO_H

#include <linux/mm.h>
#include <linux/spinlock.h>
#include <linux/list.h>
#include <linux/jump_label.h>

/*
 * Mapping shared folios (see "DOC: Mapping" in mm/shared_folio.c): a PTE
 * maps the physical page, never the alias, and counts in the physical
 * folio's mapcount; the reverse map reaches it through the aliases.
 * Declared in every configuration: the callers are guarded by
 * folio_is_sf_alias() or folio_is_sf_physical(), which are constant false
 * without CONFIG_SHARED_FOLIO.
 */
struct rmap_walk_control;

bool sf_alias_maybe_mapped(struct folio *alias);

/*
 * Does @alias's page, in @mapping, extend past the file's EOF?  Its bytes
 * there are the extent's: another sharer's data, or what a truncate left on
 * disk, not zeros.  read() stops at EOF; a mapping would show them, so such
 * a page is never mapped (it gets a private copy, zeroed past EOF).
 */
static inline bool sf_alias_past_eof(struct address_space *mapping,
				     const struct folio *alias)
{
	return ((loff_t)alias->index << PAGE_SHIFT) + PAGE_SIZE >
	       i_size_read(mapping->host);
}

/*
 * Does a read fault in @vma install a read-only PTE?  Only then may it map
 * a physical page: every write must fault first (private mappings COW;
 * shared writable ones need write notification, ->page_mkwrite).
 */
static inline bool shared_folio_vma_maps(struct vm_area_struct *vma)
{
	return !pte_write(pfn_pte(0, READ_ONCE(vma->vm_page_prot)));
}

void shared_folio_rmap_walk(struct folio *folio, struct rmap_walk_control *rwc,
			    bool locked);
bool rmap_walk_file_mapping(struct folio *folio, struct address_space *mapping,
			    pgoff_t pgoff_start, unsigned long nr_pages,
			    struct rmap_walk_control *rwc, bool locked);
vm_fault_t shared_folio_wp_fault(struct vm_fault *vmf, struct folio *folio);

#ifdef CONFIG_SHARED_FOLIO

/**
 * struct shared_folio_stats - the counters of one extent cache
 * @folios: physical folios with a descriptor ("shared")
 * @aliases: aliases in a mapping ("sharing")
 * @hits: aliases installed on a physical folio that was already cached
 *        (read before, possibly by a reader's asynchronous window)
 * @misses: physical folios read from disk to be shared, the asynchronous
 *          window's included, whether or not an alias was installed
 * @unshares: aliases replaced by a private copy
 * @reclaims: aliases detached from their mapping: by reclaim of their
 *            physical folio, by its invalidation (extent freed, teardown)
 *            or by the memcg-aware alias shrinker
 * @drops: aliases a read() evicted after copying from them (drop-behind,
 *         shared_folio_drop_behind())
 *
 * The one place these are kept: the filesystem embeds it, keeps it alive
 * until its extent cache is empty, and reports it.  The two gauges
 * (@folios, @aliases) are kept by the mm core; the event counters are
 * updated only through the shared_folio_count_*() helpers, which also
 * count the system-wide vm events of /proc/vmstat (@drops has none).
 */
struct shared_folio_stats {
	atomic_long_t folios;
	atomic_long_t aliases;
	atomic_long_t hits;
	atomic_long_t misses;
	atomic_long_t unshares;
	atomic_long_t reclaims;
	atomic_long_t drops;
};

static inline void shared_folio_count_hits(struct shared_folio_stats *stats,
					   unsigned long nr)
{
	atomic_long_add(nr, &stats->hits);
	count_vm_events(SHARED_FOLIO_HIT, nr);
}

static inline void shared_folio_count_misses(struct shared_folio_stats *stats,
					     unsigned long nr)
{
	atomic_long_add(nr, &stats->misses);
	count_vm_events(SHARED_FOLIO_MISS, nr);
}

static inline void shared_folio_count_unshares(struct shared_folio_stats *stats,
					       unsigned long nr)
{
	atomic_long_add(nr, &stats->unshares);
	count_vm_events(SHARED_FOLIO_UNSHARE, nr);
}

static inline void shared_folio_count_reclaims(struct shared_folio_stats *stats,
					       unsigned long nr)
{
	atomic_long_add(nr, &stats->reclaims);
	count_vm_events(SHARED_FOLIO_RECLAIM, nr);
}

static inline void shared_folio_count_drops(struct shared_folio_stats *stats,
					    unsigned long nr)
{
	atomic_long_add(nr, &stats->drops);
}

/**
 * shared_folio_bytes_saved() - page cache that private copies would add
 * @stats: the counters of an extent cache
 *
 * Every alias stands for a private page the file would otherwise cache;
 * the physical folios are what is used instead.  Only physical folios
 * with a descriptor are counted: pages the asynchronous window read and
 * nobody shares yet are not subtracted.
 *
 * Return: (aliases - physical folios) pages, in bytes, or 0.
 */
static inline unsigned long
shared_folio_bytes_saved(const struct shared_folio_stats *stats)
{
	long saved = atomic_long_read(&stats->aliases) -
		     atomic_long_read(&stats->folios);

	return saved > 0 ? saved * PAGE_SIZE : 0;
}

/**
 * struct shared_folio - the shared-folio descriptor of a physical folio
 * @lock: protects @aliases and @nr_aliases (irq-safe: nests in the xa_lock)
 * @nr_aliases: number of aliases on @aliases
 * @aliases: the aliases currently in a mapping, linked by their page.lru
 * @stats: counters of the cache the folio belongs to
 *
 * Attached to the physical folio as folio->private (PG_private, one folio
 * reference) for as long as the folio is in its extent cache.
 */
struct shared_folio {
	spinlock_t lock;	/* see the kernel-doc above */
	unsigned int nr_aliases;
	struct list_head aliases;
	struct shared_folio_stats *stats;
};

/**
 * struct sf_alias - an alias folio and what it needs beyond struct page
 * @page: the alias itself; order 0, so only the first struct page of a
 *        struct folio is ever touched (folio_test_large() is false).  An
 *        alias is never on an LRU, so @page.lru is its entry on the
 *        descriptor's list while it is in a mapping (sf_alias_linked()),
 *        and @page.rcu_head frees it a grace period after its last
 *        reference went
 * @pfn: the physical PFN; __page_to_pfn() reads it at (page + 1)
 * @lru: entry on the memcg-aware alias LRU while the alias is in a mapping,
 *       so that the memcg it is charged to can reclaim it
 * @sf: its descriptor while it is linked, NULL after; kept although the
 *      physical folio's ->private names it too, because a descriptor that
 *      shared_folio_free_descriptor() leaks (an alias it could not detach)
 *      is no longer ->private, and in the 8 bytes of padding that struct
 *      page's 16-byte alignment (HAVE_ALIGNED_STRUCT_PAGE) adds anyway
 *
 * 96 bytes.  Its physical folio is derived, pfn_folio(@pfn), on which it
 * holds a reference.  The alias shrinker marks the alias it is evicting
 * with PG_checked (an alias is never written, so no filesystem looks at
 * it), so that its removal is counted and traced as a reclaim.
 *
 * Lockless page-cache lookups (find_get_entry(), filemap_get_read_batch(),
 * next_uptodate_folio(), ...) may still hold a pointer to an alias that was
 * just removed from its mapping, and folio_try_get() it.  For a memmap
 * folio that is harmless because struct page is never freed; an alias is
 * slab memory, so it stays allocated with a zero refcount until every such
 * reader is gone.
 */
struct sf_alias {
	struct page page;
	unsigned long pfn;
	struct list_head lru;
	struct shared_folio *sf;
};

/* __page_to_pfn() reads the PFN right after the alias's struct page. */
static_assert(offsetof(struct sf_alias, pfn) == sizeof(struct page));
/* One cache line and a half: struct page, PFN, LRU head, descriptor. */
static_assert(sizeof(struct sf_alias) <= 96);

/*
 * An alias lives in the direct map (slab), which on x86_64 lies below the
 * vmemmap: the first test is the one __page_to_pfn() uses, and the only one
 * a memmap page ever reaches.  NULL, and a struct page copied to a stack or
 * to vmalloc space, are not aliases.
 */
static inline bool page_is_sf_alias(const struct page *page)
{
	unsigned long addr = (unsigned long)page;

	return unlikely(page < vmemmap) && addr >= PAGE_OFFSET &&
	       addr < (unsigned long)high_memory;
}

static inline bool folio_is_sf_alias(const struct folio *folio)
{
	return page_is_sf_alias(&folio->page);
}

static inline struct sf_alias *folio_sf_alias(const struct folio *alias)
{
	return container_of((struct page *)&alias->page, struct sf_alias, page);
}

/* The physical folio an alias describes. */
static inline struct folio *sf_alias_physical(const struct folio *alias)
{
	return pfn_folio(folio_sf_alias(alias)->pfn);
}

/**
 * struct shared_folio_prealloc - allocations made before the folio lock
 * @sf: a descriptor for shared_folio_attach()
 * @alias: an alias for shared_folio_add_alias()
 */
struct shared_folio_prealloc {
	struct shared_folio *sf;
	struct sf_alias *alias;
};

void shared_folio_prealloc(struct shared_folio_prealloc *pa, gfp_t gfp);
void shared_folio_prealloc_free(struct shared_folio_prealloc *pa);
struct shared_folio *shared_folio_attach(struct folio *folio,
					 struct shared_folio_stats *stats,
					 struct shared_folio_prealloc *pa,
					 gfp_t gfp);
int shared_folio_add_alias(struct folio *folio, struct address_space *mapping,
			   pgoff_t index, struct shared_folio_prealloc *pa,
			   gfp_t gfp);
unsigned int shared_folio_detach_aliases(struct folio *folio, bool sync);
bool shared_folio_release(struct folio *folio);
void shared_folio_invalidate(struct folio *folio, size_t offset, size_t len);
struct folio *shared_folio_unshare(struct address_space *mapping,
				   struct folio *alias, gfp_t gfp);
unsigned int shared_folio_nr_aliases(struct folio *folio);
unsigned long shared_folio_drop_behind(struct address_space *mapping,
				       pgoff_t first, pgoff_t last);
unsigned long shared_folio_detach_mapping(struct address_space *mapping);

DECLARE_STATIC_KEY_FALSE(shared_folio_drop_behind_key);

/* /sys/kernel/mm/shared_folio/drop_behind: see shared_folio_drop_behind(). */
static inline bool shared_folio_drop_behind_enabled(void)
{
	return static_branch_unlikely(&shared_folio_drop_behind_key);
}
void sf_alias_free(struct folio *alias);
void sf_alias_unaccount(struct folio *alias);

/*
 * May the reader of /proc/vmstat, /proc/zoneinfo or a node's vmstat (@file,
 * or the current task when NULL) see the shared-folio counters?  They move
 * with another sharer's accesses, page by page (DOC: Side channels).
 */
bool shared_folio_counters_visible(const struct file *file);

/* The address space operations of every extent cache. */
extern const struct address_space_operations shared_folio_aops;

/* Is @folio a physical folio, in the extent cache of some filesystem? */
static inline bool folio_is_sf_physical(const struct folio *folio)
{
	const struct address_space *mapping = READ_ONCE(folio->mapping);

	return mapping && !((unsigned long)mapping & PAGE_MAPPING_FLAGS) &&
	       mapping->a_ops == &shared_folio_aops;
}

/* folio_mapped() for a page-cache folio that may be an alias. */
static inline bool sf_folio_mapped(struct folio *folio)
{
	if (folio_is_sf_alias(folio))
		return sf_alias_maybe_mapped(folio);
	return folio_mapped(folio);
}

#else /* !CONFIG_SHARED_FOLIO */

static inline bool page_is_sf_alias(const struct page *page)
{
	return false;
}

static inline bool folio_is_sf_alias(const struct folio *folio)
{
	return false;
}

static inline struct folio *sf_alias_physical(const struct folio *alias)
{
	return NULL;
}

static inline bool shared_folio_drop_behind_enabled(void)
{
	return false;
}

static inline struct folio *shared_folio_unshare(struct address_space *mapping,
						 struct folio *alias, gfp_t gfp)
{
	return alias;
}

static inline void sf_alias_free(struct folio *alias) { }
static inline void sf_alias_unaccount(struct folio *alias) { }

static inline bool folio_is_sf_physical(const struct folio *folio)
{
	return false;
}

static inline bool shared_folio_counters_visible(const struct file *file)
{
	return true;
}

static inline bool sf_folio_mapped(struct folio *folio)
{
	return folio_mapped(folio);
}

#endif /* CONFIG_SHARED_FOLIO */

#endif /* _LINUX_SHARED_FOLIO_H */
