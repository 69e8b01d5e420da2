/* SPDX-License-Identifier: GPL-2.0 */

#ifndef BTRFS_SHARED_FOLIO_H
#define BTRFS_SHARED_FOLIO_H

#include <linux/mm.h>
#include <linux/fs.h>

struct btrfs_fs_info;
struct btrfs_inode;
struct btrfs_root;

/*
 * What btrfs_sf_readahead_skip() decided for the extent map it looked up
 * last, [@start, @end) of the file; zeroed for a readahead's first folio.
 */
struct btrfs_sf_ra {
	u64 start;
	u64 end;
	bool skip;
};

#ifdef CONFIG_SHARED_FOLIO

/*
 * The largest order of a physical folio read from disk, and the default of
 * /sys/fs/btrfs/<uuid>/shared_folio/max_order where the page cache allows
 * it (MAX_PAGECACHE_ORDER): one populate batch, 2 MiB, a PMD on x86-64.
 */
#define BTRFS_SF_MAX_ORDER	9

int btrfs_sf_init(struct btrfs_fs_info *fs_info);
void btrfs_sf_exit(struct btrfs_fs_info *fs_info);
void btrfs_sf_populate(struct btrfs_inode *inode, loff_t pos, size_t count,
		       struct file_ra_state *ra);
void btrfs_sf_note_readahead(struct btrfs_inode *inode, u64 start, u64 end);
bool btrfs_sf_readahead_skip(struct btrfs_inode *inode,
			     struct readahead_control *rac, struct folio *folio,
			     struct btrfs_sf_ra *ra);
void btrfs_sf_reader_begin(struct btrfs_inode *inode);
void btrfs_sf_reader_end(struct btrfs_inode *inode);
ssize_t btrfs_sf_read(struct kiocb *iocb, struct iov_iter *to, ssize_t already_read);
void btrfs_sf_prepare_write(struct btrfs_inode *inode, loff_t pos, size_t len,
			    size_t whole, bool force_uptodate);
vm_fault_t btrfs_sf_filemap_fault(struct vm_fault *vmf);
void btrfs_sf_invalidate_range(struct btrfs_fs_info *fs_info, u64 start, u64 len);
void btrfs_sf_note_remap(struct btrfs_inode *src, u64 off,
			 struct btrfs_inode *dst, u64 destoff);
void btrfs_sf_dedupe_done(struct btrfs_inode *dst, u64 pos, u64 len);
int btrfs_sf_set_domain(struct btrfs_fs_info *fs_info, u64 subvolid, u32 domain);
u32 btrfs_sf_domain(struct btrfs_fs_info *fs_info, u64 subvolid);
void btrfs_sf_subvol_created(struct btrfs_root *parent, struct btrfs_root *src,
			     struct btrfs_root *root);

#else

static inline int btrfs_sf_init(struct btrfs_fs_info *fs_info) { return 0; }
static inline void btrfs_sf_exit(struct btrfs_fs_info *fs_info) { }
static inline void btrfs_sf_populate(struct btrfs_inode *inode, loff_t pos,
				     size_t count, struct file_ra_state *ra) { }
static inline void btrfs_sf_note_readahead(struct btrfs_inode *inode,
					   u64 start, u64 end) { }
static inline bool btrfs_sf_readahead_skip(struct btrfs_inode *inode,
					   struct readahead_control *rac,
					   struct folio *folio,
					   struct btrfs_sf_ra *ra)
{
	return false;
}

static inline void btrfs_sf_reader_begin(struct btrfs_inode *inode) { }
static inline void btrfs_sf_reader_end(struct btrfs_inode *inode) { }
static inline void btrfs_sf_prepare_write(struct btrfs_inode *inode, loff_t pos,
					  size_t len, size_t whole,
					  bool force_uptodate) { }
static inline ssize_t btrfs_sf_read(struct kiocb *iocb, struct iov_iter *to,
				    ssize_t already_read)
{
	return filemap_read(iocb, to, already_read);
}
static inline vm_fault_t btrfs_sf_filemap_fault(struct vm_fault *vmf)
{
	return filemap_fault(vmf);
}
static inline void btrfs_sf_invalidate_range(struct btrfs_fs_info *fs_info,
					     u64 start, u64 len) { }
static inline void btrfs_sf_note_remap(struct btrfs_inode *src, u64 off,
				       struct btrfs_inode *dst, u64 destoff) { }
static inline void btrfs_sf_dedupe_done(struct btrfs_inode *dst, u64 pos,
					u64 len) { }
static inline void btrfs_sf_subvol_created(struct btrfs_root *parent,
					   struct btrfs_root *src,
					   struct btrfs_root *root) { }

#endif

#endif
