/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared folios: the hooks that only mm/ calls.  What a filesystem uses is
 * in include/linux/shared_folio.h.
 */
#ifndef __MM_SHARED_FOLIO_INTERNAL_H
#define __MM_SHARED_FOLIO_INTERNAL_H

#include <linux/shared_folio.h>

#ifdef CONFIG_SHARED_FOLIO

/* mm/migrate.c: the aliases follow a migrated physical folio. */
int shared_folio_migrate_lock(struct folio *folio);
void shared_folio_migrate_unlock(struct folio *folio);

/* Does an mlock of @folio in @vma pin it (DOC: Sharers and tenants)? */
bool __shared_folio_may_mlock(struct folio *folio, struct vm_area_struct *vma);

static inline bool shared_folio_may_mlock(struct folio *folio,
					  struct vm_area_struct *vma)
{
	return !folio_is_sf_physical(folio) ||
	       __shared_folio_may_mlock(folio, vma);
}

/* May a hint of @vma's task (MADV_COLD, MADV_PAGEOUT) act on @folio? */
bool __shared_folio_may_evict(struct folio *folio, struct vm_area_struct *vma);

static inline bool shared_folio_may_evict(struct folio *folio,
					  struct vm_area_struct *vma)
{
	return !folio_is_sf_physical(folio) ||
	       __shared_folio_may_evict(folio, vma);
}

#else /* !CONFIG_SHARED_FOLIO */

static inline bool shared_folio_may_evict(struct folio *folio,
					  struct vm_area_struct *vma)
{
	return true;
}

static inline bool shared_folio_may_mlock(struct folio *folio,
					  struct vm_area_struct *vma)
{
	return true;
}

static inline int shared_folio_migrate_lock(struct folio *folio)
{
	return 0;
}

static inline void shared_folio_migrate_unlock(struct folio *folio) { }

#endif /* CONFIG_SHARED_FOLIO */

#endif /* __MM_SHARED_FOLIO_INTERNAL_H */
