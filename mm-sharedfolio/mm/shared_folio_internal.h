/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared folios: what only mm calls.  The filesystem interface is in
 * include/linux/shared_folio.h; the design is in mm/shared_folio.c.
 */
#ifndef __MM_SHARED_FOLIO_INTERNAL_H
#define __MM_SHARED_FOLIO_INTERNAL_H

#include <linux/shared_folio.h>
#include <linux/spinlock.h>
#include <linux/list.h>

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
static inline bool sf_vma_may_map(struct vm_area_struct *vma)
{
	return !pte_write(pfn_pte(0, READ_ONCE(vma->vm_page_prot)));
}

void sf_folio_rmap_walk(struct folio *folio, struct rmap_walk_control *rwc,
			bool locked);
bool rmap_walk_file_mapping(struct folio *folio, struct address_space *mapping,
			    pgoff_t pgoff_start, unsigned long nr_pages,
			    struct rmap_walk_control *rwc, bool locked);
vm_fault_t sf_folio_wp_fault(struct vm_fault *vmf, struct folio *folio);

#ifdef CONFIG_SHARED_FOLIO

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
 * @pfn: the PFN of the physical page, a page of the physical folio (which
 *       may be large: one alias per page, DOC: Large physical folios);
 *       __page_to_pfn() reads it at (page + 1)
 * @lru: entry on the memcg-aware alias LRU while the alias is in a mapping,
 *       so that the memcg it is charged to can reclaim it
 * @sf: its descriptor while it is linked, NULL after; kept although the
 *      physical folio's ->private names it too, because a descriptor that
 *      sf_descriptor_free() leaks (an alias it could not detach) is no
 *      longer ->private, and in the 8 bytes of padding that struct page's
 *      16-byte alignment (HAVE_ALIGNED_STRUCT_PAGE) adds anyway
 *
 * 96 bytes.  Its physical folio is derived, pfn_folio(@pfn), on which it
 * holds a reference; its page is pfn_to_page(@pfn) (sf_alias_page()).
 * The alias shrinker marks the alias it is evicting with PG_checked (an
 * alias is never written, so no filesystem looks at it), so that its
 * removal is counted and traced as a reclaim.
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

static inline struct sf_alias *folio_sf_alias(const struct folio *alias)
{
	return container_of((struct page *)&alias->page, struct sf_alias, page);
}

/* The physical folio an alias describes: its page's folio. */
static inline struct folio *sf_alias_physical(const struct folio *alias)
{
	return pfn_folio(folio_sf_alias(alias)->pfn);
}

/*
 * The physical page an alias describes: a page of sf_alias_physical(),
 * which may be a large folio.  Code that maps, copies or checks the
 * alias's data takes this page, never the physical folio's first page.
 */
static inline struct page *sf_alias_page(const struct folio *alias)
{
	return pfn_to_page(folio_sf_alias(alias)->pfn);
}

/* Is @folio a physical folio, in the extent cache of some filesystem? */
static inline bool folio_is_sf_physical(const struct folio *folio)
{
	const struct address_space *mapping = READ_ONCE(folio->mapping);

	return mapping && !((unsigned long)mapping & PAGE_MAPPING_FLAGS) &&
	       mapping->a_ops == &shared_folio_aops;
}

unsigned int sf_folio_detach_aliases(struct folio *folio, bool sync);
bool sf_folio_release(struct folio *folio);
void sf_folio_invalidate(struct folio *folio, size_t offset, size_t len);
struct folio *sf_alias_unshare(struct address_space *mapping,
			       struct folio *alias, gfp_t gfp);
unsigned int sf_folio_nr_aliases(struct folio *folio);
void sf_alias_free(struct folio *alias);
void sf_alias_unaccount(struct folio *alias);

/* mm/migrate.c: the aliases follow a migrated physical folio. */
int sf_folio_lock_aliases(struct folio *folio);
void sf_folio_unlock_aliases(struct folio *folio);

/* folio_mapped() for a page-cache folio that may be an alias. */
static inline bool sf_folio_mapped(struct folio *folio)
{
	if (folio_is_sf_alias(folio))
		return sf_alias_maybe_mapped(folio);
	return folio_mapped(folio);
}

/* Does an mlock of @folio in @vma pin it (DOC: Sharers and tenants)? */
bool __sf_folio_may_mlock(struct folio *folio, struct vm_area_struct *vma);

static inline bool sf_folio_may_mlock(struct folio *folio,
				      struct vm_area_struct *vma)
{
	return !folio_is_sf_physical(folio) ||
	       __sf_folio_may_mlock(folio, vma);
}

/* May a hint of @vma's task (MADV_COLD, MADV_PAGEOUT) act on @folio? */
bool __sf_folio_may_evict(struct folio *folio, struct vm_area_struct *vma);

static inline bool sf_folio_may_evict(struct folio *folio,
				      struct vm_area_struct *vma)
{
	return !folio_is_sf_physical(folio) ||
	       __sf_folio_may_evict(folio, vma);
}

#else /* !CONFIG_SHARED_FOLIO */

static inline struct folio *sf_alias_physical(const struct folio *alias)
{
	return NULL;
}

static inline struct page *sf_alias_page(const struct folio *alias)
{
	return NULL;
}

static inline bool folio_is_sf_physical(const struct folio *folio)
{
	return false;
}

static inline struct folio *sf_alias_unshare(struct address_space *mapping,
					     struct folio *alias, gfp_t gfp)
{
	return alias;
}

static inline void sf_alias_free(struct folio *alias) { }
static inline void sf_alias_unaccount(struct folio *alias) { }

static inline bool sf_folio_mapped(struct folio *folio)
{
	return folio_mapped(folio);
}

static inline bool sf_folio_may_evict(struct folio *folio,
				      struct vm_area_struct *vma)
{
	return true;
}

static inline bool sf_folio_may_mlock(struct folio *folio,
				      struct vm_area_struct *vma)
{
	return true;
}

static inline int sf_folio_lock_aliases(struct folio *folio)
{
	return 0;
}

static inline void sf_folio_unlock_aliases(struct folio *folio) { }

#endif /* CONFIG_SHARED_FOLIO */

#endif /* __MM_SHARED_FOLIO_INTERNAL_H */
