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
	/* A large alias: any of its pages. */
	return (loff_t)(alias->index + folio_nr_pages(alias)) << PAGE_SHIFT >
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
vm_fault_t sf_alias_map_pmd(struct vm_fault *vmf, struct folio *alias);
unsigned long sf_vma_walk_end(struct vm_area_struct *vma, unsigned long address);

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
 * @page: the alias itself.  An order-0 alias is only this struct page:
 *        folio_test_large() is false, so nothing touches the pages after
 *        it.  A large alias (struct sf_alias_large) is a whole struct folio
 *        whose head is @page.  An alias is never on an LRU, so @page.lru is
 *        its entry on the descriptor's list while it is in a mapping
 *        (sf_alias_linked()), and @page.rcu_head frees it a grace period
 *        after its last reference went
 * @sf: its descriptor while it is linked, NULL after; kept although the
 *      physical folio's ->private names it too, because a descriptor that
 *      sf_descriptor_free() leaks (an alias it could not detach) is no
 *      longer ->private.  Order 0 only: a large alias keeps it in struct
 *      sf_alias_large (here is its folio->_flags_1, the order)
 * @pfn_word: the PFN of the alias's first physical page, a page of the
 *            physical folio (which may be large: DOC: Large physical
 *            folios), shifted left by one (sf_alias_pfn()).
 *            __page_to_pfn() reads it two words after @page, which is
 *            folio->_head_1 in a large alias, a word only tail pages use;
 *            bit 0 clear, it never looks like a tail's compound head to
 *            page_fixed_fake_head(), which reads it for a page-aligned
 *            head page when hugetlb vmemmap optimization is on
 * @lru: entry on the memcg-aware alias LRU while the alias is in a mapping,
 *       so that the memcg it is charged to can reclaim it.  Order 0 only,
 *       as @sf
 *
 * 96 bytes.  Its physical folio is derived, page_folio() of its page,
 * on which it holds a reference; its page is pfn_to_page(sf_alias_pfn())
 * (sf_alias_page()).  The alias shrinker marks the alias it is evicting
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
	struct shared_folio *sf;
	unsigned long pfn_word;
	struct list_head lru;
};

/*
 * __page_to_pfn() reads the PFN two words after the alias's struct page,
 * where a large alias's folio has _head_1.
 */
static_assert(offsetof(struct sf_alias, pfn_word) ==
	      sizeof(struct page) + sizeof(unsigned long));
static_assert(offsetof(struct sf_alias, pfn_word) ==
	      offsetof(struct folio, _head_1));
/* One cache line and a half: struct page, descriptor, PFN, LRU head. */
static_assert(sizeof(struct sf_alias) <= 96);

/**
 * struct sf_alias_large - an alias of 2^order pages (DOC: Large aliases)
 * @folio: the alias; its head page is a struct sf_alias's @page, its
 *         _head_1 the PFN of its first physical page (struct sf_alias's
 *         @pfn_word), its order, folio_nr_pages() and mapcounts are set as for
 *         any large folio, and none of its tail pages is ever used as a
 *         page (no page arithmetic on an alias: sf_folio_data())
 * @lru: as struct sf_alias's, on the large aliases' list
 * @sf: as struct sf_alias's
 */
struct sf_alias_large {
	struct folio folio;
	struct list_head lru;
	struct shared_folio *sf;
};

static inline struct sf_alias *folio_sf_alias(const struct folio *alias)
{
	return container_of((struct page *)&alias->page, struct sf_alias, page);
}

static inline unsigned long sf_alias_pfn(const struct sf_alias *a)
{
	return a->pfn_word >> 1;
}

static inline void sf_alias_set_pfn(struct sf_alias *a, unsigned long pfn)
{
	a->pfn_word = pfn << 1;
}

static inline struct sf_alias_large *sf_alias_large(struct sf_alias *a)
{
	return container_of((struct folio *)&a->page, struct sf_alias_large, folio);
}

static inline bool sf_alias_is_large(const struct sf_alias *a)
{
	return PageHead(&a->page);
}

/* The alias's descriptor, while it is linked (struct sf_alias). */
static inline struct shared_folio **sf_alias_sfp(struct sf_alias *a)
{
	return sf_alias_is_large(a) ? &sf_alias_large(a)->sf : &a->sf;
}

/* Its entry on the alias LRU (struct sf_alias). */
static inline struct list_head *sf_alias_lru_entry(struct sf_alias *a)
{
	return sf_alias_is_large(a) ? &sf_alias_large(a)->lru : &a->lru;
}

/* The physical folio an alias describes: its page's folio. */
static inline struct folio *sf_alias_physical(const struct folio *alias)
{
	return page_folio(pfn_to_page(sf_alias_pfn(folio_sf_alias(alias))));
}

/*
 * The physical page an alias describes (its first, for a large alias): a
 * page of sf_alias_physical(), which may be a large folio.  Code that maps,
 * copies or checks an order-0 alias's data takes this page, never the
 * physical folio's first page.
 */
static inline struct page *sf_alias_page(const struct folio *alias)
{
	return pfn_to_page(sf_alias_pfn(folio_sf_alias(alias)));
}

/*
 * The physical page at @index of the file, which @alias covers: for an
 * order-0 alias, sf_alias_page(); for a large one, its page there.
 */
static inline struct page *sf_alias_page_at(const struct folio *alias,
					    pgoff_t index)
{
	return nth_page(sf_alias_page(alias), index - alias->index);
}

/*
 * The folio that holds @folio's data, for code that takes pages of it or
 * offsets past its first page (copy_folio_to_iter(), splice): @folio
 * itself, but for a large alias, its physical folio.  *@offset is where
 * @folio's first byte is in the returned folio.
 */
static inline struct folio *sf_folio_data(struct folio *folio, size_t *offset)
{
	struct folio *phys;

	*offset = 0;
	if (!page_is_sf_alias(&folio->page) || !folio_test_large(folio))
		return folio;
	phys = sf_alias_physical(folio);
	*offset = (sf_alias_pfn(folio_sf_alias(folio)) - folio_pfn(phys)) << PAGE_SHIFT;
	return phys;
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
void sf_folio_detach_to_split(struct folio *folio);
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

static inline struct page *sf_alias_page_at(const struct folio *alias,
					    pgoff_t index)
{
	return NULL;
}

static inline struct folio *sf_folio_data(struct folio *folio, size_t *offset)
{
	*offset = 0;
	return folio;
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
static inline void sf_folio_detach_to_split(struct folio *folio) { }

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

/*
 * May a read fault in @vma map @alias's pages (locked @alias, in its
 * mapping)?  A read-only PTE, nothing past EOF, and no mlock by a tenant
 * that does not pay for the shared page (DOC: Sharers and tenants).
 */
static inline bool sf_alias_may_map(struct vm_area_struct *vma,
				    struct folio *alias)
{
	return sf_vma_may_map(vma) &&
	       !sf_alias_past_eof(alias->mapping, alias) &&
	       (!(vma->vm_flags & VM_LOCKED) ||
		sf_folio_may_mlock(sf_alias_physical(alias), vma));
}

#endif /* __MM_SHARED_FOLIO_INTERNAL_H */
