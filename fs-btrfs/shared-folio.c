// SPDX-License-Identifier: GPL-2.0

/**
 * DOC: btrfs extent cache
 *
 * One page-cache copy for data that files share on disk.  Reflink copies,
 * snapshots and deduplicated ranges point at the same disk extent; without
 * this each file reads and caches its own copy.  Here each
 * filesystem has a hidden "extent cache" inode whose page cache holds each
 * extent's data at a place that only the extent decides (DOC: btrfs extent
 * cache index space).  Its folios are the physical folios of
 * mm/shared_folio.c: ordinary page-cache folios on the LRU, filled through
 * btrfs's own read path (checksums verified, repaired from a mirror, a
 * compressed extent decompressed once), charged to whoever read them
 * first.  A read of a file
 * installs in the file's mapping an alias of the physical folio instead of
 * reading a private copy; the generic read path then copies from the alias
 * as from any folio.
 *
 * btrfs decides what is shared, in btrfs_sf_populate(), called by
 * read_iter and splice_read before filemap_read() / filemap_splice_read():
 * for each page of the read with nothing in the page cache, the extent map
 * says where the data lives.  Excluded, so read privately as before:
 * holes, inline and preallocated extents, NODATASUM and NODATACOW
 * inodes, fs-verity files, the free-space and data-relocation inodes,
 * sectorsize != PAGE_SIZE, and the compressed references that do not fit
 * the index space (btrfs_sf_em_eligible()).  So are extents no other file
 * references (btrfs_sf_em_shared()): sharing them would only cost.
 *
 * Writes never reach shared memory: the mm replaces an alias by a private
 * copy on any write-intent lookup (FGP_WRITE/FGP_CREAT: buffered writes,
 * btrfs_truncate_block, defrag, inline copies) and on faults; truncation,
 * hole punching, DIO writes and a clone into a range remove the range's
 * page cache, aliases included; a dedupe removes it only where the range
 * holds an alias (btrfs_sf_dedupe_done()).
 *
 * Stale data is a security bug: a physical folio caches what a logical
 * address held when it was read.  When the space is freed, that is when a
 * pinned extent is returned to the free space (unpin_extent_range()) or a
 * block group is removed, the range is truncated from the extent cache,
 * which detaches every alias of it, before anything can reuse the space.
 *
 * Locks: populate takes the file's invalidate lock (shared), then its
 * extent range lock, then physical folio locks; the rest of the order is
 * the mm's ("Lock order" in mm/shared_folio.c).  Promotion (DOC: btrfs
 * lazy sharing) only try-locks another file's folio and extent range.
 */

/**
 * DOC: btrfs extent cache index space
 *
 * One index space for every extent, in which each compressed extent is a
 * naturally aligned region:
 *
 * - Uncompressed data is placed by its logical address P (disk_bytenr +
 *   offset, offset the page's place in the extent's data), in granules of
 *   2 MiB of logical addresses, each with a phase f in [0, 512): the page
 *   at P sits at byte f * 2^53 + P + f * 4 KiB, in a space of its own for
 *   each phase (BTRFS_SF_PHASE_SPACE_SHIFT).  A granule's 512 pages are in
 *   a row, and so are the pages of neighbouring granules of the same
 *   phase: a run of a file that crosses a granule boundary (its data is
 *   rarely 2 MiB-aligned on disk) still has its pages in a row, aligned as
 *   in the file, so a PMD-sized folio can hold it.  Granules of different
 *   phases never meet.  The first reader of a granule
 *   records its phase (fs_info->sf_phases): its own index of the
 *   granule's first page, modulo 512 (btrfs_sf_cache_pos()).  So for that
 *   reader, and for every file that references the data at the same
 *   place modulo 2 MiB (a snapshot, a reflink or dedupe at the same
 *   offset), a page's index in the extent cache and in the file are equal
 *   modulo 512, and an aligned run of the file can be one large alias of
 *   an aligned run of a physical folio (DOC: btrfs large aliases).
 *   A file that references it elsewhere gets the same pages, with smaller
 *   aliases.  Partial references (a reflink of part of an extent, the file
 *   extent item's offset) land on the same pages.  The phase of a granule
 *   freed whole is forgotten once its pages are truncated
 *   (btrfs_sf_invalidate_range()); uncompressed data at or beyond 2^52
 *   (BTRFS_SF_PHASED_LIMIT, 4 PiB of logical addresses) is read
 *   privately, so that each phase's space holds it and all 512 stay below
 *   2^62, the compressed regions.
 * - The decompressed data of the compressed extent at logical address L
 *   sits in a region of BTRFS_MAX_UNCOMPRESSED (128 KiB, 32 pages) at
 *   BTRFS_SF_COMP_BASE + (L >> sectorsize_bits) * 128 KiB, a page at its
 *   offset in the uncompressed data.  Two compressed extents never start
 *   in one sector, so their regions never overlap; each is aligned to its
 *   own size, so one order-5 folio could hold it.
 * - BTRFS_SF_COMP_BASE is 2^62, and a compressed extent at or beyond 2^56
 *   (BTRFS_SF_COMP_LIMIT) is read privately: a filesystem's logical
 *   addresses stay far below (they grow with every chunk allocated, 64
 *   PiB would be needed), and 2^62 + 2^56 / 4 KiB * 128 KiB < 2^63, so
 *   every position is a valid loff_t (a sector is at least 4 KiB).
 * - The cost is index space only: a compressed extent of c sectors takes
 *   32 * c slots, of which its decompressed pages use up to 32, so the
 *   xarray's leaf nodes are about 32 / (32 * c) full where such extents
 *   lie back to back; uncompressed data of one phase is dense, and a
 *   granule read at all costs one record (an xarray slot).
 *
 * A compressed extent's missing pages are read in one go through
 * btrfs_submit_compressed_read(), which verifies the checksums of the
 * compressed bytes, repairs from a mirror and decompresses once, whichever
 * file or part of the extent asked.  That path finds the extent in the
 * extent map tree of the bio's inode, so while it submits, the extent
 * cache's inode maps the region to the extent (btrfs_sf_read_compressed()).
 *
 * Uncompressed data read from disk goes into large physical folios where
 * its place allows (DOC: Large physical folios in mm/shared_folio.c): a
 * folio of order k sits at an index aligned to 2^k, holds only pages of one
 * extent map in a row (of one phase: it may cross granules), and only
 * pages the batch reads and the first reader does not hold privately
 * (btrfs_sf_order()), up to fs_info->sf_max_order
 * (/sys/fs/btrfs/<uuid>/shared_folio/max_order).
 * One extent map may cover extents adjacent on disk (btrfs merges their
 * maps), so a folio may hold pages of two: the truncate of a freed range
 * (btrfs_sf_invalidate_range()) removes the folios at its ends whole,
 * never a part of one.  Compressed extents' pages, and the private folios
 * a promotion turns into physical ones, stay order 0.
 */

/**
 * DOC: btrfs large aliases
 *
 * A read() of pages that a large physical folio holds in a row gets one
 * large alias for them (DOC: Large aliases in mm/shared_folio.c), of the
 * largest order k, at most the folio's, at which the file's index and the
 * extent cache's are both multiples of 2^k and every page is below EOF
 * (btrfs_sf_alias_order()); the rest get an alias a page.  The two indices
 * differ by the extent's place on disk less its place in the file, so the
 * order is bounded by how that difference is aligned: a snapshot or a
 * reflink at the same offset aligns as its extent does on disk.
 *
 * Read faults map them as they are (their populate installs them as a
 * read does), with a PMD where both are PMD-sized; a write fault or any
 * other lookup of one index splits them into order-0 aliases first, and a
 * write into the largest aliases its edges allow.  A reader with drop-behind on
 * gets order-0 aliases only.
 * /sys/fs/btrfs/<uuid>/shared_folio/large_aliases (default 1) turns them
 * off for reads that start afterwards.
 */

/**
 * DOC: btrfs lazy sharing
 *
 * An extent that other files reference but only one file reads is read
 * privately, as on a kernel without shared folios: no physical folio, no
 * alias, no descriptor.  A snapshot of the root that nobody reads then
 * costs the live files nothing but one record per extent they read.
 *
 * - The record (struct btrfs_sf_owner, in fs_info->sf_owners by the
 *   extent's disk bytenr) names the first file that read the extent, by
 *   subvolume, inode number and the file position of the extent's first
 *   byte, and the trust domain it was read in.  Its reads of the extent
 *   stay private (and the range is remembered as private, so later reads
 *   skip the lookup).
 * - When another file of the same domain reads the extent and the owner is
 *   in memory, the record is marked shared; from then on every reader of
 *   the extent goes through the extent cache.  For each page the second
 *   file misses, the owner's cached folio is *promoted*
 *   (shared_folio_promote()): moved into the extent cache without I/O or
 *   a copy, the owner getting an alias in its place.  The owner's PTEs of
 *   the page become migration entries while it moves (a frozen folio must
 *   have none) and then map it again, read-only: the same PFN.  Pages
 *   the owner does not have are read into the extent cache.  An owner
 *   that is not in memory any more hands the record to the reader.
 * - A block of the extent cache that a large physical folio could fill,
 *   and that the owner caches whole in order-0 folios that no VMA mlocks
 *   or maps from another memcg, is *collapsed* instead when both files have one owner (uid;
 *   another owner's read must not empty the first reader's page cache:
 *   DOC: Sharers and tenants) (btrfs_sf_collapse()): the owner's pages
 *   are copied into one new large folio, without I/O, and the owner's
 *   folios evicted; the owner reads them through the extent cache from
 *   then on, with large aliases like every other reader (DOC: btrfs large
 *   aliases).  The owner's PTEs of the block are zapped first, if every
 *   process that maps it is in the reader's memcg: its processes fault
 *   the pages again (without I/O; btrfs's fault handler counts them as
 *   major faults, as it populates with the mmap lock dropped), mapping
 *   the large aliases.  Promoted in place, they would stay order-0
 *   physical folios with an alias a page in every sharer.
 * - Every lock of the owner is try-locked (its invalidate lock,
 *   i_mmap_lock, folio and extent range: the reader holds its own extent
 *   range lock, and the owner may be promoting from the reader); a busy
 *   page is read into the extent cache instead.  Promotions are one at a
 *   time per filesystem (sf_promote_mutex), so two readers never race for
 *   one folio.  Under the owner's locks its extent map must still put that
 *   page at that place in the extent cache: then a clean, uptodate
 *   folio holds exactly that extent's data (a write dirties the folio
 *   under its lock; writeback moves the data to a new extent first).
 * - Stays private: a dirty or writeback folio (its data is not the
 *   extent's), an mlocked one (the owner's mlock is its own), one with
 *   other references (a DMA pin, GUP, a pipe, a reader), the page holding
 *   EOF, and every folio of a mapping that has seen a writeback error (its
 *   clean folios may hold data that never reached the disk).
 * - A record for another domain is left alone: readers of other domains
 *   share in their own caches as without lazy sharing.  Records go when
 *   their extent is freed, and at umount.
 * - /sys/fs/btrfs/<uuid>/shared_folio/lazy (1 by default) turns this off:
 *   every read of a shared extent then goes through the extent cache.
 */

/**
 * DOC: btrfs trust domains
 *
 * Sharing crosses users: snapshots of one image serve several tenants, and
 * a tenant can tell whether another has read a page by timing its own read
 * of it (mm/shared_folio.c, "Side channels").  An administrator can
 * confine sharing to trust domains, as EROFS does with domain_id: each
 * domain has its own extent cache, so two subvolumes in different domains
 * never share a physical page, while the subvolumes of one domain do.
 *
 * - A subvolume's domain is a number, 0 unless set; every subvolume is in
 *   domain 0 by default, which is sharing as without domains.  It is set
 *   in /sys/fs/btrfs/<uuid>/shared_folio/domains (root only): writing
 *   "SUBVOLID DOMAIN" sets it, reading lists the subvolumes not in 0.
 * - A new subvolume or snapshot starts in the domain of the subvolume it
 *   is created in, or if that is 0, in the domain of the subvolume it is a
 *   snapshot of (btrfs_sf_subvol_created()): what a tenant makes inside its
 *   own subvolume stays in its domain, and so does a snapshot of its
 *   subvolume made elsewhere.  A domain confines the sharing of its
 *   subvolumes; a tenant that may write into a subvolume of another
 *   domain can reflink its files there, so that is not to be allowed.
 * - The setting lives in memory, for the mount: whoever mounts the
 *   filesystem sets the domains again, as for the other sysfs knobs.
 * - A subvolume whose domain changes stops sharing at once: every alias of
 *   each of its cached files is unmapped and removed, under the file's
 *   invalidate lock so that no populate that read the old domain can
 *   install one after (btrfs_sf_set_domain()); the next access reads, or
 *   finds, the data in the new domain's cache.  Private pages stay.
 * - Freed space is invalidated in every domain's cache.
 * - "SUBVOLID 0" forgets a subvolume's domain, also of a subvolume that is
 *   gone; the entries of deleted subvolumes otherwise stay until umount.
 */
#include <linux/fs.h>
#include <linux/pagemap.h>
#include <linux/memcontrol.h>
#include <linux/shared_folio.h>
#include <linux/sched/mm.h>
#include <linux/swap.h>
#include <linux/sched/signal.h>
#include <linux/rcupdate_wait.h>
#include "messages.h"
#include "ctree.h"
#include "fs.h"
#include "btrfs_inode.h"
#include "extent_map.h"
#include "disk-io.h"
#include "accessors.h"
#include "ordered-data.h"
#include "bio.h"
#include "compression.h"
#include "shared-folio.h"

/*
 * Asynchronous window: a sequential reader keeps this much beyond its read
 * in flight in the extent cache, as readahead does for private pages.
 */
#define BTRFS_SF_WINDOW		(SZ_2M >> PAGE_SHIFT)
/*
 * At most this many pages per batch: one array allocation of 36 KiB
 * (kvmalloc: an order-4 kmalloc, or vmalloc where memory is fragmented).
 */
#define BTRFS_SF_MAX_BATCH	512
/* A physical folio holds only pages of one batch (btrfs_sf_order()). */
static_assert(BTRFS_SF_MAX_BATCH == 1 << BTRFS_SF_MAX_ORDER);
/* A window is one batch, aligned as batches are. */
static_assert(BTRFS_SF_WINDOW == BTRFS_SF_MAX_BATCH);
/*
 * Allocations under a physical folio lock, when the preallocation failed:
 * no reclaim, no memcg throttling (see btrfs_sf_install()).
 */
#define BTRFS_SF_LOCKED_GFP	(GFP_NOWAIT | __GFP_NOWARN)
/*
 * Records of first readers (DOC: btrfs lazy sharing): 32 bytes each, and
 * up to a 576-byte xarray node each where extents lie far apart, so at
 * most about 150 MiB.  Beyond, a shared extent nobody recorded is shared
 * at once.
 */
#define BTRFS_SF_MAX_OWNERS	(256UL << 10)
/* A granule of logical addresses, each with its phase: 2 MiB, 512 pages. */
#define BTRFS_SF_GRANULE_SHIFT	21
#define BTRFS_SF_GRANULE_PAGES	(1UL << (BTRFS_SF_GRANULE_SHIFT - PAGE_SHIFT))
/* Where compressed extents' regions start (DOC: btrfs extent cache index space). */
#define BTRFS_SF_COMP_BASE	BIT_ULL(62)
/* Compressed extents are shared below this logical address (the same DOC). */
#define BTRFS_SF_COMP_LIMIT	BIT_ULL(56)
/* Uncompressed data is shared below this logical address (the same DOC). */
#define BTRFS_SF_PHASED_LIMIT	BIT_ULL(52)
/*
 * Each phase's space of uncompressed data (the same DOC): 2^53 bytes.  An
 * enumerator of a type that btrfs_sf_layout gives the debug info, so that
 * debuggers read the layout there (tools-drgn, sfhelpers.extent_place()).
 */
enum btrfs_sf_layout {
	BTRFS_SF_PHASE_SPACE_SHIFT = 53,
};

static const enum btrfs_sf_layout btrfs_sf_layout __used = BTRFS_SF_PHASE_SPACE_SHIFT;
static_assert(BTRFS_SF_PHASED_LIMIT + BIT_ULL(BTRFS_SF_GRANULE_SHIFT) <=
	      BIT_ULL(BTRFS_SF_PHASE_SPACE_SHIFT));
static_assert((u64)BTRFS_SF_GRANULE_PAGES << BTRFS_SF_PHASE_SPACE_SHIFT <=
	      BTRFS_SF_COMP_BASE);
/* The last compressed region ends below 2^63 (a sector is 4 KiB or more). */
static_assert(BTRFS_SF_COMP_BASE + (BTRFS_SF_COMP_LIMIT >> 12) * BTRFS_MAX_UNCOMPRESSED <=
	      LLONG_MAX);

struct btrfs_sf_item {
	pgoff_t index;		/* in the file */
	u64 cpos;		/* position in the extent cache */
	u64 logical;		/* uncompressed: the page's logical address */
	u64 disk_bytenr;	/* its extent's logical address */
	s64 owner_pos;		/* its position in the batch's owner, or -1 */
	struct folio *folio;	/* physical, referenced */
	u32 disk_len;		/* compressed: the extent's size on disk */
	u32 ram_len;		/* compressed: its uncompressed size */
	u32 ref_start;		/* compressed: the file's reference, */
	u32 ref_end;		/* [start, end) in the uncompressed data */
	u8 compress;		/* enum btrfs_compression_type */
	bool read;		/* we submitted its read (a page of a folio we read) */
	bool promoted;		/* the owner's folio, promoted */
};

/*
 * Who read an extent first (DOC: btrfs lazy sharing).  Read and written
 * under fs_info->sf_owners' lock.
 */
struct btrfs_sf_owner {
	u64 root;		/* subvolume id */
	u64 ino;
	s64 base;		/* file position of the extent's first byte */
	u32 domain;		/* trust domain it was read in */
	bool shared;		/* a second file read it: use the extent cache */
};

/* A new extent cache: the one of domain 0, or of another domain. */
static struct inode *btrfs_sf_new_cache(struct btrfs_fs_info *fs_info)
{
	struct inode *inode;

	inode = new_inode(fs_info->sb);
	if (!inode)
		return NULL;
	inode->i_ino = BTRFS_FIRST_FREE_OBJECTID - 2;	/* never a real inode */
	inode->i_mode = S_IFREG;
	set_nlink(inode, 1);
	inode->i_size = OFFSET_MAX;
	inode->i_mapping->a_ops = &shared_folio_aops;
	/*
	 * Physical folios are user data: movable (migration takes the
	 * aliases along, see "DOC: Migration" in mm/shared_folio.c), subject
	 * to cpuset, charged to the reader; never __GFP_FS, since populate
	 * runs under the file's extent lock.
	 */
	mapping_set_gfp_mask(inode->i_mapping, GFP_HIGHUSER_MOVABLE & ~__GFP_FS);
	/* Large physical folios: DOC: btrfs extent cache index space. */
	mapping_set_large_folios(inode->i_mapping);
	/*
	 * The physical folios' reads are issued for this inode (see
	 * btrfs_sf_queue_read()): checksum lookup and repair need a root,
	 * and go by logical address, so the tree root serves.
	 */
	BTRFS_I(inode)->root = btrfs_grab_root(fs_info->tree_root);
	return inode;
}

static void btrfs_sf_free_cache(struct inode *inode)
{
	struct btrfs_root *root;

	/* Waits for the reads in flight: their folios are locked. */
	truncate_inode_pages_final(inode->i_mapping);
	root = BTRFS_I(inode)->root;
	/* btrfs_drop_inode() and btrfs_evict_inode() see no root: no items. */
	BTRFS_I(inode)->root = NULL;
	iput(inode);
	btrfs_put_root(root);
}

int btrfs_sf_init(struct btrfs_fs_info *fs_info)
{
	struct inode *inode;

	xa_init(&fs_info->sf_caches);
	xa_init(&fs_info->sf_subvol_domain);
	xa_init_flags(&fs_info->sf_owners, XA_FLAGS_ACCOUNT);
	xa_init_flags(&fs_info->sf_phases, XA_FLAGS_ACCOUNT);
	mutex_init(&fs_info->sf_promote_mutex);
	atomic_long_set(&fs_info->sf_nr_owners, 0);
	atomic_long_set(&fs_info->sf_decompressions, 0);
	xa_init(&fs_info->sf_snap_src);
	mutex_init(&fs_info->sf_domain_mutex);
	inode = btrfs_sf_new_cache(fs_info);
	if (!inode)
		return -ENOMEM;
	fs_info->sf_inode = inode;
	fs_info->sf_enabled = true;
	fs_info->sf_lazy = true;
	fs_info->sf_max_order = min_t(unsigned int, BTRFS_SF_MAX_ORDER,
				      MAX_PAGECACHE_ORDER);
	fs_info->sf_large_aliases = true;
	return 0;
}

/* Forget the records of the extents starting in [@first, @last]. */
static void btrfs_sf_forget_owners(struct btrfs_fs_info *fs_info,
				   unsigned long first, unsigned long last)
{
	struct btrfs_sf_owner *o;
	unsigned long key;

	xa_for_each_range(&fs_info->sf_owners, key, o, first, last) {
		/* Readers copy a record under the lock: free it after. */
		if (xa_erase(&fs_info->sf_owners, key) == o) {
			kfree(o);
			atomic_long_dec(&fs_info->sf_nr_owners);
		}
		cond_resched();
	}
}

void btrfs_sf_exit(struct btrfs_fs_info *fs_info)
{
	struct inode *inode = fs_info->sf_inode;
	unsigned long domain;

	if (!inode)
		return;
	fs_info->sf_enabled = false;
	xa_for_each(&fs_info->sf_caches, domain, inode)
		btrfs_sf_free_cache(inode);
	xa_destroy(&fs_info->sf_caches);
	xa_destroy(&fs_info->sf_subvol_domain);
	btrfs_sf_forget_owners(fs_info, 0, ULONG_MAX);
	xa_destroy(&fs_info->sf_owners);
	xa_destroy(&fs_info->sf_phases);
	xa_destroy(&fs_info->sf_snap_src);
	btrfs_sf_free_cache(fs_info->sf_inode);
	fs_info->sf_inode = NULL;
}

/**
 * btrfs_sf_domain() - the trust domain of a subvolume
 * @fs_info: the filesystem
 * @subvolid: the subvolume's root objectid
 *
 * Return: its domain, 0 unless set (DOC: btrfs trust domains).
 */
u32 btrfs_sf_domain(struct btrfs_fs_info *fs_info, u64 subvolid)
{
	void *entry = xa_load(&fs_info->sf_subvol_domain, subvolid);

	return entry ? xa_to_value(entry) : 0;
}

/*
 * The extent cache of @inode's trust domain, made on first use; NULL if it
 * cannot be made (the page is then read privately).  Called under the
 * file's invalidate lock, which a change of its subvolume's domain waits
 * for.
 */
static struct inode *btrfs_sf_cache(struct btrfs_inode *inode, u32 *domainp)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	u32 domain = btrfs_sf_domain(fs_info, btrfs_root_id(inode->root));
	struct inode *cache;

	*domainp = domain;
	if (!domain)
		return fs_info->sf_inode;
	cache = xa_load(&fs_info->sf_caches, domain);
	if (cache)
		return cache;
	mutex_lock(&fs_info->sf_domain_mutex);
	cache = xa_load(&fs_info->sf_caches, domain);
	if (!cache && READ_ONCE(fs_info->sf_enabled)) {
		/* Under the file's invalidate lock: no reclaim into the fs. */
		unsigned int nofs = memalloc_nofs_save();

		cache = btrfs_sf_new_cache(fs_info);
		if (cache && xa_err(xa_store(&fs_info->sf_caches, domain, cache,
					     GFP_NOFS))) {
			btrfs_sf_free_cache(cache);
			cache = NULL;
		}
		memalloc_nofs_restore(nofs);
	}
	mutex_unlock(&fs_info->sf_domain_mutex);
	return cache;
}

/*
 * Remove the aliases of every cached file of @root (see the DOC above).
 * The invalidate lock is taken for every file, also one with nothing
 * cached yet: a populate may have read the old domain and be waiting for
 * its read, and the lock's release orders the new domain before any
 * populate that starts after.
 */
static void btrfs_sf_detach_root(struct btrfs_root *root)
{
	struct btrfs_inode *inode;
	u64 min_ino = 0;

	while ((inode = btrfs_find_first_inode(root, min_ino))) {
		struct address_space *mapping = inode->vfs_inode.i_mapping;

		min_ino = btrfs_ino(inode) + 1;
		if (S_ISREG(inode->vfs_inode.i_mode)) {
			filemap_invalidate_lock(mapping);
			if (mapping->nrpages)
				shared_folio_detach_mapping(mapping);
			filemap_invalidate_unlock(mapping);
		}
		iput(&inode->vfs_inode);
		cond_resched();
	}
}

/*
 * Set @root's domain and make it hold: no allocation failure may leave the
 * subvolume sharing with domain 0 (__GFP_NOFAIL: one xarray node).
 */
static void __btrfs_sf_set_domain(struct btrfs_root *root, u32 domain)
{
	struct btrfs_fs_info *fs_info = root->fs_info;
	u64 subvolid = btrfs_root_id(root);

	mutex_lock(&fs_info->sf_domain_mutex);
	if (btrfs_sf_domain(fs_info, subvolid) == domain) {
		mutex_unlock(&fs_info->sf_domain_mutex);
		return;
	}
	if (domain)
		xa_store(&fs_info->sf_subvol_domain, subvolid,
			 xa_mk_value(domain), GFP_KERNEL | __GFP_NOFAIL);
	else
		xa_erase(&fs_info->sf_subvol_domain, subvolid);
	mutex_unlock(&fs_info->sf_domain_mutex);
	btrfs_sf_detach_root(root);
}

/**
 * btrfs_sf_set_domain() - move a subvolume to a trust domain
 * @fs_info: the filesystem
 * @subvolid: the subvolume's root objectid
 * @domain: its new domain (0: the default, shared by every subvolume)
 *
 * Context: process context; sleeps.
 * Return: 0, -ENOENT if there is no such subvolume (domain 0 then only
 * forgets an entry), -EOPNOTSUPP without an extent cache.
 */
int btrfs_sf_set_domain(struct btrfs_fs_info *fs_info, u64 subvolid, u32 domain)
{
	struct btrfs_root *root;

	if (!fs_info->sf_inode)
		return -EOPNOTSUPP;
	if (!is_fstree(subvolid))
		return -ENOENT;
	root = btrfs_get_fs_root(fs_info, subvolid, true);
	if (IS_ERR(root)) {
		/* A subvolume that is gone: forget its entry. */
		if (!domain && xa_erase(&fs_info->sf_subvol_domain, subvolid))
			return 0;
		return PTR_ERR(root);
	}
	__btrfs_sf_set_domain(root, domain);
	btrfs_put_root(root);
	return 0;
}

/**
 * btrfs_sf_subvol_created() - put a new subvolume in its trust domain
 * @parent: the subvolume it was created in
 * @src: the subvolume it is a snapshot of, or NULL
 * @root: the new subvolume
 *
 * The domain of @parent, or if that is 0 the domain of @src (DOC: btrfs
 * trust domains).  The new subvolume is already reachable: anything
 * shared from it meanwhile is removed.
 */
void btrfs_sf_subvol_created(struct btrfs_root *parent, struct btrfs_root *src,
			     struct btrfs_root *root)
{
	struct btrfs_fs_info *fs_info = root->fs_info;
	u32 domain;

	if (!fs_info->sf_inode)
		return;
	/* Where pages cached before the snapshot are (DOC: btrfs lazy sharing). */
	if (src)
		xa_store(&fs_info->sf_snap_src, btrfs_root_id(root),
			 xa_mk_value(btrfs_root_id(src)), GFP_KERNEL);
	domain = btrfs_sf_domain(fs_info, btrfs_root_id(parent));
	if (!domain && src)
		domain = btrfs_sf_domain(fs_info, btrfs_root_id(src));
	if (domain)
		__btrfs_sf_set_domain(root, domain);
}

static bool btrfs_sf_inode_eligible(struct btrfs_inode *inode)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;

	return READ_ONCE(fs_info->sf_enabled) && fs_info->sf_inode &&
	       fs_info->sectorsize == PAGE_SIZE &&
	       S_ISREG(inode->vfs_inode.i_mode) &&
	       !(inode->flags & (BTRFS_INODE_NODATASUM | BTRFS_INODE_NODATACOW)) &&
	       !IS_VERITY(&inode->vfs_inode) &&
	       !btrfs_is_free_space_inode(inode) &&
	       !btrfs_is_data_reloc_root(inode->root);
}

static bool btrfs_sf_em_eligible(const struct extent_map *em)
{
	if (em->disk_bytenr >= EXTENT_MAP_LAST_BYTE ||
	    (em->flags & EXTENT_FLAG_PREALLOC))
		return false;
	/*
	 * A compressed reference must lie inside its extent's data: the
	 * tree-checker does not check that, and beyond it the page would be
	 * another extent's region.
	 */
	if (extent_map_is_compressed(em))
		return em->disk_bytenr < BTRFS_SF_COMP_LIMIT &&
		       em->ram_bytes <= BTRFS_MAX_UNCOMPRESSED &&
		       PAGE_ALIGNED(em->ram_bytes) &&
		       em->offset + em->len <= em->ram_bytes;
	return btrfs_extent_map_block_start(em) + em->len <= BTRFS_SF_PHASED_LIMIT;
}

/* The region of the compressed extent at @disk_bytenr. */
static u64 btrfs_sf_region(const struct btrfs_fs_info *fs_info, u64 disk_bytenr)
{
	return BTRFS_SF_COMP_BASE +
	       (disk_bytenr >> fs_info->sectorsize_bits) * BTRFS_MAX_UNCOMPRESSED;
}

/*
 * The phase of the granule of logical addresses @granule, or -1 if none
 * is recorded (DOC: btrfs extent cache index space).
 */
static long btrfs_sf_phase(struct btrfs_fs_info *fs_info, u64 granule)
{
	void *entry = xa_load(&fs_info->sf_phases, granule);

	return entry ? xa_to_value(entry) : -1;
}

/*
 * The same, recorded as @want if there is no record yet; -1 if it cannot
 * be recorded (no memory).
 */
static long btrfs_sf_phase_record(struct btrfs_fs_info *fs_info, u64 granule,
				  unsigned long want)
{
	void *old;

	old = xa_cmpxchg(&fs_info->sf_phases, granule, NULL, xa_mk_value(want),
			 GFP_NOFS);
	if (xa_is_err(old))
		return -1;
	return old ? xa_to_value(old) : want;
}

/* Where the page at logical address @logical lives, in a granule of @phase. */
static u64 btrfs_sf_phased_pos(u64 logical, unsigned long phase)
{
	const enum btrfs_sf_layout space = BTRFS_SF_PHASE_SPACE_SHIFT;

	return ((u64)phase << space) + logical + ((u64)phase << PAGE_SHIFT);
}

/*
 * Where the data at file position @off (page aligned) of eligible @em
 * lives in the extent cache (DOC: btrfs extent cache index space): in
 * *@pos, and for uncompressed data its logical address in *@logical.
 * With @record, a granule without a phase gets the one that aligns this
 * file's pages; without, such a page has no place yet.  False if it has
 * none.
 */
static bool btrfs_sf_cache_pos(struct btrfs_fs_info *fs_info,
			       const struct extent_map *em, u64 off, bool record,
			       u64 *pos, u64 *logical)
{
	u64 xoff = em->offset + (off - em->start);	/* in the extent's data */
	u64 granule, in;
	long phase;

	if (extent_map_is_compressed(em)) {
		*pos = btrfs_sf_region(fs_info, em->disk_bytenr) + xoff;
		*logical = 0;
		return true;
	}
	*logical = em->disk_bytenr + xoff;
	granule = *logical >> BTRFS_SF_GRANULE_SHIFT;
	phase = btrfs_sf_phase(fs_info, granule);
	if (phase < 0 && record) {
		/* This file's index of the granule's first page, mod 512. */
		in = (*logical & (BIT_ULL(BTRFS_SF_GRANULE_SHIFT) - 1)) >> PAGE_SHIFT;
		phase = btrfs_sf_phase_record(fs_info, granule,
					      ((off >> PAGE_SHIFT) - in) &
					      (BTRFS_SF_GRANULE_PAGES - 1));
	}
	if (phase < 0)
		return false;
	*pos = btrfs_sf_phased_pos(*logical, phase);
	return true;
}

/*
 * Does @cache hold any page of @em's data?  Each granule of an
 * uncompressed extent's data is a range of its own.
 */
static bool btrfs_sf_cache_has_em(struct btrfs_fs_info *fs_info,
				  struct inode *cache, const struct extent_map *em)
{
	u64 pos, logical, end, off = em->start;

	while (off < btrfs_extent_map_end(em)) {
		if (!btrfs_sf_cache_pos(fs_info, em, off, false, &pos, &logical)) {
			/* No phase: nothing of this granule is cached. */
			end = round_up(logical + 1, BIT_ULL(BTRFS_SF_GRANULE_SHIFT));
			off += end - logical;
			continue;
		}
		end = extent_map_is_compressed(em) ? pos + em->len :
		      pos + round_up(logical + 1, BIT_ULL(BTRFS_SF_GRANULE_SHIFT)) - logical;
		end = min(end, pos + btrfs_extent_map_end(em) - off);
		if (filemap_range_has_page(cache->i_mapping, pos, end - 1))
			return true;
		off += end - pos;
	}
	return false;
}

/*
 * References to the data extent at @bytenr in the commit root: no
 * transaction, no tree locks (need_commit_sem), so safe under the file's
 * extent range lock.  0 if there is no such extent item.
 */
static int btrfs_sf_extent_refs(struct btrfs_fs_info *fs_info, u64 bytenr,
				u64 num_bytes, u64 *refs)
{
	struct btrfs_key key = {
		.objectid = bytenr,
		.type = BTRFS_EXTENT_ITEM_KEY,
		.offset = num_bytes,
	};
	struct btrfs_path *path;
	int ret;

	path = btrfs_alloc_path();
	if (!path)
		return -ENOMEM;
	path->search_commit_root = 1;
	path->skip_locking = 1;
	path->need_commit_sem = 1;
	ret = btrfs_search_slot(NULL, btrfs_extent_root(fs_info, bytenr), &key,
				path, 0, 0);
	if (ret == 0) {
		struct extent_buffer *leaf = path->nodes[0];
		struct btrfs_extent_item *ei;

		if (btrfs_item_size(leaf, path->slots[0]) < sizeof(*ei)) {
			ret = -EUCLEAN;
		} else {
			ei = btrfs_item_ptr(leaf, path->slots[0], struct btrfs_extent_item);
			*refs = btrfs_extent_refs(leaf, ei);
		}
	} else if (ret > 0) {
		*refs = 0;
		ret = 0;
	}
	btrfs_free_path(path);
	return ret;
}

/*
 * Could another file reference @em's data?  Sharing data nobody else
 * references only costs (a physical folio, an alias and a descriptor per
 * page instead of one folio), so such extents are read privately, as on a
 * kernel without this.  Data is shared with other files only through:
 *
 * - a snapshot: the subvolume (or the one it is a snapshot of) was
 *   snapshotted after the extent was written, that is its generation is at
 *   most the root's last_snapshot;
 * - a clone or dedupe: the extent item counts more than one reference in
 *   the commit root, or, for one not committed yet, this inode took part
 *   in a remap since it was loaded (BTRFS_INODE_SF_REMAPPED).
 *
 * An extent written in the running transaction has no other reference
 * unless a remap flagged this inode.  Anything uncertain (a lookup error,
 * a merged map whose extent item is not found) counts as shared: sharing
 * is always correct, only sometimes wasteful.
 */
static bool btrfs_sf_em_shared(struct btrfs_inode *inode, const struct extent_map *em)
{
	struct btrfs_root *root = inode->root;
	u64 refs = 0;
	int ret;

	if (em->generation <= btrfs_root_last_snapshot(&root->root_item))
		return true;
	if (test_bit(BTRFS_INODE_SF_REMAPPED, &inode->runtime_flags))
		return true;
	if (em->generation > btrfs_get_last_trans_committed(root->fs_info))
		return false;
	ret = btrfs_sf_extent_refs(root->fs_info, em->disk_bytenr,
				   em->disk_num_bytes, &refs);
	return ret || refs != 1;
}

/* Remember that [start, end) of @inode shares nothing. */
static void btrfs_sf_set_private(struct btrfs_inode *inode, u64 start, u64 end)
{
	WRITE_ONCE(inode->sf_private_snap,
		   btrfs_root_last_snapshot(&inode->root->root_item));
	WRITE_ONCE(inode->sf_private_start, start);
	WRITE_ONCE(inode->sf_private_end, end);
}

/* Is [start, end) inside the range known to share nothing? */
static bool btrfs_sf_known_private(struct btrfs_inode *inode, u64 start, u64 end)
{
	return READ_ONCE(inode->sf_private_end) >= end &&
	       READ_ONCE(inode->sf_private_start) <= start &&
	       READ_ONCE(inode->sf_private_snap) ==
			btrfs_root_last_snapshot(&inode->root->root_item) &&
	       !test_bit(BTRFS_INODE_SF_REMAPPED, &inode->runtime_flags);
}

/* @em shares nothing, or is read privately: a run of them extends the range. */
static void btrfs_sf_add_private(struct btrfs_inode *inode,
				 const struct extent_map *em)
{
	if (READ_ONCE(inode->sf_private_end) == em->start &&
	    btrfs_sf_known_private(inode, em->start - 1, em->start))
		WRITE_ONCE(inode->sf_private_end, btrfs_extent_map_end(em));
	else
		btrfs_sf_set_private(inode, em->start, btrfs_extent_map_end(em));
}

/**
 * btrfs_sf_note_remap() - a clone or dedupe is about to share extents
 * @src: the source inode
 * @off: the source position
 * @dst: the destination inode
 * @destoff: the destination position
 *
 * From now on reads of either consider sharing again, whatever was
 * decided before.  Called with both inodes' i_rwsem and i_mmap_lock held,
 * which populate does not take: a populate running meanwhile holds the
 * file's extent range lock across its lookups and inserts, so it sees the
 * extents either before the remap swaps them (and the remap's truncate of
 * the range removes what it installed) or after; the flag it may miss
 * only costs sharing until the next read.
 */
void btrfs_sf_note_remap(struct btrfs_inode *src, u64 off,
			 struct btrfs_inode *dst, u64 destoff)
{
	/* Where pages cached before the clone may be (DOC: btrfs lazy sharing). */
	if (src != dst) {
		WRITE_ONCE(dst->sf_src_ino, btrfs_ino(src));
		WRITE_ONCE(dst->sf_src_delta, (s64)off - (s64)destoff);
		/* Published last; btrfs_sf_candidate() reads it first. */
		smp_store_release(&dst->sf_src_root, btrfs_root_id(src->root));
	}
	set_bit(BTRFS_INODE_SF_REMAPPED, &src->runtime_flags);
	set_bit(BTRFS_INODE_SF_REMAPPED, &dst->runtime_flags);
	btrfs_sf_set_private(src, 0, 0);
	btrfs_sf_set_private(dst, 0, 0);
}

/* Does @mapping hold an alias in [@first, @last]? */
static bool btrfs_sf_range_has_alias(struct address_space *mapping,
				     pgoff_t first, pgoff_t last)
{
	XA_STATE(xas, &mapping->i_pages, first);
	struct folio *folio;
	bool found = false;

	rcu_read_lock();
	xas_for_each(&xas, folio, last) {
		if (xas_retry(&xas, folio) || xa_is_value(folio))
			continue;
		if (folio_is_sf_alias(folio)) {
			found = true;
			break;
		}
		if (need_resched()) {
			xas_pause(&xas);
			cond_resched_rcu();
		}
	}
	rcu_read_unlock();
	return found;
}

/**
 * btrfs_sf_dedupe_done() - a dedupe replaced the extents under a range
 * @dst: the destination inode, i_rwsem and i_mmap_lock held exclusively
 * @pos: start of the range
 * @len: its length
 *
 * The bytes are the same, so a kernel without shared folios keeps the
 * destination's page cache.  Its aliases, though, describe physical folios
 * of the old extent, which this dedupe may have freed: they would stay
 * until the commit invalidates that extent, a state any user could create at
 * will.  If the range holds an alias, drop the range's page cache as a
 * clone does; the next read shares the source's extent.
 */
void btrfs_sf_dedupe_done(struct btrfs_inode *dst, u64 pos, u64 len)
{
	struct address_space *mapping = dst->vfs_inode.i_mapping;
	u64 start = round_down(pos, PAGE_SIZE);
	u64 end = round_up(pos + len, PAGE_SIZE) - 1;

	/*
	 * Private pages hold the file's own bytes, still right: keep them, as
	 * a kernel without shared folios does.  Even with sharing switched
	 * off now, aliases made before may remain.  An alias added after
	 * this scan describes the new extent: populate looks extents up and
	 * installs aliases under the file's extent range lock, which the
	 * dedupe held while it swapped them.
	 */
	if (!mapping->nrpages ||
	    !btrfs_sf_range_has_alias(mapping, start >> PAGE_SHIFT, end >> PAGE_SHIFT))
		return;
	truncate_inode_pages_range(mapping, start, end);
}

/*
 * Completion of a physical-folio read.  The read is issued for the extent
 * cache's inode, not for the file whose read() started it: the
 * asynchronous window's reads outlive that read(), and checksum
 * verification and repair at completion use bbio->inode and its root.
 * The extent-cache inode lives until btrfs_sf_exit(), which waits for
 * these folios (they stay locked until here), so no file's eviction has to
 * wait for the disk.
 */
static void btrfs_sf_end_read(struct btrfs_bio *bbio)
{
	bool uptodate = !bbio->bio.bi_status;
	struct folio_iter fi;

	bio_for_each_folio_all(fi, &bbio->bio) {
		if (uptodate)
			folio_mark_uptodate(fi.folio);
		folio_unlock(fi.folio);
	}
	bio_put(&bbio->bio);
}

struct btrfs_sf_bio {
	struct btrfs_bio *bbio;
	u64 next_bytenr;
	u64 next_cpos;
};

static void btrfs_sf_submit(struct btrfs_sf_bio *sb)
{
	if (sb->bbio)
		btrfs_submit_bbio(sb->bbio, 0);
	sb->bbio = NULL;
}

/*
 * Queue the read of locked physical @folio, of any order, at @bytenr.  The
 * bio belongs to the extent cache's inode, whose "file offset" is the
 * folio's position in the extent cache (DOC: btrfs extent cache index
 * space: the logical address plus its phase's offset, or a compressed
 * extent's region): repair and its messages name that position.
 */
static void btrfs_sf_queue_read(struct btrfs_fs_info *fs_info, struct btrfs_sf_bio *sb,
				struct inode *cache, struct folio *folio, u64 bytenr,
				u64 cpos)
{
	size_t len = folio_size(folio);

	/* One bio is contiguous on disk, and in the extent cache. */
	if (sb->bbio && (bytenr != sb->next_bytenr || cpos != sb->next_cpos))
		btrfs_sf_submit(sb);
	if (sb->bbio && !bio_add_folio(&sb->bbio->bio, folio, len, 0))
		btrfs_sf_submit(sb);
	if (!sb->bbio) {
		sb->bbio = btrfs_bio_alloc(BIO_MAX_VECS, REQ_OP_READ, fs_info,
					   btrfs_sf_end_read, NULL);
		sb->bbio->bio.bi_iter.bi_sector = bytenr >> SECTOR_SHIFT;
		sb->bbio->inode = BTRFS_I(cache);
		sb->bbio->file_offset = cpos;
		bio_add_folio_nofail(&sb->bbio->bio, folio, len, 0);
	}
	sb->next_bytenr = bytenr + len;
	sb->next_cpos = cpos + len;
}

struct btrfs_sf_batch {
	struct btrfs_sf_item *items;
	unsigned long hits;
	unsigned long misses;
	bool read;		/* a waited-for page was read from disk */
	pgoff_t marker;		/* a waited-for page carried the marker */
	bool marked;
	bool wait;		/* installing, not the asynchronous window */
	bool seq;		/* the read follows the reader's previous one */
	/*
	 * The pages the read asks for; around them, in the batch's range,
	 * only pages whose physical folio is cached already, or that the
	 * owner caches (to be promoted or collapsed), so that a large alias
	 * covers them too (DOC: btrfs large aliases).  A sequential reader
	 * (@seq) is about to read them: they are promoted and installed as
	 * the read's are.  Around another read, a page the extent cache does
	 * not hold is taken only into a collapse whose block holds a page of
	 * the read (btrfs_sf_outside_ok()), and a page is installed only in
	 * an alias that holds one (btrfs_sf_install()).
	 */
	pgoff_t req_first, req_last;
	kuid_t reader_uid;	/* the owner of the file being read */
	u32 domain;		/* the reader's, whose extent cache is used */
	/* The first reader of an extent of this batch, for promotion. */
	struct btrfs_inode *owner;
	s64 owner_delta;	/* its file position minus the reader's */
};

/* Does [@first, @last] hold a page that @b's read asks for? */
static bool btrfs_sf_in_read(const struct btrfs_sf_batch *b, pgoff_t first,
			     pgoff_t last)
{
	return last >= b->req_first && first <= b->req_last;
}

/* Does @owner cache a private folio (not an alias) at file position @pos? */
static bool btrfs_sf_owner_has_private(struct btrfs_inode *owner, u64 pos)
{
	struct folio *folio;

	rcu_read_lock();
	folio = xa_load(&owner->vfs_inode.i_mapping->i_pages, pos >> PAGE_SHIFT);
	rcu_read_unlock();
	/* Only compared: a stale answer costs a lookup or a read. */
	return folio && !xa_is_value(folio) && !folio_is_sf_alias(folio);
}

/*
 * Promote @owner's private folio at file position @pos, whose data lives
 * at @cpos in the extent cache, to the physical folio at @cpos in @cache,
 * the extent cache of trust domain @domain (DOC: btrfs lazy sharing).
 * Every lock of the owner is only try-locked: the caller holds the
 * reader's extent range lock, and the owner may be promoting from the
 * reader.  Called under fs_info->sf_promote_mutex, so that two readers
 * never race for one folio: the loser's reference would fail the
 * winner's refcount freeze, and both would read the disk instead.
 *
 * Return: the physical folio, referenced and unlocked, or NULL.
 */
static struct folio *btrfs_sf_promote(struct btrfs_inode *owner, u64 pos,
				      struct inode *cache, u32 domain, u64 cpos)
{
	struct btrfs_fs_info *fs_info = owner->root->fs_info;
	struct address_space *mapping = owner->vfs_inode.i_mapping;
	struct extent_state *cached_state = NULL;
	u64 end = pos + PAGE_SIZE - 1;
	struct extent_map *em;
	struct folio *folio;
	bool ok = false;

	/*
	 * Truncation and hole punching of the owner stay out: they take one
	 * of these exclusively, and truncate_inode_pages_range() relies on a
	 * folio's index not changing while it waits for the folio lock.
	 */
	if (!filemap_invalidate_trylock_shared(mapping))
		return NULL;
	if (!down_read_trylock(&owner->i_mmap_lock)) {
		filemap_invalidate_unlock_shared(mapping);
		return NULL;
	}
	/*
	 * Not into another trust domain's cache: a change of the owner's
	 * domain sets it, then detaches the owner's aliases under its
	 * invalidate lock, so either it sees this alias or we see the new
	 * domain.  The reader's domain holds while it populates.
	 */
	folio = NULL;
	if (btrfs_sf_domain(fs_info, btrfs_root_id(owner->root)) != domain)
		goto out;
	/* FGP_NOWAIT: a large alias there is neither waited for nor removed. */
	folio = __filemap_get_folio(mapping, pos >> PAGE_SHIFT, FGP_NOWAIT, 0);
	if (IS_ERR(folio)) {
		folio = NULL;
		goto out;
	}
	if (folio_is_sf_alias(folio) || !folio_trylock(folio))
		goto put;
	/* The page holding EOF may differ from the disk past EOF. */
	if (folio->mapping != mapping || !folio_test_uptodate(folio) ||
	    folio_test_dirty(folio) || folio_test_writeback(folio) ||
	    folio_test_ordered(folio) || errseq_check(&mapping->wb_err, 0) ||
	    pos + PAGE_SIZE > i_size_read(&owner->vfs_inode) ||
	    !btrfs_try_lock_extent(&owner->io_tree, pos, end, &cached_state))
		goto unlock;
	em = btrfs_get_extent(owner, NULL, pos, PAGE_SIZE);
	if (!IS_ERR(em)) {
		u64 epos, logical;

		ok = btrfs_sf_em_eligible(em) &&
		     btrfs_sf_cache_pos(fs_info, em, pos, false, &epos, &logical) &&
		     epos == cpos;
		btrfs_free_extent_map(em);
	}
	/*
	 * The owner's processes keep mapping the page, read-only, now
	 * through the alias (shared_folio_promote() moves the PTEs with
	 * migration entries).  Not an mlocked page: the owner's mlock would
	 * pin the other sharers' page.  Other references (beyond the
	 * xarray's, ours, the private data's, the PTEs' and one LRU batch's)
	 * would fail the move: not worth a walk of the owner's PTEs.
	 */
	if (folio_test_mlocked(folio) || folio_maybe_dma_pinned(folio) ||
	    folio_ref_count(folio) > 3 + folio_test_private(folio) +
				     folio_mapcount(folio))
		ok = false;
	if (ok) {
		clear_folio_extent_mapped(folio);
		ok = !shared_folio_promote(folio, cache->i_mapping,
					   cpos >> PAGE_SHIFT, &fs_info->sf_stats,
					   BTRFS_SF_LOCKED_GFP);
		if (!ok)
			set_folio_extent_mapped(folio);
	}
	btrfs_unlock_extent(&owner->io_tree, pos, end, &cached_state);
unlock:
	folio_unlock(folio);
	if (ok)
		goto out;
put:
	folio_put(folio);
	folio = NULL;
out:
	up_read(&owner->i_mmap_lock);
	filemap_invalidate_unlock_shared(mapping);
	return folio;
}

/*
 * Read the compressed extent of @item into the extent cache: every page of
 * the file's reference to it that is missing or failed before, in one
 * compressed read (DOC: btrfs extent cache index space).  Not the rest of
 * the region: nobody may read it, and the reader's memcg would pay for it.
 * Not the pages @b's owner caches privately: they are to be promoted.
 * @item gets its page, referenced, in flight or cached.  The folios stay
 * locked until btrfs_sf_end_read(); pages without memory are left to the
 * private path.
 *
 * The region's range lock in the extent cache's io_tree keeps two readers
 * of one extent from mapping it at once; its holder only try-locks folios,
 * so waiting for it under the batch's folio locks is safe.  The extent map
 * ends at file_offset + bi_size, where add_ra_bio_pages() would start
 * adding pages of its own (it would attach btrfs private data to them and
 * lock the range we hold): with pages skipped in between, the last page
 * of the bio ends later than that.
 */
static void btrfs_sf_read_compressed(struct btrfs_fs_info *fs_info,
				     struct inode *cache, struct btrfs_sf_batch *b,
				     struct btrfs_sf_item *item, bool mark)
{
	struct btrfs_inode *ci = BTRFS_I(cache);
	struct address_space *ec = cache->i_mapping;
	u64 base = btrfs_sf_region(fs_info, item->disk_bytenr);
	u64 end = base + item->ram_len - 1;
	struct extent_state *cached_state = NULL;
	struct btrfs_bio *bbio = NULL;
	struct extent_map *em;
	struct folio *folio;
	u64 pos;
	int ret;

	em = alloc_extent_map();
	if (!em)
		return;
	em->start = base;
	em->offset = 0;
	em->disk_bytenr = item->disk_bytenr;
	em->disk_num_bytes = item->disk_len;
	em->ram_bytes = item->ram_len;
	extent_map_set_compression(em, item->compress);

	btrfs_lock_extent(&ci->io_tree, base, end, &cached_state);
	for (pos = base + item->ref_start; pos < base + item->ref_end; pos += PAGE_SIZE) {
		if (pos != item->cpos && b->owner && item->owner_pos >= 0 &&
		    btrfs_sf_owner_has_private(b->owner,
					       item->owner_pos + (pos - item->cpos)))
			continue;
		folio = filemap_get_folio(ec, pos >> PAGE_SHIFT);
		if (!IS_ERR(folio)) {
			if (folio_test_uptodate(folio) || !folio_trylock(folio))
				goto keep;
			if (folio_test_uptodate(folio) || folio->mapping != ec) {
				folio_unlock(folio);
				goto keep;
			}
		} else {
			folio = filemap_alloc_folio(readahead_gfp_mask(ec), 0);
			if (!folio)
				break;
			if (filemap_add_folio(ec, folio, pos >> PAGE_SHIFT,
					      readahead_gfp_mask(ec))) {
				folio_put(folio);
				continue;
			}
		}
		/* Locked and not uptodate: new, or an earlier read failed. */
		if (!bbio) {
			bbio = btrfs_bio_alloc(BIO_MAX_VECS, REQ_OP_READ, fs_info,
					       btrfs_sf_end_read, NULL);
			bbio->bio.bi_iter.bi_sector = item->disk_bytenr >> SECTOR_SHIFT;
			bbio->inode = ci;
			bbio->file_offset = pos;
		}
		bio_add_folio_nofail(&bbio->bio, folio, PAGE_SIZE, 0);
		if (pos == item->cpos) {
			item->read = true;
			if (mark)
				folio_set_readahead(folio);
		}
keep:
		/* The page cache's reference and the lock keep the others. */
		if (pos != item->cpos) {
			folio_put(folio);
			continue;
		}
		/* Another reader's, in flight: no hit either. */
		if (!item->read)
			item->read = !folio_test_uptodate(folio);
		item->folio = folio;
	}
	if (bbio) {
		/* The extent map is only looked up while submitting. */
		em->len = bbio->file_offset + bbio->bio.bi_iter.bi_size - base;
		ret = btrfs_replace_extent_map_range(ci, em, false);
		if (ret) {
			btrfs_bio_end_io(bbio, errno_to_blk_status(ret));
		} else {
			atomic_long_inc(&fs_info->sf_decompressions);
			btrfs_submit_compressed_read(bbio);
			btrfs_drop_extent_map_range(ci, base, end, false);
		}
	}
	btrfs_unlock_extent(&ci->io_tree, base, end, &cached_state);
	btrfs_free_extent_map(em);
}

/*
 * Find or create the physical folio for @item->cpos; submit its read if
 * it is not uptodate and nobody else is reading it.  @mark sets the
 * readahead marker on a folio we read: the reader reaching it starts the
 * next asynchronous window.
 */
/*
 * The order of a new physical folio for @items[0] and the @nr - 1 items
 * after it (DOC: btrfs extent cache index space): the largest, up to
 * @max_order, whose block of the extent cache starts at @items[0] and is
 * made of the next items, pages of one uncompressed extent map in a row,
 * none of which the batch's owner caches privately (it is promoted, not
 * read again).  So the folio holds only pages the batch reads.  With
 * @collapse, the order of a folio to copy the owner's folios into
 * (btrfs_sf_collapse()): every page the owner's, at its positions in a
 * row, and at least 1, or 0.
 */
static unsigned int btrfs_sf_order(const struct btrfs_sf_batch *b,
				   const struct btrfs_sf_item *items,
				   unsigned int nr, unsigned int max_order,
				   bool collapse)
{
	pgoff_t ecidx = items[0].cpos >> PAGE_SHIFT;
	unsigned int order = 0, i;
	bool private;

	if (items[0].compress || (collapse && items[0].owner_pos < 0))
		return 0;
	for (; order < max_order; order++) {
		unsigned int n = 2U << order;

		if (n > nr || !IS_ALIGNED(ecidx, n))
			break;
		for (i = n / 2; i < n; i++) {
			if (items[i].compress ||
			    items[i].disk_bytenr != items[0].disk_bytenr ||
			    items[i].cpos != items[0].cpos + ((u64)i << PAGE_SHIFT))
				return order;
			private = b->owner && items[i].owner_pos >= 0 &&
				  btrfs_sf_owner_has_private(b->owner, items[i].owner_pos);
			if (collapse ? !private || items[i].owner_pos !=
					items[0].owner_pos + ((s64)i << PAGE_SHIFT) :
				       private)
				return order;
		}
	}
	return order;
}

/*
 * Does @folio, an order-0 private folio of the owner's, hold its extent's
 * data as it is on disk, with nobody holding it (mlock, a DMA pin)?  Asked
 * without its lock by btrfs_sf_collapse_ok(), and again under it before
 * the copy.
 */
static bool btrfs_sf_collapsible(struct folio *folio)
{
	return folio_test_uptodate(folio) && !folio_test_dirty(folio) &&
	       !folio_test_writeback(folio) && !folio_test_ordered(folio) &&
	       !folio_test_mlocked(folio) && !folio_maybe_dma_pinned(folio);
}

/*
 * Copy the owner's private folio at @pos into @page; false if it cannot be
 * had as it is on disk, or is mapped (its PTEs would stay on the private
 * copy: the caller unmapped the block, and a fault mapped it again since).
 */
static bool btrfs_sf_collapse_one(struct btrfs_inode *owner, u64 pos,
				  struct page *page)
{
	struct address_space *mapping = owner->vfs_inode.i_mapping;
	struct folio *folio;
	bool ok;

	/* FGP_NOWAIT: a large alias there is neither waited for nor removed. */
	folio = __filemap_get_folio(mapping, pos >> PAGE_SHIFT, FGP_NOWAIT, 0);
	if (IS_ERR(folio))
		return false;
	ok = !folio_is_sf_alias(folio) && !folio_test_large(folio) &&
	     folio_trylock(folio);
	if (ok) {
		/*
		 * The owner reads the block through the extent cache from now
		 * on: a readahead mark on a folio it keeps (dirty, mapped)
		 * would read the collapsed pages after it privately.
		 */
		folio_clear_readahead(folio);
		/* As btrfs_sf_promote() asks, and not mapped at all. */
		ok = folio->mapping == mapping && !folio_mapped(folio) &&
		     btrfs_sf_collapsible(folio) &&
		     !copy_mc_highpage(page, &folio->page);
		folio_unlock(folio);
	}
	folio_put(folio);
	return ok;
}

/*
 * May the @n pages at @first of the owner's @mapping be collapsed (DOC:
 * btrfs lazy sharing)?  Asked before anything is allocated or locked, and
 * again by the copy under each folio's lock: every page cached, order 0,
 * clean, uptodate, not mlocked or pinned (a lockless look: a page that
 * changes meanwhile fails the copy), and, if the range is mapped, no VMA
 * over it that mlocks it (an mlock keeps its pages mapped: such a block
 * is promoted in place) or whose process is in a memcg other than the
 * reader's (the collapse zaps its PTEs, evicts folios that memcg may be
 * charged for, and charges the copy to the reader's).  False too if the
 * i_mmap lock is contended.
 */
static bool btrfs_sf_collapse_ok(struct address_space *mapping, pgoff_t first,
				 unsigned int n)
{
	XA_STATE(xas, &mapping->i_pages, first);
	struct vm_area_struct *vma;
	struct mem_cgroup *memcg;
	struct folio *folio;
	unsigned int seen = 0;
	bool ok = true;

	rcu_read_lock();
	xas_for_each(&xas, folio, first + n - 1) {
		if (xas_retry(&xas, folio))
			continue;
		if (xa_is_value(folio) || folio_is_sf_alias(folio) ||
		    folio_test_large(folio) || !btrfs_sf_collapsible(folio)) {
			ok = false;
			break;
		}
		seen++;
	}
	rcu_read_unlock();
	if (!ok || seen != n)
		return false;
	if (!mapping_mapped(mapping))
		return true;
	if (!i_mmap_trylock_read(mapping))
		return false;
	memcg = get_mem_cgroup_from_current();
	vma_interval_tree_foreach(vma, &mapping->i_mmap, first, first + n - 1) {
		struct mem_cgroup *other = get_mem_cgroup_from_mm(vma->vm_mm);

		ok = !(vma->vm_flags & VM_LOCKED) && other == memcg;
		mem_cgroup_put(other);
		if (!ok)
			break;
	}
	mem_cgroup_put(memcg);
	i_mmap_unlock_read(mapping);
	return ok;
}

/*
 * Promote a block of the owner's private folios by copying them into one
 * new large physical folio of the extent cache (DOC: btrfs lazy sharing):
 * promoting them in place would leave order-0 physical folios, and every
 * sharer an alias a page.  Only a block that the owner caches whole and
 * clean, that no VMA mlocks or maps from another memcg (its PTEs are
 * zapped before the copy: btrfs_sf_collapse_ok()), and whose extent the
 * owner still references there (checked under its extent range lock, as
 * btrfs_sf_promote() does).  The copy is of data on disk,
 * whatever the owner does to its folios
 * afterwards; those it does not map, dirty or lock then are evicted, so
 * that the data is cached once, and the owner reads it through the extent
 * cache from then on.  Called under fs_info->sf_promote_mutex.
 *
 * Return: how many items the new folio serves (each with a reference),
 * or 0.
 */
static unsigned int btrfs_sf_collapse(struct btrfs_fs_info *fs_info,
				      struct btrfs_sf_batch *b, struct inode *cache,
				      struct btrfs_sf_item *items, unsigned int nr,
				      unsigned int max_order)
{
	struct btrfs_inode *owner = b->owner;
	struct address_space *mapping = owner->vfs_inode.i_mapping;
	struct address_space *ec = cache->i_mapping;
	struct extent_state *cached_state = NULL;
	u64 pos = items[0].owner_pos, end, epos, logical;
	struct extent_map *em;
	struct folio *folio;
	unsigned int order, n, i;
	bool ok = false;

	/*
	 * Only between files of one owner: the first reader's folios leave
	 * its page cache, which another owner's read must not do to it (DOC:
	 * Sharers and tenants); across owners they are promoted in place.
	 */
	if (!uid_eq(owner->vfs_inode.i_uid, b->reader_uid))
		return 0;
	order = btrfs_sf_order(b, items, nr, max_order, true);
	if (!order)
		return 0;
	if (!btrfs_sf_collapse_ok(mapping, pos >> PAGE_SHIFT, 1U << order))
		return 0;
	/*
	 * A large folio that cannot be had gives way to the next order down,
	 * as for a read from the disk (btrfs_sf_get_physical()): a PMD-sized
	 * one often cannot, without reclaim.
	 */
	folio = filemap_alloc_folio(readahead_gfp_mask(ec), order);
	while (!folio && --order)	/* no reclaim under the promote mutex */
		folio = filemap_alloc_folio(readahead_gfp_mask(ec) &
					    ~__GFP_DIRECT_RECLAIM, order);
	if (!folio)
		return 0;
	n = 1U << order;
	end = pos + ((u64)n << PAGE_SHIFT) - 1;
	/* Truncation, hole punching and remapping of the owner stay out. */
	if (!filemap_invalidate_trylock_shared(mapping))
		goto free;
	if (!down_read_trylock(&owner->i_mmap_lock))
		goto unlock_invalidate;
	if (btrfs_sf_domain(fs_info, btrfs_root_id(owner->root)) != b->domain ||
	    end >= i_size_read(&owner->vfs_inode) ||
	    errseq_check(&mapping->wb_err, 0) ||
	    !btrfs_try_lock_extent(&owner->io_tree, pos, end, &cached_state))
		goto unlock_mmap;
	em = btrfs_get_extent(owner, NULL, pos, end + 1 - pos);
	if (!IS_ERR(em)) {
		ok = btrfs_sf_em_eligible(em) && !extent_map_is_compressed(em) &&
		     btrfs_extent_map_end(em) > end &&
		     btrfs_sf_cache_pos(fs_info, em, pos, false, &epos, &logical) &&
		     epos == items[0].cpos;
		btrfs_free_extent_map(em);
	}
	/*
	 * The owner's PTEs of the block go first (page-cache PTEs only:
	 * private COW copies stay); its processes fault the pages again
	 * through the extent cache, without I/O.  unmap_mapping_pages()
	 * waits for the i_mmap lock, the one lock of the owner not
	 * try-locked here: its writers (VMA changes) take no lock of ours.
	 */
	if (ok && mapping_mapped(mapping))
		unmap_mapping_pages(mapping, pos >> PAGE_SHIFT, n, false);
	for (i = 0; ok && i < n; i++)
		ok = btrfs_sf_collapse_one(owner, pos + ((u64)i << PAGE_SHIFT),
					   folio_page(folio, i));
	btrfs_unlock_extent(&owner->io_tree, pos, end, &cached_state);
unlock_mmap:
	up_read(&owner->i_mmap_lock);
unlock_invalidate:
	filemap_invalidate_unlock_shared(mapping);
	/* Locks it, puts it on the LRU, charges the reader's memcg. */
	if (!ok || filemap_add_folio(ec, folio, items[0].cpos >> PAGE_SHIFT,
				     readahead_gfp_mask(ec)))
		goto free;
	folio_mark_uptodate(folio);
	folio_unlock(folio);
	folio_ref_add(folio, n - 1);
	for (i = 0; i < n; i++) {
		items[i].folio = folio;
		items[i].promoted = true;
	}
	shared_folio_count_promotions(&fs_info->sf_stats, n);
	invalidate_mapping_pages(mapping, pos >> PAGE_SHIFT, end >> PAGE_SHIFT);
	return n;

free:
	folio_put(folio);
	return 0;
}

/*
 * The page of locked physical @folio that holds cache index @ecidx, or NULL
 * if it holds it no longer (split before it had a descriptor: a split of
 * one with a descriptor is refused, and the batch's references make one
 * fail anyway; kept as the check of a lookup's result).
 */
static struct page *btrfs_sf_page(struct folio *folio, pgoff_t ecidx)
{
	if (ecidx - folio->index >= folio_nr_pages(folio))
		return NULL;
	return folio_page(folio, ecidx - folio->index);
}

/*
 * May @items[0], which the extent cache does not hold, be read, promoted or
 * collapsed by @b?  Yes if it is a page of the read, or of a sequential
 * reader, which reads it next.  Around a random read, only as the start of
 * a collapse of the first reader's folios whose block holds a page of the
 * read: the large physical folio the read's pages would be in.  Otherwise
 * nobody asked for it.
 */
static bool btrfs_sf_outside_ok(const struct btrfs_sf_batch *b,
				const struct btrfs_sf_item *items,
				unsigned int nr, unsigned int max_order)
{
	unsigned int order;

	if (b->seq || btrfs_sf_in_read(b, items[0].index, items[0].index))
		return true;
	if (!max_order || !b->owner || items[0].owner_pos < 0 ||
	    !btrfs_sf_owner_has_private(b->owner, items[0].owner_pos))
		return false;
	order = btrfs_sf_order(b, items, nr, max_order, true);
	return order &&
	       btrfs_sf_in_read(b, items[0].index, items[(1U << order) - 1].index);
}

/*
 * Find or start reading the physical folio of @items[0]; a new folio may be
 * large and serve the items after it too (btrfs_sf_order()).  Returns how
 * many of the @nr items it served, at least 1; each holds a reference.
 */
static unsigned int btrfs_sf_get_physical(struct btrfs_inode *inode, struct inode *cache,
					  struct btrfs_sf_bio *sb, struct btrfs_sf_batch *b,
					  struct btrfs_sf_item *items, unsigned int nr,
					  bool mark)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct address_space *ec = cache->i_mapping;
	struct btrfs_sf_item *item = &items[0];
	pgoff_t ecidx = item->cpos >> PAGE_SHIFT;
	unsigned int order, max_order, i, n;
	struct folio *folio;
	int ret;

	max_order = min(READ_ONCE(fs_info->sf_max_order), mapping_max_folio_order(ec));
	order = btrfs_sf_order(b, items, nr, max_order, false);
again:
	folio = filemap_get_folio(ec, ecidx);
	/*
	 * memory_failure() is splitting it (sf_folio_detach_to_split()), or
	 * dropping its poisoned page, which our reference would make fail:
	 * the page is read privately.
	 */
	if (!IS_ERR(folio)) {
		struct page *page = btrfs_sf_page(folio, ecidx);

		if ((folio_test_large(folio) && folio_test_has_hwpoisoned(folio)) ||
		    (page && PageHWPoison(page))) {
			folio_put(folio);
			return 1;
		}
	}
	/* Not cached: may it be read, promoted or collapsed for this read? */
	if (IS_ERR(folio) && !btrfs_sf_outside_ok(b, items, nr, max_order))
		return 1;
	/*
	 * The first reader's cached copy, if it can be had; not speculatively:
	 * the asynchronous window leaves a page the owner has to the read
	 * that needs it, rather than read it from the disk.
	 */
	if (IS_ERR(folio) && b->owner && item->owner_pos >= 0 &&
	    btrfs_sf_owner_has_private(b->owner, item->owner_pos)) {
		struct folio *promoted = NULL;

		if (!b->wait)
			return 1;
		/* Readers of what this batch holds locked need not wait. */
		btrfs_sf_submit(sb);
		if (mutex_lock_killable(&fs_info->sf_promote_mutex))
			return 1;
		/* Another reader may have promoted it meanwhile. */
		folio = filemap_get_folio(ec, ecidx);
		/* A block of clean folios is copied into a large one. */
		n = 0;
		if (IS_ERR(folio) && max_order)
			n = btrfs_sf_collapse(fs_info, b, cache, items, nr, max_order);
		if (n) {
			mutex_unlock(&fs_info->sf_promote_mutex);
			return n;
		}
		if (IS_ERR(folio))
			promoted = btrfs_sf_promote(b->owner, item->owner_pos, cache,
						    b->domain, item->cpos);
		mutex_unlock(&fs_info->sf_promote_mutex);
		if (promoted) {
			item->folio = promoted;
			item->promoted = true;
			return 1;
		}
	}
	if (item->compress) {
		/*
		 * In flight or cached: btrfs_sf_install() waits.  One in flight
		 * is read for this batch, or another, but it was no hit.
		 */
		if (!IS_ERR(folio) && (folio_test_locked(folio) ||
				       folio_test_uptodate(folio))) {
			item->read = !folio_test_uptodate(folio);
			item->folio = folio;
			return 1;
		}
		if (!IS_ERR(folio))
			folio_put(folio);
		btrfs_sf_submit(sb);
		btrfs_sf_read_compressed(fs_info, cache, b, item, mark);
		return 1;
	}
	if (IS_ERR(folio)) {
		/*
		 * As readahead allocates: earlier folios of the batch are locked
		 * and not yet submitted, so no OOM and no retrying reclaim here.
		 * A block that holds a folio already (another reader's, a
		 * promoted one) gives way to a smaller one, looked at before
		 * anything is allocated or charged; a large folio that cannot
		 * be had or charged, to the next order down.
		 */
		while (order &&
		       filemap_range_has_page(ec, item->cpos,
					      item->cpos + (PAGE_SIZE << order) - 1))
			order--;
		folio = filemap_alloc_folio(readahead_gfp_mask(ec), order);
		if (!folio && order) {
			order--;
			goto again;
		}
		if (!folio)
			return 1;
		/* Locks it, puts it on the LRU, charges the reader's memcg. */
		ret = filemap_add_folio(ec, folio, ecidx, readahead_gfp_mask(ec));
		if (ret) {
			folio_put(folio);
			if (ret == -EEXIST) {
				order = 0;
				goto again;
			}
			if (order) {
				order--;
				goto again;
			}
			return 1;
		}
	} else if (folio_test_uptodate(folio) || !folio_trylock(folio)) {
		/* Cached, or being read by someone else: btrfs_sf_install() waits. */
		item->folio = folio;
		return 1;
	} else if (folio_test_uptodate(folio) || folio->mapping != ec) {
		folio_unlock(folio);
		item->folio = folio;
		return 1;
	}
	/*
	 * Locked and not uptodate: new, or an earlier read failed (then read
	 * whole, whatever its order).  A new large folio serves the items its
	 * pages hold, each with a reference of its own.
	 */
	if (folio->index != ecidx || folio_order(folio) > order) {
		/* An old one, entered in its middle, or larger than the run. */
		item->folio = folio;
		item->read = true;
		btrfs_sf_queue_read(fs_info, sb, cache, folio,
				    item->logical -
				    ((u64)(ecidx - folio->index) << PAGE_SHIFT),
				    (u64)folio->index << PAGE_SHIFT);
		return 1;
	}
	nr = folio_nr_pages(folio);
	folio_ref_add(folio, nr - 1);
	for (i = 0; i < nr; i++) {
		items[i].folio = folio;
		items[i].read = true;
	}
	if (mark)
		folio_set_readahead(folio);
	btrfs_sf_queue_read(fs_info, sb, cache, folio, item->logical, item->cpos);
	return nr;
}

/* The record of @inode reading @em. */
static struct btrfs_sf_owner btrfs_sf_me(struct btrfs_inode *inode,
					 const struct extent_map *em, u32 domain)
{
	return (struct btrfs_sf_owner) {
		.root = btrfs_root_id(inode->root),
		.ino = btrfs_ino(inode),
		.base = (s64)em->start - (s64)em->offset,
		.domain = domain,
	};
}

static bool btrfs_sf_same_owner(const struct btrfs_sf_owner *a,
				const struct btrfs_sf_owner *b)
{
	return a->root == b->root && a->ino == b->ino && a->base == b->base;
}

/*
 * The owner's inode if it is in memory, referenced (release it with
 * btrfs_add_delayed_iput()); never waits for an inode being read or
 * evicted.
 */
static struct btrfs_inode *btrfs_sf_owner_inode(struct btrfs_fs_info *fs_info,
						const struct btrfs_sf_owner *o)
{
	struct btrfs_inode *inode;
	struct btrfs_root *root;
	bool is_new;

	root = btrfs_get_fs_root(fs_info, o->root, true);
	if (IS_ERR(root))
		return NULL;
	xa_lock(&root->inodes);
	inode = xa_load(&root->inodes, o->ino);
	if (inode && !igrab(&inode->vfs_inode))
		inode = NULL;
	xa_unlock(&root->inodes);
	btrfs_put_root(root);
	if (!inode)
		return NULL;
	spin_lock(&inode->vfs_inode.i_lock);
	is_new = inode->vfs_inode.i_state & I_NEW;
	spin_unlock(&inode->vfs_inode.i_lock);
	if (is_new || !btrfs_sf_inode_eligible(inode)) {
		btrfs_add_delayed_iput(inode);
		return NULL;
	}
	return inode;
}

/*
 * With no record of @em's extent, the file that may have cached it before
 * it was shared: the one @inode was last cloned from, or the same inode
 * of the subvolume @inode's is a snapshot of.  Promotion checks that its
 * extent map agrees, page by page.
 */
static bool btrfs_sf_candidate(struct btrfs_inode *inode,
			       const struct btrfs_sf_owner *me,
			       struct btrfs_sf_owner *cand)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	/* Pairs with btrfs_sf_note_remap(): the root is published last. */
	u64 src_root = smp_load_acquire(&inode->sf_src_root);
	void *entry;

	*cand = *me;
	if (src_root) {
		cand->root = src_root;
		cand->ino = READ_ONCE(inode->sf_src_ino);
		cand->base += READ_ONCE(inode->sf_src_delta);
	} else {
		entry = xa_load(&fs_info->sf_snap_src, me->root);
		if (!entry)
			return false;
		cand->root = xa_to_value(entry);
	}
	cand->domain = btrfs_sf_domain(fs_info, cand->root);
	return cand->domain == me->domain;
}

/*
 * Does @owner cache a page of [@start, @start + @len) of the extent whose
 * first byte is at @base in it?
 */
static bool btrfs_sf_owner_cached(struct btrfs_inode *owner, s64 base,
				  u64 start, u64 len)
{
	s64 pos = max_t(s64, base + (s64)start, 0);
	s64 end = base + (s64)(start + len) - 1;

	return end >= pos && filemap_range_has_page(owner->vfs_inode.i_mapping,
						    pos, end);
}

/**
 * btrfs_sf_note_readahead() - private readahead is about to read a range
 * @inode: the file
 * @start: first byte of the readahead
 * @end: last byte of the readahead
 *
 * Readahead reads ahead of the reader's read() calls, so btrfs_sf_populate()
 * of a lazily private reader finds those pages cached and never claims
 * their extents.  Without a record, the next file to read such an extent
 * would take it as its own and read it privately too: two copies, and its
 * readahead outruns sharing in turn (a file of 128 KiB compressed extents
 * shared only its first).  So the first reader is recorded here for every
 * shared extent of the range that has no record yet, as btrfs_sf_claim()
 * records it (DOC: btrfs lazy sharing).  A record is a hint: a stale one
 * costs a copy, never the wrong data.
 *
 * Context: btrfs_readahead(), with the range's extent range lock held.
 */
void btrfs_sf_note_readahead(struct btrfs_inode *inode, u64 start, u64 end)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	u64 cur = start;
	u32 domain;

	if (!READ_ONCE(fs_info->sf_lazy) || !btrfs_sf_inode_eligible(inode) ||
	    btrfs_sf_known_private(inode, start, end + 1))
		return;
	domain = btrfs_sf_domain(fs_info, btrfs_root_id(inode->root));
	while (cur <= end) {
		struct extent_map *em = btrfs_get_extent(inode, NULL, cur,
							 end + 1 - cur);
		struct btrfs_sf_owner *o;
		unsigned long key;
		bool shared;

		if (IS_ERR(em))
			return;
		if (btrfs_extent_map_end(em) <= cur) {
			btrfs_free_extent_map(em);
			return;
		}
		cur = btrfs_extent_map_end(em);
		key = em->disk_bytenr >> PAGE_SHIFT;
		if (!btrfs_sf_em_eligible(em) || xa_load(&fs_info->sf_owners, key) ||
		    atomic_long_read(&fs_info->sf_nr_owners) >= BTRFS_SF_MAX_OWNERS) {
			btrfs_free_extent_map(em);
			continue;
		}
		o = NULL;
		shared = btrfs_sf_em_shared(inode, em);
		if (shared) {
			o = kmalloc(sizeof(*o), GFP_NOFS | __GFP_ACCOUNT);
			if (o) {
				*o = btrfs_sf_me(inode, em, domain);
				o->shared = false;
				if (xa_insert(&fs_info->sf_owners, key, o, GFP_NOFS)) {
					kfree(o);
					o = NULL;
				} else {
					atomic_long_inc(&fs_info->sf_nr_owners);
				}
			}
		}
		/* Not shared, or ours now: later reads skip the lookups. */
		if (o || !shared)
			btrfs_sf_add_private(inode, em);
		btrfs_free_extent_map(em);
	}
}

/*
 * Would btrfs_sf_populate() share @em's pages in @inode (the answer of
 * btrfs_sf_collect() and btrfs_sf_claim(), without their side effects)?
 * The extent is eligible and shared, and with lazy sharing on, its first
 * reader is not @inode: btrfs_sf_note_readahead() has just recorded
 * @inode as the first reader of each shared extent that had no record,
 * and those are read privately unless the extent cache holds their data
 * already.  Context: the file's invalidate lock and its extent range lock.
 */
static bool btrfs_sf_would_share(struct btrfs_inode *inode,
				 const struct extent_map *em)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct btrfs_sf_owner me, *o;
	struct inode *cache;
	bool ours;

	if (!btrfs_sf_inode_eligible(inode) || !btrfs_sf_em_eligible(em) ||
	    !btrfs_sf_em_shared(inode, em))
		return false;
	if (!READ_ONCE(fs_info->sf_lazy))
		return true;
	me = btrfs_sf_me(inode, em, btrfs_sf_domain(fs_info, btrfs_root_id(inode->root)));
	xa_lock(&fs_info->sf_owners);
	o = xa_load(&fs_info->sf_owners, em->disk_bytenr >> PAGE_SHIFT);
	ours = o && !o->shared && o->domain == me.domain &&
	       btrfs_sf_same_owner(o, &me);
	xa_unlock(&fs_info->sf_owners);
	if (!ours)
		return true;
	/* Not btrfs_sf_cache(): a domain without a cache has nothing cached. */
	cache = me.domain ? xa_load(&fs_info->sf_caches, me.domain) : fs_info->sf_inode;
	return cache && btrfs_sf_cache_has_em(fs_info, cache, em);
}

/**
 * btrfs_sf_reader_begin() - a read that populated its range starts
 * @inode: the file
 *
 * Between this and btrfs_sf_reader_end(), readahead of @inode leaves the
 * pages of shared extents to the next btrfs_sf_populate() of the read, or
 * of another (btrfs_sf_readahead_skip()).
 */
void btrfs_sf_reader_begin(struct btrfs_inode *inode)
{
	atomic_inc(&inode->sf_readers);
}

void btrfs_sf_reader_end(struct btrfs_inode *inode)
{
	atomic_dec(&inode->sf_readers);
}

/**
 * btrfs_sf_readahead_skip() - leave a readahead folio to btrfs_sf_populate()
 * @inode: the file
 * @rac: the readahead
 * @folio: the next folio of btrfs_readahead(): locked, not uptodate
 * @ra: what the previous call decided, for the extent map it looked up
 *
 * Generic readahead sizes its window by the file, not by its extents: the
 * window of an extent of the file's own runs on into the shared extents
 * after it, and would read their pages privately into the file's page
 * cache, where btrfs_sf_populate() then finds them cached and shares
 * nothing.  A file that alternates extents of its own with shared ones
 * shared only up to its first own extent.  So while a reader that
 * populates is in flight (read(), splice, a read fault: between
 * btrfs_sf_reader_begin() and btrfs_sf_reader_end()), a folio whose extent
 * populate would share is removed from the page cache unread, as
 * mm/readahead.c asks ->readahead() to do with the folios it does not
 * read, and the read or fault that reaches it shares it (with populate's
 * own asynchronous window for a sequential reader).
 *
 * A folio such a reader waits for was populated first: if it is still
 * here, populate declined it and recorded it (btrfs_sf_install()), and it
 * is read.  Readers that do not populate (a write fault of a
 * shared mapping, a NOWAIT read or fault, btrfs send and defrag, which
 * read ahead without a file) get their whole window read, as on a
 * kernel without this, unless one that populates runs at the same time.
 * The readahead state is left as generic readahead set it: the next
 * window is sized as if the whole window had been read.
 *
 * Context: btrfs_readahead(), after btrfs_sf_note_readahead(), with the
 * file's invalidate lock (mm/readahead.c) and extent range lock held.
 * Return: true if @folio was removed from the page cache and unlocked.
 */
bool btrfs_sf_readahead_skip(struct btrfs_inode *inode,
			     struct readahead_control *rac, struct folio *folio,
			     struct btrfs_sf_ra *ra)
{
	u64 pos = folio_pos(folio);

	if (!rac->file || !atomic_read(&inode->sf_readers) ||
	    !btrfs_sf_inode_eligible(inode))
		return false;
	if (pos < ra->start || pos >= ra->end) {
		struct extent_map *em;

		em = btrfs_get_extent(inode, NULL, pos, folio_size(folio));
		if (IS_ERR(em)) {
			*ra = (struct btrfs_sf_ra) { };
			return false;
		}
		ra->start = em->start;
		ra->end = btrfs_extent_map_end(em);
		ra->skip = btrfs_sf_would_share(inode, em);
		btrfs_free_extent_map(em);
	}
	if (!ra->skip || pos < ra->start || pos + folio_size(folio) > ra->end ||
	    btrfs_sf_known_private(inode, pos, pos + folio_size(folio)) ||
	    (pos < READ_ONCE(inode->sf_declined_end) &&
	     pos + folio_size(folio) > READ_ONCE(inode->sf_declined_start)))
		return false;
	folio_get(folio);
	filemap_remove_folio(folio);
	folio_unlock(folio);
	folio_put(folio);
	return true;
}

/*
 * Should @inode read the shared extent of @em through the extent cache
 * (true), or privately, being its only reader (false)?  Records the first
 * reader, and marks the extent shared when a second file reads it while
 * the first is in memory; that file becomes @b's owner, whose folios the
 * batch may promote (DOC: btrfs lazy sharing).  Anything uncertain (no
 * memory for the record) shares.
 */
static bool btrfs_sf_claim(struct btrfs_inode *inode, const struct extent_map *em,
			   struct btrfs_sf_batch *b, bool *from_owner,
			   s64 *owner_base)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct btrfs_sf_owner me = btrfs_sf_me(inode, em, b->domain), cur;
	unsigned long key = em->disk_bytenr >> PAGE_SHIFT;
	struct btrfs_sf_owner *o;
	struct btrfs_inode *owner;

	if (!READ_ONCE(fs_info->sf_lazy))
		return true;
	xa_lock(&fs_info->sf_owners);
	o = xa_load(&fs_info->sf_owners, key);
	if (o)
		cur = *o;
	xa_unlock(&fs_info->sf_owners);
	if (!o && atomic_long_read(&fs_info->sf_nr_owners) >= BTRFS_SF_MAX_OWNERS)
		return true;	/* as without lazy sharing */
	if (!o) {
		owner = NULL;
		/*
		 * Cached before it was shared: that file owns it, shared.  Also
		 * when the batch has an owner already (it crosses from an
		 * extent with a record into one without, such as an extent the
		 * owner's readahead cached ahead of its reads): the reader
		 * must not become the owner of what another file caches, or it
		 * reads privately and its readahead runs ahead of sharing.
		 */
		if (btrfs_sf_candidate(inode, &me, &cur)) {
			if (b->owner && btrfs_root_id(b->owner->root) == cur.root &&
			    btrfs_ino(b->owner) == cur.ino)
				owner = b->owner;
			else
				owner = btrfs_sf_owner_inode(fs_info, &cur);
			if (owner && !btrfs_sf_owner_cached(owner, cur.base,
							    em->offset, em->len)) {
				if (owner != b->owner)
					btrfs_add_delayed_iput(owner);
				owner = NULL;
			}
		}
		/*
		 * Or the batch's owner, at the same distance from the reader
		 * (the snapshot read first, the live file now: the live file
		 * has no candidate).  Promotion checks its extent map.
		 */
		if (!owner && b->owner) {
			cur = me;
			cur.root = btrfs_root_id(b->owner->root);
			cur.ino = btrfs_ino(b->owner);
			cur.base = me.base + b->owner_delta;
			if (btrfs_sf_owner_cached(b->owner, cur.base, em->offset,
						  em->len))
				owner = b->owner;
		}
		o = kmalloc(sizeof(*o), GFP_NOFS | __GFP_ACCOUNT);
		if (o) {
			*o = owner ? cur : me;
			o->shared = !!owner;
			if (xa_insert(&fs_info->sf_owners, key, o, GFP_NOFS)) {
				kfree(o);
				o = NULL;
			} else {
				atomic_long_inc(&fs_info->sf_nr_owners);
			}
		}
		if (!owner)
			return !o;
		if (!b->owner || owner == b->owner)
			goto adopt;
		/* One owner a batch: this one's pages are promoted later. */
		btrfs_add_delayed_iput(owner);
		return true;
	}
	if (cur.domain != me.domain)
		return true;
	if (!cur.shared && btrfs_sf_same_owner(&cur, &me))
		return false;
	/* One owner a batch: the pages of another owner's extent are read. */
	if (b->owner && (btrfs_root_id(b->owner->root) != cur.root ||
			 btrfs_ino(b->owner) != cur.ino))
		return true;
	owner = b->owner ? b->owner : btrfs_sf_owner_inode(fs_info, &cur);
	xa_lock(&fs_info->sf_owners);
	o = xa_load(&fs_info->sf_owners, key);
	if (o && btrfs_sf_same_owner(o, &cur) && o->domain == cur.domain) {
		if (owner)
			o->shared = true;
		else if (!o->shared)
			*o = me;	/* the owner is gone: the reader takes over */
	}
	xa_unlock(&fs_info->sf_owners);
	if (!owner)
		return cur.shared;
adopt:
	/* The owner's own reads of the extent now go through the cache. */
	btrfs_sf_set_private(owner, 0, 0);
	b->owner = owner;
	b->owner_delta = cur.base - me.base;
	*from_owner = true;
	*owner_base = cur.base;
	return true;
}

/* Is page @index of @mapping in the page cache? */
static bool btrfs_sf_cached(struct address_space *mapping, pgoff_t index)
{
	loff_t pos = (loff_t)index << PAGE_SHIFT;

	return filemap_range_has_page(mapping, pos, pos + PAGE_SIZE - 1);
}

/*
 * Which pages of [@first, @last] are missing from the file's page cache and
 * live in a shareable extent, and where in the extent cache?  Fills @items
 * (room for BTRFS_SF_MAX_BATCH) and returns how many.  Records the private
 * extents it meets, so that later reads skip them without a lookup.
 */
static unsigned int btrfs_sf_collect(struct btrfs_inode *inode, struct inode *cache,
				     pgoff_t first, pgoff_t last,
				     struct btrfs_sf_batch *b)
{
	struct address_space *mapping = inode->vfs_inode.i_mapping;
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	u64 end = ((u64)(last + 1) << PAGE_SHIFT) - 1;
	struct btrfs_sf_item *items = b->items;
	unsigned int nr = 0;
	pgoff_t idx = first;

	while (idx <= last) {
		u64 off = (u64)idx << PAGE_SHIFT;
		struct extent_map *em;
		bool share, from_owner;
		s64 owner_base = 0, pos;
		pgoff_t em_last;

		em = btrfs_get_extent(inode, NULL, off, end + 1 - off);
		if (IS_ERR(em))
			break;
		em_last = min_t(pgoff_t, last, (btrfs_extent_map_end(em) - 1) >> PAGE_SHIFT);
		if (em_last < idx || idx > b->req_last) {
			btrfs_free_extent_map(em);
			break;
		}
		/* Extents the read does not ask for are left as they are. */
		if (em_last < b->req_first) {
			btrfs_free_extent_map(em);
			idx = em_last + 1;
			continue;
		}
		/*
		 * A lazily private extent still uses what the extent cache
		 * holds of it (shared before, or with lazy sharing off).
		 */
		from_owner = false;
		share = btrfs_sf_em_eligible(em) && btrfs_sf_em_shared(inode, em);
		if (share)
			share = btrfs_sf_claim(inode, em, b, &from_owner, &owner_base) ||
				btrfs_sf_cache_has_em(fs_info, cache, em);
		if (!share && em->disk_bytenr < EXTENT_MAP_LAST_BYTE)
			btrfs_sf_add_private(inode, em);
		for (; idx <= em_last; idx++) {
			void *entry;

			if (!share)
				continue;
			entry = xa_load(&mapping->i_pages, idx);
			if (entry && !xa_is_value(entry))
				continue;
			off = (u64)idx << PAGE_SHIFT;
			if (!btrfs_sf_cache_pos(fs_info, em, off, true,
						&items[nr].cpos, &items[nr].logical))
				continue;	/* no memory for its phase */
			/* The owner's private copy is had without I/O too. */
			pos = owner_base + (s64)(em->offset + (off - em->start));
			if ((idx < b->req_first || idx > b->req_last) &&
			    !filemap_range_has_page(cache->i_mapping, items[nr].cpos,
						    items[nr].cpos + PAGE_SIZE - 1) &&
			    !(from_owner && pos >= 0 &&
			      btrfs_sf_owner_has_private(b->owner, pos)))
				continue;
			items[nr].index = idx;
			items[nr].disk_bytenr = em->disk_bytenr;
			items[nr].disk_len = em->disk_num_bytes;
			items[nr].ram_len = em->ram_bytes;
			items[nr].ref_start = em->offset;
			items[nr].ref_end = em->offset + em->len;
			items[nr].compress = extent_map_compression(em);
			/* The owner's position: the same offset in the extent's data. */
			pos = owner_base + (s64)(em->offset + (off - em->start));
			items[nr].owner_pos = from_owner && pos >= 0 ? pos : -1;
			items[nr].folio = NULL;
			items[nr].read = false;
			items[nr].promoted = false;
			nr++;
		}
		btrfs_free_extent_map(em);
	}
	return nr;
}

/*
 * Find or start reading the physical folio of each item, one bio per run of
 * adjacent pages.  @mark: set the readahead marker on the first folio read.
 */
static void btrfs_sf_read_physical(struct btrfs_inode *inode, struct inode *cache,
				   struct btrfs_sf_item *items, unsigned int nr,
				   bool mark, struct btrfs_sf_batch *b)
{
	struct btrfs_sf_bio sb = { };
	unsigned int i, j, n;

	/*
	 * The owner's folios may sit in other CPUs' LRU batches, whose
	 * references would keep them from being promoted.
	 */
	if (b->owner && b->wait && nr)
		lru_add_drain_all();
	for (i = 0; i < nr; i += n) {
		n = btrfs_sf_get_physical(inode, cache, &sb, b, &items[i],
					  nr - i, mark);
		for (j = i; j < i + n; j++) {
			if (items[j].read) {
				b->misses++;
				mark = false;
			}
		}
	}
	btrfs_sf_submit(&sb);
}

/*
 * The order of one large alias for @items[0] and the items after it (DOC:
 * btrfs large aliases), or 0: the largest k, at least 2 and at most the
 * order of their physical folio, such that the next 2^k items are that folio's pages in a
 * row from a multiple of 2^k in it, at file indices in a row from a
 * multiple of 2^k, all below EOF (@eof_index: the first index past it).
 */
static unsigned int btrfs_sf_alias_order(const struct btrfs_sf_item *items,
					 unsigned int nr, pgoff_t eof_index)
{
	struct folio *folio = items[0].folio;
	pgoff_t ecidx = items[0].cpos >> PAGE_SHIFT;
	unsigned int order, n, i;

	if (!folio || !folio_test_large(folio))
		return 0;
	/* An order-1 alias (280 bytes) would cost more than two (192). */
	for (order = folio_order(folio); order >= 2; order--) {
		n = 1U << order;
		if (n > nr || !IS_ALIGNED(ecidx, n) ||
		    !IS_ALIGNED(items[0].index, n) ||
		    items[0].index + n > eof_index)
			continue;
		for (i = 1; i < n; i++)
			if (items[i].folio != folio ||
			    items[i].index != items[0].index + i ||
			    items[i].cpos != items[0].cpos + ((u64)i << PAGE_SHIFT))
				break;
		if (i == n)
			return order;
	}
	return 0;
}

/*
 * Install an alias of @item's page of locked @folio in the file's mapping;
 * false if it cannot be shared after all.  Not beyond EOF: btrfs_setsize()
 * shrinks i_size and truncates the page cache under the invalidate lock,
 * which we hold.  fs-verity may have been enabled since the entry check:
 * its data is never shared.  Nothing under the physical folio lock
 * allocates with reclaim or memcg throttling: readers of every sharer,
 * migration and the transaction commit (btrfs_sf_invalidate_range()) wait
 * for that lock.  Should the allocations fail, the page is read privately.
 */
static bool btrfs_sf_install_one(struct btrfs_inode *inode, struct inode *cache,
				 struct folio *folio, const struct btrfs_sf_item *item,
				 struct shared_folio_prealloc *pa)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct page *page;

	return folio->mapping == cache->i_mapping &&
	       folio_test_uptodate(folio) && !IS_VERITY(&inode->vfs_inode) &&
	       ((loff_t)item->index << PAGE_SHIFT) < i_size_read(&inode->vfs_inode) &&
	       (page = btrfs_sf_page(folio, item->cpos >> PAGE_SHIFT)) &&
	       !PageHWPoison(page) &&
	       shared_folio_attach(folio, &fs_info->sf_stats, pa,
				   BTRFS_SF_LOCKED_GFP) &&
	       !shared_folio_add_alias(folio, page, inode->vfs_inode.i_mapping,
				       item->index, pa, BTRFS_SF_LOCKED_GFP);
}

/*
 * The same for the 2^@order items from @item, in one large alias (the
 * caller checked them with btrfs_sf_alias_order(); EOF cannot have moved).
 */
static bool btrfs_sf_install_large(struct btrfs_inode *inode, struct inode *cache,
				   struct folio *folio, const struct btrfs_sf_item *item,
				   unsigned int order, struct shared_folio_prealloc *pa)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct page *page;

	return folio->mapping == cache->i_mapping &&
	       folio_test_uptodate(folio) && !IS_VERITY(&inode->vfs_inode) &&
	       !folio_test_has_hwpoisoned(folio) &&
	       (page = btrfs_sf_page(folio, item->cpos >> PAGE_SHIFT)) &&
	       shared_folio_attach(folio, &fs_info->sf_stats, pa,
				   BTRFS_SF_LOCKED_GFP) &&
	       !shared_folio_add_large_alias(folio, page, order,
					     inode->vfs_inode.i_mapping,
					     item->index, pa, BTRFS_SF_LOCKED_GFP);
}

/*
 * Is a page that could not be shared at @index one @b's reader's readahead
 * must read (btrfs_sf_readahead_skip())?  A page of the read, or one a
 * sequential reader reads next.
 */
static bool btrfs_sf_may_decline(const struct btrfs_sf_batch *b, pgoff_t index)
{
	return b->seq || btrfs_sf_in_read(b, index, index);
}

/* Widen [*@first, *@last] to take in @index (btrfs_sf_install()'s declines). */
static void btrfs_sf_decline(pgoff_t *first, pgoff_t *last, pgoff_t index)
{
	*first = min(*first, index);
	*last = max(*last, index);
}

/*
 * Wait for each item's physical folio and install an alias of it in the
 * file's mapping: one large alias for the items a large physical folio
 * serves in a row where their places allow (DOC: btrfs large aliases),
 * else one alias a page; drop the folio references.  Without @wait, only
 * drop them: the reads were the asynchronous window's.  Pages that could
 * not be shared after all (no physical folio, a read error, max_sharing,
 * no memory for an alias, a folio memory failure is splitting) are
 * recorded as declined, so that the reader's readahead reads them
 * instead of leaving them to populate again (btrfs_sf_readahead_skip());
 * a later populate shares them if it can.
 */
static void btrfs_sf_install(struct btrfs_inode *inode, struct inode *cache,
			     struct btrfs_sf_item *items, unsigned int nr,
			     bool wait, struct btrfs_sf_batch *b)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct shared_folio_prealloc pa = { };
	pgoff_t eof_index = DIV_ROUND_UP(i_size_read(&inode->vfs_inode), PAGE_SIZE);
	/* A reader with drop-behind on gets order-0 aliases: it evicts them. */
	bool large = wait && READ_ONCE(fs_info->sf_large_aliases) &&
		     !shared_folio_drop_behind_enabled();
	unsigned int i, j, n, order, order0_from = 0;
	pgoff_t dfirst = ULONG_MAX, dlast = 0;

	for (i = 0; i < nr; i += n) {
		struct folio *folio = items[i].folio;

		n = 1;
		if (!folio) {
			if (wait && btrfs_sf_may_decline(b, items[i].index))
				btrfs_sf_decline(&dfirst, &dlast, items[i].index);
			continue;
		}
		order = large && i >= order0_from ?
			btrfs_sf_alias_order(&items[i], nr - i, eof_index) : 0;
		n = 1U << order;
		/*
		 * Around a random read, pages are in the batch only so that
		 * an alias of the read's pages can be large: one that holds
		 * none of them would install, and age, pages the reader never
		 * asked for (its whole 2 MiB block, a page at a time).
		 */
		if (!b->seq && !btrfs_sf_in_read(b, items[i].index, items[i + n - 1].index)) {
			for (j = i; j < i + n; j++)
				folio_put(items[j].folio);
			continue;
		}
		/* Before the lock: see BTRFS_SF_LOCKED_GFP. */
		if (wait)
			shared_folio_prealloc(&pa, GFP_NOFS);
		if (order)
			shared_folio_prealloc_large(&pa, GFP_NOFS);
		/* A killed reader stops waiting; the pages stay unshared. */
		if (!wait || folio_lock_killable(folio)) {
			for (j = i; j < i + n; j++)
				folio_put(items[j].folio);
			continue;
		}
		/* Poisoned since the lookup: let memory_failure() split it. */
		if (folio_test_large(folio) && folio_test_has_hwpoisoned(folio)) {
			folio_unlock(folio);
			for (j = i; j < i + n; j++) {
				folio_put(items[j].folio);
				if (btrfs_sf_may_decline(b, items[j].index))
					btrfs_sf_decline(&dfirst, &dlast, items[j].index);
			}
			continue;
		}
		if (folio_test_clear_readahead(folio) && !b->marked) {
			b->marked = true;
			b->marker = items[i].index;
		}
		if (order && !btrfs_sf_install_large(inode, cache, folio, &items[i],
						     order, &pa)) {
			/*
			 * Redo the run an alias a page, each preallocated
			 * before the lock: the references stay the items'.
			 */
			folio_unlock(folio);
			order0_from = i + n;
			n = 0;
			continue;
		}
		if (order) {
			for (j = i; j < i + n; j++)
				b->hits += !items[j].read && !items[j].promoted;
		} else if (btrfs_sf_install_one(inode, cache, folio, &items[i], &pa)) {
			b->hits += !items[i].read && !items[i].promoted;
		} else if (btrfs_sf_may_decline(b, items[i].index)) {
			btrfs_sf_decline(&dfirst, &dlast, items[i].index);
		}
		for (j = i; j < i + n; j++)
			b->read |= items[j].read;
		folio_unlock(folio);
		for (j = i; j < i + n; j++)
			folio_put(items[j].folio);
	}
	shared_folio_prealloc_free(&pa);
	if (dfirst <= dlast) {
		u64 start = (u64)dfirst << PAGE_SHIFT;
		u64 end = (u64)(dlast + 1) << PAGE_SHIFT;
		u64 s = READ_ONCE(inode->sf_declined_start);
		u64 e = READ_ONCE(inode->sf_declined_end);

		/* One populate's batches extend the range (reset at its start). */
		if (e > s) {
			start = min(start, s);
			end = max(end, e);
		}
		WRITE_ONCE(inode->sf_declined_start, start);
		WRITE_ONCE(inode->sf_declined_end, end);
	}
}

/*
 * Share the missing pages of [@first, @last] (at most BTRFS_SF_MAX_BATCH).
 * With @wait, wait for their physical folios and install aliases; without,
 * only start the reads (the asynchronous window), marking the first.
 */
static void btrfs_sf_populate_batch(struct btrfs_inode *inode, pgoff_t first,
				    pgoff_t last, pgoff_t req_first,
				    pgoff_t req_last, bool wait,
				    struct btrfs_sf_batch *b)
{
	struct address_space *mapping = inode->vfs_inode.i_mapping;
	struct extent_state *cached_state = NULL;
	u64 start = (u64)first << PAGE_SHIFT;
	u64 end = ((u64)(last + 1) << PAGE_SHIFT) - 1;
	struct inode *cache;
	unsigned int nr;

	filemap_invalidate_lock_shared(mapping);
	/* Its trust domain's: read under the lock a change of domain takes. */
	cache = btrfs_sf_cache(inode, &b->domain);
	if (!cache) {
		filemap_invalidate_unlock_shared(mapping);
		return;
	}
	b->wait = wait;
	b->req_first = req_first;
	b->req_last = req_last;
	b->reader_uid = inode->vfs_inode.i_uid;
	btrfs_lock_and_flush_ordered_range(inode, start, end, &cached_state);
	nr = btrfs_sf_collect(inode, cache, first, last, b);
	btrfs_sf_read_physical(inode, cache, b->items, nr, !wait, b);
	btrfs_sf_install(inode, cache, b->items, nr, wait, b);
	btrfs_unlock_extent(&inode->io_tree, start, end, &cached_state);
	filemap_invalidate_unlock_shared(mapping);
	if (b->owner) {
		btrfs_add_delayed_iput(b->owner);
		b->owner = NULL;
	}
}

/* Does a read from @first follow the reader's previous one (@ra)? */
static bool btrfs_sf_ra_sequential(struct file_ra_state *ra, pgoff_t first)
{
	loff_t prev = READ_ONCE(ra->prev_pos);

	if (prev < 0)
		return !first;
	return first >= (prev >> PAGE_SHIFT) && first - (prev >> PAGE_SHIFT) <= 1;
}

/**
 * btrfs_sf_populate() - install aliases for a read of shared extents
 * @inode: the file being read
 * @pos: start of the read
 * @count: its length
 * @ra: the reader's readahead state (read(), splice), or NULL (a fault)
 *
 * For every page of [@pos, @pos + @count) that has nothing in the page
 * cache and whose data lives in an eligible extent, get the extent cache's
 * physical folio, reading it if needed, and install an alias.  Anything
 * that cannot be shared (ineligible extent, allocation failure, I/O error,
 * the max_sharing cap) is simply left empty, and the generic path reads it
 * privately as before: errors reach the reader through that path, exactly
 * as on a kernel without this.
 *
 * Sequential readers get an asynchronous window, as readahead gives them
 * for private pages: a read that had to go to disk and starts where the
 * reader's previous read ended (@ra's prev_pos, as page_cache_sync_ra()
 * tells a sequential miss; for a fault, whose page before it is cached)
 * starts the reads of the next BTRFS_SF_WINDOW pages without waiting and
 * marks the first of them; reaching the marker starts the window after
 * that.  Random reads read only what they ask for: a random reader in a
 * file mostly cached would otherwise often follow a cached page and read
 * 2 MiB for each 4 KiB.  Nor does a random read alias the pages around it
 * that the extent cache holds, unless a large alias of its own pages
 * holds them.
 *
 * Context: process context; takes the invalidate lock shared and the
 * file's extent range lock.
 */
void btrfs_sf_populate(struct btrfs_inode *inode, loff_t pos, size_t count,
		       struct file_ra_state *ra)
{
	struct address_space *mapping = inode->vfs_inode.i_mapping;
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct btrfs_sf_batch b = { };
	pgoff_t first, last, idx, eof, win, win_last;
	unsigned int nofs;
	loff_t isize;
	bool large;

	isize = i_size_read(&inode->vfs_inode);
	if (!count || pos >= isize || !btrfs_sf_inode_eligible(inode))
		return;
	/* As btrfs_sf_install() decides; a stale answer costs a lookup. */
	large = READ_ONCE(fs_info->sf_large_aliases) &&
		!shared_folio_drop_behind_enabled();
	first = pos >> PAGE_SHIFT;
	eof = (isize - 1) >> PAGE_SHIFT;
	last = min_t(pgoff_t, eof, (min_t(loff_t, isize, pos + count) - 1) >> PAGE_SHIFT);

	/* Data that shares nothing is read as on a kernel without this. */
	if (btrfs_sf_known_private(inode, (u64)first << PAGE_SHIFT,
				   (u64)(last + 1) << PAGE_SHIFT))
		return;

	/* The hot case: everything is cached already. */
	rcu_read_lock();	/* page_cache_next_miss() walks the xarray under RCU */
	idx = page_cache_next_miss(mapping, first, last - first + 1);
	rcu_read_unlock();
	if (idx - first >= last - first + 1)
		return;

	b.items = kvmalloc_array(BTRFS_SF_MAX_BATCH, sizeof(*b.items), GFP_NOFS);
	if (!b.items)
		return;
	/* What this read declines, for its readahead (btrfs_sf_install()). */
	WRITE_ONCE(inode->sf_declined_end, 0);
	/*
	 * Before the batches, which may cache the page before @first: a
	 * random fault would look sequential.
	 */
	if (ra)
		b.seq = btrfs_sf_ra_sequential(ra, first);
	else
		b.seq = !first || btrfs_sf_cached(mapping, first - 1);
	nofs = memalloc_nofs_save();
	while (idx <= last) {
		/*
		 * Batches end at multiples of BTRFS_SF_MAX_BATCH in the file,
		 * so that a physical folio can be as large as the block of
		 * the extent cache that a page's phase puts there (DOC: btrfs
		 * extent cache index space).
		 */
		pgoff_t batch_last = min(last, idx | (BTRFS_SF_MAX_BATCH - 1));

		/* Up to 2 GiB in a read: a killed reader stops here. */
		if (fatal_signal_pending(current))
			goto out;

		/*
		 * Where a large alias can be had, the batch spans its whole
		 * block, for the pages the extent cache holds already.
		 */
		if (large)
			btrfs_sf_populate_batch(inode, idx & ~(pgoff_t)(BTRFS_SF_MAX_BATCH - 1),
						min(eof, idx | (BTRFS_SF_MAX_BATCH - 1)),
						idx, batch_last, true, &b);
		else
			btrfs_sf_populate_batch(inode, idx, batch_last, idx,
						batch_last, true, &b);
		if (batch_last == last)
			break;
		rcu_read_lock();
		idx = page_cache_next_miss(mapping, batch_last + 1, last - batch_last);
		rcu_read_unlock();
		if (idx <= batch_last)	/* wrapped */
			break;
	}

	/*
	 * The asynchronous window, for sequential readers only; it ends at a
	 * multiple of its size, so that the next one is aligned as batches
	 * are.
	 */
	win = 0;
	if (b.marked)
		win = max(last + 1, round_down(b.marker + BTRFS_SF_WINDOW,
					       BTRFS_SF_WINDOW));
	else if (b.read && b.seq)
		win = last + 1;
	win_last = min(eof, round_down(win + BTRFS_SF_WINDOW, BTRFS_SF_WINDOW) - 1);
	if (win && win <= eof && !fatal_signal_pending(current))
		btrfs_sf_populate_batch(inode, win, win_last, win, win_last, false, &b);
out:
	memalloc_nofs_restore(nofs);
	kvfree(b.items);

	if (b.hits)
		shared_folio_count_hits(&fs_info->sf_stats, b.hits);
	if (b.misses)
		shared_folio_count_misses(&fs_info->sf_stats, b.misses);
}

/*
 * btrfs_sf_read_drop_behind() - a buffered read() with drop-behind on
 * @iocb: the read, its range populated already (btrfs_sf_populate())
 * @to: the destination
 * @already_read: bytes an O_DIRECT read copied before
 *
 * Another reader's drop-behind may evict the aliases btrfs_sf_populate()
 * just installed before filemap_read() gets to them; the miss would read
 * that range, and the read-ahead after it, from disk into private folios.
 * So read without I/O first, populate again once if that stopped short,
 * and only then read as usual.
 *
 * Afterwards evict the aliases the read used (shared_folio_drop_behind()),
 * and the page before them, all but the last page read: small reads
 * within one page do not make its alias each time.  The page before is the one
 * the previous read of a sequential reader kept.
 *
 * Context: process context, no locks held.
 * Return: as filemap_read().
 */
static ssize_t btrfs_sf_read_drop_behind(struct kiocb *iocb, struct iov_iter *to,
					 ssize_t already_read)
{
	struct btrfs_inode *inode = BTRFS_I(file_inode(iocb->ki_filp));
	struct address_space *mapping = inode->vfs_inode.i_mapping;
	/*
	 * The first pass moves the reader's prev_pos: the second populate is
	 * sequential if the read was (btrfs_sf_populate()).
	 */
	bool seq = btrfs_sf_ra_sequential(&iocb->ki_filp->f_ra,
					  iocb->ki_pos >> PAGE_SHIFT);
	struct file_ra_state ra = { };
	loff_t start = iocb->ki_pos;
	ssize_t ret;
	pgoff_t first, last;
	unsigned long dropped;

	iocb->ki_flags |= IOCB_NOIO;
	ret = filemap_read(iocb, to, already_read);
	iocb->ki_flags &= ~IOCB_NOIO;
	if (ret < 0 && ret != -EAGAIN)
		return ret;
	if (ret < 0)
		ret = already_read;
	if (iov_iter_count(to) && iocb->ki_pos < i_size_read(&inode->vfs_inode)) {
		ra.prev_pos = seq ? iocb->ki_pos : -1;
		btrfs_sf_populate(inode, iocb->ki_pos, iov_iter_count(to), &ra);
		ret = filemap_read(iocb, to, ret);
	}

	if (iocb->ki_pos <= start)
		return ret;
	first = start >> PAGE_SHIFT;
	last = (iocb->ki_pos - 1) >> PAGE_SHIFT;
	if (first)
		first--;
	if (last > first && btrfs_sf_inode_eligible(inode)) {
		dropped = shared_folio_drop_behind(mapping, first, last - 1);
		if (dropped)
			shared_folio_count_drops(&inode->root->fs_info->sf_stats,
						 dropped);
	}
	return ret;
}

/**
 * btrfs_sf_read() - a buffered read() of a range btrfs_sf_populate() shared
 * @iocb: the read
 * @to: the destination
 * @already_read: bytes an O_DIRECT read copied before
 *
 * filemap_read(), or with drop-behind on btrfs_sf_read_drop_behind(), as
 * a reader that populates (btrfs_sf_reader_begin()).
 *
 * Context: process context, no locks held.
 * Return: as filemap_read().
 */
ssize_t btrfs_sf_read(struct kiocb *iocb, struct iov_iter *to, ssize_t already_read)
{
	struct btrfs_inode *inode = BTRFS_I(file_inode(iocb->ki_filp));
	ssize_t ret;

	btrfs_sf_reader_begin(inode);
	if (shared_folio_drop_behind_enabled())
		ret = btrfs_sf_read_drop_behind(iocb, to, already_read);
	else
		ret = filemap_read(iocb, to, already_read);
	btrfs_sf_reader_end(inode);
	return ret;
}

/**
 * btrfs_sf_prepare_write() - a buffered write is about to fill pages whole
 * @inode: the file
 * @pos: start of the chunk of the write that prepare_pages() prepares next
 * @len: its length
 * @whole: the length of the write from @pos on, this chunk's included
 * @force_uptodate: the first page is read before the write (after a short
 *                  copy), so it is not filled whole
 *
 * Replace the aliases of the pages that [@pos, @pos + @len) covers whole
 * by private folios that are not uptodate, without copying their data
 * (shared_folio_overwrite()): the write replaces it.  A large alias that
 * [@pos, @pos + @whole) covers whole goes whole with the first chunk that
 * reaches it, rather than be split into an alias a page for its chunks
 * (as few as 8 pages each, after balance_dirty_pages()).  The pages at
 * either end that the write covers only in part keep their alias, which
 * the write unshares with a copy.
 *
 * Not for a NOWAIT write: replacing an alias waits for its lock.  Replaced
 * before the chunk's pages are looked up and copied to, the aliases of
 * pages that the write then does not reach are lost (their pages are read
 * from the file, whose extents still hold the data): cost only, when the
 * copy from user memory faults, or the write stops early (ENOSPC, EDQUOT,
 * a fault-in that fails, a fatal signal) short of the pages past the chunk
 * that a large alias's removal left empty.
 *
 * Context: process context, the inode lock held, no page locks.
 */
void btrfs_sf_prepare_write(struct btrfs_inode *inode, loff_t pos, size_t len,
			    size_t whole, bool force_uptodate)
{
	struct btrfs_fs_info *fs_info = inode->root->fs_info;
	struct address_space *mapping = inode->vfs_inode.i_mapping;
	pgoff_t first = round_up(pos, PAGE_SIZE) >> PAGE_SHIFT;
	pgoff_t end = (pos + len) >> PAGE_SHIFT;	/* exclusive */
	pgoff_t wend = (pos + whole) >> PAGE_SHIFT;	/* exclusive, >= end */

	/* The common cases: nothing cached, or no alias on this filesystem. */
	if (!READ_ONCE(mapping->nrpages) ||
	    !atomic_long_read(&fs_info->sf_stats.aliases))
		return;
	if (force_uptodate && !offset_in_page(pos))
		first++;
	if (first < end)
		shared_folio_overwrite(mapping, first, end - 1, wend - 1,
				       btrfs_alloc_write_mask(mapping) | __GFP_WRITE);
}

/**
 * btrfs_sf_fault_wants_populate() - should a page fault populate first?
 * @inode: the file
 * @index: the faulting page
 *
 * Cheap, without locks: sharing is on for @inode, the page is not cached,
 * and its range is not known to share nothing.
 *
 * Return: true if btrfs_sf_populate() may install an alias at @index.
 */
static bool btrfs_sf_fault_wants_populate(struct btrfs_inode *inode,
					  pgoff_t index)
{
	u64 pos = (u64)index << PAGE_SHIFT;

	return btrfs_sf_inode_eligible(inode) &&
	       pos < i_size_read(&inode->vfs_inode) &&
	       !btrfs_sf_known_private(inode, pos, pos + PAGE_SIZE) &&
	       !btrfs_sf_cached(inode->vfs_inode.i_mapping, index);
}

/**
 * btrfs_sf_cached_page() - is page @index of @inode in its page cache?
 * @inode: the file
 * @index: the page
 *
 * Return: true if anything (an alias or a private folio) is there.
 */
static bool btrfs_sf_cached_page(struct btrfs_inode *inode, pgoff_t index)
{
	return btrfs_sf_cached(inode->vfs_inode.i_mapping, index);
}

/**
 * btrfs_sf_filemap_fault() - ->fault of btrfs files
 * @vmf: the fault
 *
 * A page fault shares as read() does: a page that is not cached and whose
 * extent may be shared gets an alias (btrfs_sf_populate(), the fault-around
 * block of 16 pages, or the window of a sequential faulter), and
 * filemap_fault() then maps the physical page read-only.  Not for a write
 * fault on a shared mapping, which would unshare at once, nor for a fault
 * that must not wait.  Populating may read the disk: where the fault can
 * be retried it drops the mmap lock (or the VMA lock) first, as
 * filemap_fault() does for its reads, and the retry finds the alias.  A
 * read fault is a reader that populates (btrfs_sf_reader_begin()).
 *
 * Return: filemap_fault()'s, or VM_FAULT_MAJOR | VM_FAULT_RETRY.
 */
vm_fault_t btrfs_sf_filemap_fault(struct vm_fault *vmf)
{
	struct vm_area_struct *vma = vmf->vma;
	struct btrfs_inode *inode = BTRFS_I(file_inode(vma->vm_file));
	loff_t pos = (loff_t)round_down(vmf->pgoff, 16) << PAGE_SHIFT;
	struct file *fpin;
	vm_fault_t ret;

	if ((vmf->flags & FAULT_FLAG_RETRY_NOWAIT) ||
	    ((vmf->flags & FAULT_FLAG_WRITE) && (vma->vm_flags & VM_SHARED)))
		return filemap_fault(vmf);
	if (!btrfs_sf_fault_wants_populate(inode, vmf->pgoff))
		goto fault;
	if ((vmf->flags & FAULT_FLAG_ALLOW_RETRY) &&
	    !(vmf->flags & FAULT_FLAG_TRIED)) {
		struct folio *folio;

		count_vm_event(PGMAJFAULT);
		count_memcg_event_mm(vma->vm_mm, PGMAJFAULT);
		fpin = get_file(vma->vm_file);
		release_fault_lock(vmf);
		btrfs_sf_populate(inode, pos, 16 * PAGE_SIZE, NULL);
		/*
		 * Nothing shared there (a hole, a preallocated or private
		 * extent, or populate's allocations failed): read the page as
		 * filemap_fault() would, with the fault's gfp, so that the
		 * retry finds it.  GUP's populate (mlock, MAP_POPULATE) retries
		 * without FAULT_FLAG_TRIED and must not meet the same miss.
		 */
		if (!btrfs_sf_cached_page(inode, vmf->pgoff)) {
			folio = mapping_read_folio_gfp(fpin->f_mapping, vmf->pgoff,
						       vmf->gfp_mask);
			if (!IS_ERR(folio))
				folio_put(folio);
		}
		fput(fpin);
		return VM_FAULT_MAJOR | VM_FAULT_RETRY;
	}
	btrfs_sf_populate(inode, pos, 16 * PAGE_SIZE, NULL);
fault:
	/*
	 * A read fault: its readahead leaves shared extents to populate.
	 * filemap_fault() may drop the mmap lock, and the VMA with it: the
	 * file keeps the inode for btrfs_sf_reader_end().
	 */
	if (!btrfs_sf_inode_eligible(inode))
		return filemap_fault(vmf);
	fpin = get_file(vma->vm_file);
	btrfs_sf_reader_begin(inode);
	ret = filemap_fault(vmf);
	btrfs_sf_reader_end(inode);
	fput(fpin);
	return ret;
}

/* Truncate [@lstart, @lend] from one extent cache. */
static void btrfs_sf_invalidate_cache(struct inode *inode, u64 lstart, u64 lend)
{
	struct address_space *mapping = inode->i_mapping;
	struct folio *folio;

	if (!mapping->nrpages || !filemap_range_has_page(mapping, lstart, lend))
		return;
	/*
	 * A large folio at either end may hold pages of the neighbouring
	 * extent too: btrfs merges the extent maps of extents adjacent on
	 * disk, and btrfs_sf_order() follows the map.  Remove it whole rather
	 * than cut it (a partial truncate would zero part of it and split it).
	 */
	folio = filemap_get_folio(mapping, lstart >> PAGE_SHIFT);
	if (!IS_ERR(folio)) {
		lstart = min_t(u64, lstart, folio_pos(folio));
		folio_put(folio);
	}
	folio = filemap_get_folio(mapping, lend >> PAGE_SHIFT);
	if (!IS_ERR(folio)) {
		lend = max_t(u64, lend, folio_pos(folio) + folio_size(folio) - 1);
		folio_put(folio);
	}
	truncate_inode_pages_range(mapping, lstart, lend);
}

/**
 * btrfs_sf_invalidate_range() - forget cached data of freed space
 * @fs_info: the filesystem
 * @start: logical address
 * @len: length in bytes
 *
 * Called before the range can be allocated again.  Detaches every alias of
 * the range's physical folios from its file and drops them.
 *
 * Context: process context, no tree locks held; sleeps.
 */
/* Truncate [@lstart, @lend] from the extent cache of every domain. */
static void btrfs_sf_invalidate_caches(struct btrfs_fs_info *fs_info,
				       u64 lstart, u64 lend)
{
	struct inode *inode;
	unsigned long domain;

	btrfs_sf_invalidate_cache(fs_info->sf_inode, lstart, lend);
	/* Every domain's: a cache made meanwhile has nothing of the range. */
	xa_for_each(&fs_info->sf_caches, domain, inode)
		btrfs_sf_invalidate_cache(inode, lstart, lend);
}

void btrfs_sf_invalidate_range(struct btrfs_fs_info *fs_info, u64 start, u64 len)
{
	u64 lstart = round_down(start, PAGE_SIZE);
	u64 lend = round_up(start + len, PAGE_SIZE) - 1;
	u64 gsize = BIT_ULL(BTRFS_SF_GRANULE_SHIFT);
	u64 granule, gstart, gend;
	long phase;

	if (!fs_info->sf_inode || !len)
		return;
	btrfs_sf_forget_owners(fs_info, lstart >> PAGE_SHIFT, lend >> PAGE_SHIFT);
	/*
	 * Uncompressed data: each granule of the range at its phase.  A
	 * granule the range covers whole forgets its phase afterwards, so
	 * that the next data written there is placed for its own files.
	 */
	for (granule = lstart >> BTRFS_SF_GRANULE_SHIFT;
	     lstart < BTRFS_SF_PHASED_LIMIT && granule <= lend >> BTRFS_SF_GRANULE_SHIFT;
	     granule++) {
		gstart = max(lstart, granule << BTRFS_SF_GRANULE_SHIFT);
		gend = min(lend, ((granule + 1) << BTRFS_SF_GRANULE_SHIFT) - 1);
		phase = btrfs_sf_phase(fs_info, granule);
		if (phase < 0)
			continue;
		btrfs_sf_invalidate_caches(fs_info, btrfs_sf_phased_pos(gstart, phase),
					   btrfs_sf_phased_pos(gend, phase));
		if (gend - gstart + 1 == gsize)
			xa_erase(&fs_info->sf_phases, granule);
		cond_resched();
	}
	/* The regions of compressed extents that start in the range. */
	if (lstart < BTRFS_SF_COMP_LIMIT)
		btrfs_sf_invalidate_caches(fs_info, btrfs_sf_region(fs_info, lstart),
					   btrfs_sf_region(fs_info,
							   min(lend + 1, BTRFS_SF_COMP_LIMIT)) - 1);
}
