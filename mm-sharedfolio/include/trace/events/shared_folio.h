/* SPDX-License-Identifier: GPL-2.0 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM shared_folio

#if !defined(_TRACE_SHARED_FOLIO_H) || defined(TRACE_HEADER_MULTI_READ)
#define _TRACE_SHARED_FOLIO_H

#include <linux/tracepoint.h>
#include <linux/fs.h>

/*
 * @pfn: the alias's (first) page; @nr_pages: the pages it describes (a
 * large alias: more than one); @nr_aliases: its physical folio's aliases.
 */
DECLARE_EVENT_CLASS(shared_folio_alias_class,
		    TP_PROTO(struct address_space *mapping, pgoff_t index,
			     unsigned long pfn, unsigned int nr_pages,
			     unsigned int nr_aliases),
		    TP_ARGS(mapping, index, pfn, nr_pages, nr_aliases),
		    TP_STRUCT__entry(__field(dev_t, dev)
				     __field(unsigned long, ino)
				     __field(pgoff_t, index)
				     __field(unsigned long, pfn)
				     __field(unsigned int, nr_pages)
				     __field(unsigned int, nr_aliases)),
		    TP_fast_assign(__entry->dev = mapping->host->i_sb->s_dev;
				   __entry->ino = mapping->host->i_ino;
				   __entry->index = index;
				   __entry->pfn = pfn;
				   __entry->nr_pages = nr_pages;
				   __entry->nr_aliases = nr_aliases;),
		    TP_printk("dev %d:%d ino %lx index %lu pfn 0x%lx pages %u aliases %u",
			      MAJOR(__entry->dev), MINOR(__entry->dev),
			      __entry->ino, __entry->index, __entry->pfn,
			      __entry->nr_pages, __entry->nr_aliases)
);

/* An alias of the folio at @pfn was installed at (@mapping, @index). */
DEFINE_EVENT(shared_folio_alias_class, shared_folio_share,
	     TP_PROTO(struct address_space *mapping, pgoff_t index,
		      unsigned long pfn, unsigned int nr_pages,
		      unsigned int nr_aliases),
	     TP_ARGS(mapping, index, pfn, nr_pages, nr_aliases));

/* The alias at (@mapping, @index) was replaced by a private copy. */
DEFINE_EVENT(shared_folio_alias_class, shared_folio_unshare,
	     TP_PROTO(struct address_space *mapping, pgoff_t index,
		      unsigned long pfn, unsigned int nr_pages,
		      unsigned int nr_aliases),
	     TP_ARGS(mapping, index, pfn, nr_pages, nr_aliases));

/* The alias at (@mapping, @index) was detached so @pfn can be freed. */
DEFINE_EVENT(shared_folio_alias_class, shared_folio_reclaim,
	     TP_PROTO(struct address_space *mapping, pgoff_t index,
		      unsigned long pfn, unsigned int nr_pages,
		      unsigned int nr_aliases),
	     TP_ARGS(mapping, index, pfn, nr_pages, nr_aliases));

/* The physical folio at @old_pfn moved to @new_pfn with its @nr_aliases. */
TRACE_EVENT(shared_folio_migrate,
	    TP_PROTO(struct folio *src, struct folio *dst, unsigned int nr_aliases),
	    TP_ARGS(src, dst, nr_aliases),
	    TP_STRUCT__entry(__field(unsigned long, old_pfn)
			     __field(unsigned long, new_pfn)
			     __field(unsigned int, nr_aliases)),
	    TP_fast_assign(__entry->old_pfn = folio_pfn(src);
			   __entry->new_pfn = folio_pfn(dst);
			   __entry->nr_aliases = nr_aliases;),
	    TP_printk("pfn 0x%lx -> 0x%lx aliases %u", __entry->old_pfn,
		      __entry->new_pfn, __entry->nr_aliases)
);

#endif /* _TRACE_SHARED_FOLIO_H */

/* This part must be outside protection */
#include <trace/define_trace.h>
