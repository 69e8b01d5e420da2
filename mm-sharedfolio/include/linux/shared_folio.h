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
#include <linux/rcupdate.h>

struct address_space;

#ifdef CONFIG_SHARED_FOLIO

/**
 * struct shared_folio_owner - per-cache counters, owned by the filesystem
 * @nr_folios: physical folios with a descriptor ("shared")
 * @nr_aliases: aliases in a mapping ("sharing")
 * @nr_unshares: aliases replaced by a private copy, since creation
 * @nr_reclaims: aliases detached so their physical folio could go
 *
 * The filesystem keeps it alive until its cache is empty; the mm updates
 * it.  The same events are counted system-wide in /proc/vmstat.
 */
struct shared_folio_owner {
	atomic_long_t nr_folios;
	atomic_long_t nr_aliases;
	atomic_long_t nr_unshares;
	atomic_long_t nr_reclaims;
};

/**
 * struct shared_folio - the shared-folio descriptor of a physical folio
 * @lock: protects @aliases and @nr_aliases
 * @nr_aliases: number of aliases on @aliases
 * @aliases: the aliases currently in a mapping, linked by sf_alias.node
 * @owner: counters of the cache the folio belongs to
 *
 * Attached to the physical folio as folio->private (PG_private, one folio
 * reference) for as long as the folio is in its extent cache.
 */
struct shared_folio {
	spinlock_t lock;
	unsigned int nr_aliases;
	struct list_head aliases;
	struct shared_folio_owner *owner;
};

/**
 * struct sf_alias - an alias folio and what it needs beyond struct page
 * @page: the alias itself; order 0, so only the first struct page of a
 *        struct folio is ever touched (folio_test_large() is false)
 * @pfn: the physical PFN; __page_to_pfn() reads it at (page + 1)
 * @folio: the physical folio; the alias holds one reference on it
 * @sf: the descriptor of @folio, valid while @node is linked
 * @node: entry on @sf->aliases while the alias is in a mapping
 * @rcu: frees the alias a grace period after its last reference went
 * @lru: entry on the memcg-aware alias LRU while the alias is in a mapping,
 *       so that the memcg it is charged to can reclaim it
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
	struct folio *folio;
	struct shared_folio *sf;
	union {
		struct list_head node;
		struct rcu_head rcu;	/* after @node is unlinked */
	};
	struct list_head lru;
};

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
	return folio_sf_alias(alias)->folio;
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
					 struct shared_folio_owner *owner,
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
void sf_alias_free(struct folio *alias);
void sf_alias_unaccount(struct folio *alias);

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

static inline struct folio *shared_folio_unshare(struct address_space *mapping,
						 struct folio *alias, gfp_t gfp)
{
	return alias;
}

static inline void sf_alias_free(struct folio *alias) { }
static inline void sf_alias_unaccount(struct folio *alias) { }

#endif /* CONFIG_SHARED_FOLIO */
#endif /* _LINUX_SHARED_FOLIO_H */
