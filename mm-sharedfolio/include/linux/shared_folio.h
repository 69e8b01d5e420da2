/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared folios: one physical folio, several per-inode alias folios.
 *
 * The interface for a filesystem that shares extents, and the test for an
 * alias that code outside mm needs.  What only mm calls is in
 * mm/shared_folio_internal.h.
 *
 * Conventions (also in mm/shared_folio.c): "folio" is always the physical
 * folio, an ordinary page-cache folio of the filesystem's hidden extent
 * cache; "alias" is a per-(mapping, index) struct folio allocated outside
 * the memmap that describes the same memory.  The filesystem interface is
 * named shared_folio_*(); what is internal to mm is sf_<object>_<verb>().
 */
#ifndef _LINUX_SHARED_FOLIO_H
#define _LINUX_SHARED_FOLIO_H

#include <linux/mm.h>
#include <linux/jump_label.h>

#ifdef CONFIG_SHARED_FOLIO

/**
 * struct shared_folio_stats - the counters of one extent cache
 * @folios: physical folios with a descriptor ("shared")
 * @pages: the pages of those folios (a physical folio may be large)
 * @aliases: pages aliased in a mapping ("sharing"): an alias of 2^order
 *           pages counts 2^order (DOC: Large aliases)
 * @large_aliases: of those aliases, the large ones (objects)
 * @hits: aliases installed on a physical folio that was already cached
 *        (read before, possibly by a reader's asynchronous window)
 * @misses: physical folios read from disk to be shared, the asynchronous
 *          window's included, whether or not an alias was installed
 * @unshares: pages whose alias was replaced by a private page: a copy,
 *            or a page that a write fills whole (@overwrites); for such a
 *            write, also an alias removed without a replacement (a large
 *            one the write fills whole, or an allocation failure)
 * @reclaims: aliases detached from their mapping: by reclaim of their
 *            physical folio, by its invalidation (extent freed, teardown)
 *            or by the memcg-aware alias shrinker
 * @drops: aliases a read() evicted after copying from them (drop-behind,
 *         shared_folio_drop_behind())
 * @promotions: private folios of a file made physical folios in place
 *              (shared_folio_promote())
 * @overwrites: of @unshares, those without a copy because a write was
 *              about to fill the page (shared_folio_overwrite(), which
 *              counts a large alias's pages when it removes it)
 * @breaks: large aliases removed whole for a path that works on order-0
 *          folios of the file (a write, a fault, a lookup that is not a
 *          read()), which installs order-0 aliases or private folios
 *
 * The one place these are kept: the filesystem embeds it, keeps it alive
 * until its extent cache is empty, and reports it.  The four gauges
 * (@folios, @pages, @aliases, @large_aliases) are kept by the mm core; the
 * event counters are updated only through the shared_folio_count_*() helpers, which also
 * count the system-wide vm events of /proc/vmstat (@drops, @promotions,
 * @overwrites and @breaks have none).
 */
struct shared_folio_stats {
	atomic_long_t folios;
	atomic_long_t pages;
	atomic_long_t aliases;
	atomic_long_t large_aliases;
	atomic_long_t hits;
	atomic_long_t misses;
	atomic_long_t unshares;
	atomic_long_t reclaims;
	atomic_long_t drops;
	atomic_long_t promotions;
	atomic_long_t overwrites;
	atomic_long_t breaks;
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

static inline void shared_folio_count_promotions(struct shared_folio_stats *stats,
						 unsigned long nr)
{
	atomic_long_add(nr, &stats->promotions);
}

static inline void shared_folio_count_breaks(struct shared_folio_stats *stats,
					     unsigned long nr)
{
	atomic_long_add(nr, &stats->breaks);
}

static inline void shared_folio_count_overwrites(struct shared_folio_stats *stats,
						 unsigned long nr)
{
	atomic_long_add(nr, &stats->overwrites);
}

/**
 * shared_folio_bytes_saved() - page cache that private copies would add
 * @stats: the counters of an extent cache
 *
 * Every alias stands for a private page the file would otherwise cache;
 * the pages of the physical folios are what is used instead.  Only
 * physical folios with a descriptor are counted: pages the asynchronous
 * window read and nobody shares yet are not subtracted.
 *
 * Return: (aliases - physical pages) pages, in bytes, or 0.
 */
static inline unsigned long
shared_folio_bytes_saved(const struct shared_folio_stats *stats)
{
	long saved = atomic_long_read(&stats->aliases) -
		     atomic_long_read(&stats->pages);

	return saved > 0 ? saved * PAGE_SIZE : 0;
}

struct shared_folio;	/* the descriptor: mm/shared_folio_internal.h */
struct sf_alias;	/* an alias's allocation: the same */
struct sf_alias_large;	/* a large alias's: the same */

/*
 * An alias is a struct page allocated from slab, with the physical PFN in
 * the word right after it, where __page_to_pfn() reads it (struct sf_alias,
 * mm/shared_folio_internal.h).  It lives in the direct map, which on x86_64
 * lies below the vmemmap: the first test is the one __page_to_pfn() uses,
 * and the only one a memmap page ever reaches.  NULL, and a struct page
 * copied to a stack or to vmalloc space, are not aliases.
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

/**
 * struct shared_folio_prealloc - allocations made before the folio lock
 * @sf: a descriptor for shared_folio_attach()
 * @sfa: an alias's allocation for shared_folio_add_alias()
 * @sfl: a large alias's allocation for shared_folio_add_large_alias()
 */
struct shared_folio_prealloc {
	struct shared_folio *sf;
	struct sf_alias *sfa;
	struct sf_alias_large *sfl;
};

void shared_folio_prealloc(struct shared_folio_prealloc *pa, gfp_t gfp);
void shared_folio_prealloc_large(struct shared_folio_prealloc *pa, gfp_t gfp);
void shared_folio_prealloc_free(struct shared_folio_prealloc *pa);
struct shared_folio *shared_folio_attach(struct folio *folio,
					 struct shared_folio_stats *stats,
					 struct shared_folio_prealloc *pa,
					 gfp_t gfp);
int shared_folio_add_alias(struct folio *folio, struct page *page,
			   struct address_space *mapping, pgoff_t index,
			   struct shared_folio_prealloc *pa, gfp_t gfp);
int shared_folio_add_large_alias(struct folio *folio, struct page *page,
				 unsigned int order, struct address_space *mapping,
				 pgoff_t index, struct shared_folio_prealloc *pa,
				 gfp_t gfp);
int shared_folio_promote(struct folio *folio, struct address_space *cache,
			 pgoff_t index, struct shared_folio_stats *stats,
			 gfp_t gfp);
unsigned long shared_folio_drop_behind(struct address_space *mapping,
				       pgoff_t first, pgoff_t last);
unsigned long shared_folio_detach_mapping(struct address_space *mapping);
unsigned long shared_folio_overwrite(struct address_space *mapping,
				     pgoff_t first, pgoff_t last, pgoff_t end,
				     gfp_t gfp);

DECLARE_STATIC_KEY_FALSE(shared_folio_drop_behind_key);

/* /sys/kernel/mm/shared_folio/drop_behind: see shared_folio_drop_behind(). */
static inline bool shared_folio_drop_behind_enabled(void)
{
	return static_branch_unlikely(&shared_folio_drop_behind_key);
}

/*
 * May the reader of /proc/vmstat, /proc/zoneinfo or a node's vmstat (@file,
 * or the current task when NULL) see the shared-folio counters?  They move
 * with another sharer's accesses, page by page (DOC: Side channels).
 */
bool shared_folio_counters_visible(const struct file *file);

/* The address space operations of every extent cache. */
extern const struct address_space_operations shared_folio_aops;

/*
 * Is @mapping an extent cache?  Its folios are physical folios, which
 * reach pipes through a large alias's splice: they are never stolen.
 */
static inline bool mapping_is_sf_cache(const struct address_space *mapping)
{
	return mapping && mapping->a_ops == &shared_folio_aops;
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

static inline bool shared_folio_drop_behind_enabled(void)
{
	return false;
}

static inline bool mapping_is_sf_cache(const struct address_space *mapping)
{
	return false;
}

static inline bool shared_folio_counters_visible(const struct file *file)
{
	return true;
}

#endif /* CONFIG_SHARED_FOLIO */
#endif /* _LINUX_SHARED_FOLIO_H */
