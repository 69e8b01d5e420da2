// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the shared-folio core (mm/shared_folio.c).
 *
 * Each case builds real state: a pseudo filesystem with one "extent cache"
 * inode holding physical folios and three "file" inodes that get aliases,
 * then checks what the page cache, the PFN translation and the refcounts
 * say.  Built in only: the cases use page-cache internals that are not
 * exported.  Run with kunit.enable=1, or through
 * /sys/kernel/debug/kunit/shared_folio/run.
 */
#include <kunit/test.h>
#include <linux/fs.h>
#include <linux/fs_context.h>
#include <linux/pseudo_fs.h>
#include <linux/mount.h>
#include <linux/pagemap.h>
#include <linux/highmem.h>
#include <linux/swap.h>
#include <linux/mm_inline.h>
#include <linux/kthread.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/file.h>
#include <linux/mman.h>
#include <linux/rmap.h>
#include <linux/uaccess.h>
#include <linux/uio.h>
#include <linux/memblock.h>
#include <linux/migrate.h>
#include "slab.h"
#include "internal.h"
#include "shared_folio_internal.h"

#define SF_TEST_FILES	3
#define SF_TEST_PAGES	16

struct sf_test_ctx {
	struct shared_folio_stats stats;
	struct vfsmount *mnt;
	struct inode *cache;
	struct inode *file[SF_TEST_FILES];
};

/*
 * The files have no data of their own: a fault on an index without an
 * alias (say the alias was reclaimed) must fail, not read.
 */
static int sf_test_read_folio(struct file *file, struct folio *folio)
{
	folio_unlock(folio);
	return -EIO;
}

static const struct address_space_operations sf_test_file_aops = {
	.dirty_folio = noop_dirty_folio,
	.read_folio = sf_test_read_folio,
};

static int sf_test_init_fs_context(struct fs_context *fc)
{
	return init_pseudo(fc, 0x53464b54) ? 0 : -ENOMEM;
}

static struct file_system_type sf_test_fs_type = {
	.name = "shared_folio_kunit",
	.init_fs_context = sf_test_init_fs_context,
	.kill_sb = kill_anon_super,
};

static int sf_test_init(struct kunit *test)
{
	struct sf_test_ctx *ctx;
	int i;

	ctx = kunit_kzalloc(test, sizeof(*ctx), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctx);
	ctx->mnt = kern_mount(&sf_test_fs_type);
	KUNIT_ASSERT_FALSE(test, IS_ERR(ctx->mnt));
	ctx->cache = alloc_anon_inode(ctx->mnt->mnt_sb);
	KUNIT_ASSERT_FALSE(test, IS_ERR(ctx->cache));
	ctx->cache->i_mapping->a_ops = &shared_folio_aops;
	/* As btrfs's extent cache (PMD-order folios account as THPs). */
	mapping_set_large_folios(ctx->cache->i_mapping);
	i_size_write(ctx->cache, (loff_t)SF_TEST_PAGES << PAGE_SHIFT);
	for (i = 0; i < SF_TEST_FILES; i++) {
		ctx->file[i] = alloc_anon_inode(ctx->mnt->mnt_sb);
		KUNIT_ASSERT_FALSE(test, IS_ERR(ctx->file[i]));
		ctx->file[i]->i_mapping->a_ops = &sf_test_file_aops;
		i_size_write(ctx->file[i], (loff_t)SF_TEST_PAGES << PAGE_SHIFT);
	}
	test->priv = ctx;
	return 0;
}

static void sf_test_exit(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	int i;

	for (i = 0; i < SF_TEST_FILES; i++)
		iput(ctx->file[i]);
	iput(ctx->cache);
	kern_unmount(ctx->mnt);
}

/* A locked, uptodate physical folio at @index of the cache, filled with @c. */
static struct folio *sf_test_physical(struct kunit *test, pgoff_t index, int c)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio;

	folio = filemap_alloc_folio(GFP_KERNEL, 0);
	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(ctx->cache->i_mapping, folio,
						index, GFP_KERNEL), 0);
	memset(folio_address(folio), c, PAGE_SIZE);
	folio_mark_uptodate(folio);
	KUNIT_ASSERT_NOT_NULL(test, shared_folio_attach(folio, &ctx->stats, NULL,
							GFP_KERNEL));
	lru_add_drain();
	return folio;
}

static bool sf_test_filled(const void *p, int c)
{
	return !memchr_inv(p, c, PAGE_SIZE);
}

static struct address_space *sf_test_map(struct kunit *test, int i)
{
	return ((struct sf_test_ctx *)test->priv)->file[i]->i_mapping;
}

static int sf_test_add(struct folio *folio, struct address_space *mapping,
		       pgoff_t index)
{
	return shared_folio_add_alias(folio, &folio->page, mapping, index, NULL,
				      GFP_KERNEL);
}

/* An alias is found at its index and resolves to the physical memory. */
static void sf_test_alias_resolves_to_physical(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 5, 0x5a);
	struct address_space *map = sf_test_map(test, 0);
	int base = folio_ref_count(folio);
	struct folio *alias;
	void *p;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map, 3), 0);
	KUNIT_EXPECT_EQ(test, sf_test_add(folio, map, 3), -EEXIST);
	folio_unlock(folio);

	alias = filemap_get_folio(map, 3);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_PTR_NE(test, alias, folio);
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(alias));
	KUNIT_EXPECT_FALSE(test, folio_is_sf_alias(folio));
	KUNIT_EXPECT_PTR_EQ(test, sf_alias_physical(alias), folio);
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(folio));
	KUNIT_EXPECT_PTR_EQ(test, folio_address(alias), folio_address(folio));
	KUNIT_EXPECT_PTR_EQ(test, folio_zone(alias), folio_zone(folio));
	KUNIT_EXPECT_EQ(test, folio_nid(alias), folio_nid(folio));
	p = kmap_local_folio(alias, 0);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(p, 0x5a));
	kunmap_local(p);
	KUNIT_EXPECT_PTR_EQ(test, alias->mapping, map);
	KUNIT_EXPECT_EQ(test, alias->index, 3);
	KUNIT_EXPECT_TRUE(test, folio_test_uptodate(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_dirty(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_lru(alias));
	KUNIT_EXPECT_FALSE(test, folio_mapped(alias));
	KUNIT_EXPECT_EQ(test, folio_nr_pages(alias), 1);
	KUNIT_EXPECT_EQ(test, map->nrpages, 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);
	/* The alias pins the physical folio once. */
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 1);
	folio_put(alias);
	folio_put(folio);
}

/* Removing aliases (truncation) frees them and drops their references. */
static void sf_test_truncate_frees_alias(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio = sf_test_physical(test, 1, 0x11);
	int base = folio_ref_count(folio);
	int i;

	for (i = 0; i < SF_TEST_FILES; i++)
		KUNIT_ASSERT_EQ(test, sf_test_add(folio, sf_test_map(test, i), 7), 0);
	folio_unlock(folio);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), SF_TEST_FILES);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + SF_TEST_FILES);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), SF_TEST_FILES);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.folios), 1);

	truncate_inode_pages(sf_test_map(test, 1), 0);
	KUNIT_EXPECT_EQ(test, sf_test_map(test, 1)->nrpages, 0);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), SF_TEST_FILES - 1);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + SF_TEST_FILES - 1);

	/* A partial truncate drops the alias and never zeroes shared data. */
	truncate_inode_pages_range(sf_test_map(test, 0),
				   ((loff_t)7 << PAGE_SHIFT) + 100, -1);
	KUNIT_EXPECT_EQ(test, sf_test_map(test, 0)->nrpages, 0);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(folio), 0x11));
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 1);

	truncate_inode_pages(sf_test_map(test, 2), 0);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base);
	folio_put(folio);
}

/* A write lookup replaces the alias by a private copy; the original stays. */
static void sf_test_unshare_on_write(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio = sf_test_physical(test, 2, 0x22);
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	int base = folio_ref_count(folio);
	struct folio *priv, *other;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map0, 4), 0);
	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map1, 4), 0);
	folio_unlock(folio);

	priv = __filemap_get_folio(map0, 4, FGP_LOCK | FGP_WRITE, GFP_KERNEL);
	KUNIT_ASSERT_FALSE(test, IS_ERR(priv));
	KUNIT_EXPECT_FALSE(test, folio_is_sf_alias(priv));
	KUNIT_EXPECT_NE(test, folio_pfn(priv), folio_pfn(folio));
	KUNIT_EXPECT_TRUE(test, folio_test_uptodate(priv));
	KUNIT_EXPECT_PTR_EQ(test, priv->mapping, map0);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(priv), 0x22));
	memset(folio_address(priv), 0xee, PAGE_SIZE);
	folio_unlock(priv);
	folio_put(priv);

	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(folio), 0x22));
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.unshares), 1);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 1);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 1);

	other = filemap_get_folio(map1, 4);
	KUNIT_ASSERT_FALSE(test, IS_ERR(other));
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(other));
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(other), 0x22));
	folio_put(other);

	priv = filemap_get_folio(map0, 4);
	KUNIT_ASSERT_FALSE(test, IS_ERR(priv));
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(priv), 0xee));
	folio_put(priv);
	folio_put(folio);
}

/*
 * A write that fills pages whole gets private folios in their aliases'
 * places without a copy; a private folio in the range, and the other
 * file's alias, stay.
 */
static void sf_test_overwrite_without_copy(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *a = sf_test_physical(test, 3, 0x33);
	struct folio *b = sf_test_physical(test, 5, 0x55);
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct address_space *map2 = sf_test_map(test, 2);
	int base = folio_ref_count(a);
	struct folio *priv, *other;
	int i;

	KUNIT_ASSERT_EQ(test, sf_test_add(a, map0, 8), 0);
	KUNIT_ASSERT_EQ(test, sf_test_add(a, map1, 8), 0);
	KUNIT_ASSERT_EQ(test, sf_test_add(b, map0, 10), 0);
	folio_unlock(a);
	folio_unlock(b);
	priv = filemap_alloc_folio(GFP_KERNEL, 0);
	KUNIT_ASSERT_NOT_NULL(test, priv);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(map0, priv, 9, GFP_KERNEL), 0);
	folio_mark_uptodate(priv);
	folio_unlock(priv);

	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map0, 8, 10, 10, GFP_KERNEL), 2);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 3);
	other = filemap_get_folio(map0, 9);
	KUNIT_ASSERT_PTR_EQ(test, other, priv);
	folio_put(other);
	folio_put(priv);	/* the reference filemap_alloc_folio() gave */
	/* Private, in the aliases' places, to be written: not uptodate. */
	other = filemap_get_folio(map0, 8);
	KUNIT_ASSERT_FALSE(test, IS_ERR(other));
	KUNIT_EXPECT_FALSE(test, folio_is_sf_alias(other));
	KUNIT_EXPECT_FALSE(test, folio_test_uptodate(other));
	KUNIT_EXPECT_FALSE(test, folio_test_locked(other));
	KUNIT_EXPECT_NE(test, folio_pfn(other), folio_pfn(a));
	folio_put(other);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(a), 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(b), 0);
	KUNIT_EXPECT_EQ(test, folio_ref_count(a), base + 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.unshares), 2);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.overwrites), 2);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(a), 0x33));

	other = filemap_get_folio(map1, 8);
	KUNIT_ASSERT_FALSE(test, IS_ERR(other));
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(other));
	folio_put(other);

	/* 40 aliases of one page in one file: two batches, spares carried. */
	folio_lock(b);
	for (i = 0; i < 40; i++)
		KUNIT_ASSERT_EQ(test, sf_test_add(b, map2, i), 0);
	folio_unlock(b);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(b), 40);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map2, 0, 39, 39, GFP_KERNEL), 40);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(b), 0);
	KUNIT_EXPECT_EQ(test, map2->nrpages, 40);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.overwrites), 42);
	for (i = 0; i < 40; i++) {
		other = filemap_get_folio(map2, i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(other));
		KUNIT_EXPECT_FALSE(test, folio_is_sf_alias(other));
		folio_put(other);
	}
	truncate_inode_pages(map2, 0);

	/* Nothing left to remove: a second call finds nothing. */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map0, 0, SF_TEST_PAGES - 1,
						     SF_TEST_PAGES - 1, GFP_KERNEL), 0);
	truncate_inode_pages(map0, 0);
	folio_put(a);
	folio_put(b);
}

/* ->release_folio (reclaim) detaches every alias and the descriptor. */
static void sf_test_release_detaches_all(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio = sf_test_physical(test, 3, 0x33);
	int base = folio_ref_count(folio);
	int i;

	for (i = 0; i < SF_TEST_FILES; i++)
		KUNIT_ASSERT_EQ(test, sf_test_add(folio, sf_test_map(test, i), i), 0);
	KUNIT_EXPECT_TRUE(test, sf_folio_release(folio));
	KUNIT_EXPECT_FALSE(test, folio_test_private(folio));
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.reclaims), SF_TEST_FILES);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.folios), 0);
	for (i = 0; i < SF_TEST_FILES; i++) {
		KUNIT_EXPECT_EQ(test, sf_test_map(test, i)->nrpages, 0);
		KUNIT_EXPECT_TRUE(test, IS_ERR(filemap_get_folio(sf_test_map(test, i), i)));
	}
	/* The aliases' and the descriptor's references are gone. */
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base - 1);
	folio_unlock(folio);
	folio_put(folio);
}

/* A busy alias is detached too, and keeps the physical folio until freed. */
static void sf_test_busy_alias_pins_physical(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 4, 0x44);
	struct address_space *map = sf_test_map(test, 0);
	int base = folio_ref_count(folio);
	struct folio *alias;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map, 9), 0);
	folio_unlock(folio);
	alias = filemap_get_folio(map, 9);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));

	/* Tear the extent cache down, as when the extent is freed. */
	truncate_inode_pages(((struct sf_test_ctx *)test->priv)->cache->i_mapping, 0);
	KUNIT_EXPECT_EQ(test, map->nrpages, 0);
	KUNIT_EXPECT_NULL(test, alias->mapping);
	KUNIT_EXPECT_NULL(test, folio->mapping);
	/* Still readable through the busy alias, still pinned by it. */
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(alias), 0x44));
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base - 2 + 1);
	folio_put(alias);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base - 2);
	folio_put(folio);
}

/*
 * Accessing an alias marks the physical folio, which reclaim ages, and the
 * alias itself, which the alias shrinker ages.
 */
static void sf_test_mark_accessed_physical(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 6, 0x66);
	struct address_space *map = sf_test_map(test, 2);
	struct folio *alias;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map, 0), 0);
	folio_unlock(folio);
	folio_clear_referenced(folio);
	alias = filemap_get_folio(map, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	folio_mark_accessed(alias);
	/* The alias's own bits age it for the alias shrinker. */
	KUNIT_EXPECT_TRUE(test, folio_test_referenced(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_active(alias));
	if (!lru_gen_enabled())
		KUNIT_EXPECT_TRUE(test, folio_test_referenced(folio));
	folio_mark_accessed(alias);
	KUNIT_EXPECT_TRUE(test, folio_test_active(alias));
	folio_put(alias);
	folio_put(folio);
}

struct sf_test_truncater {
	struct address_space *map;
	struct completion done;
};

static int sf_test_truncate_fn(void *data)
{
	struct sf_test_truncater *tr = data;

	truncate_inode_pages(tr->map, 0);
	complete(&tr->done);
	return 0;
}

/*
 * A lockless page-cache lookup that loaded an alias from the xarray just
 * before another CPU truncated and freed it must still find an alias, with
 * a zero refcount, as it would find a freed memmap folio.  The window is
 * held open here: the reader stays in its RCU read section while a kthread
 * truncates the file.  Were the alias freed at once, the reads below would
 * be a use-after-free, which KASAN reports and KUnit counts as a failure
 * of this case.
 */
static void sf_test_freed_alias_outlives_rcu_reader(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 8, 0x88);
	struct address_space *map = sf_test_map(test, 1);
	struct sf_test_truncater tr = { .map = map };
	int base = folio_ref_count(folio);
	struct task_struct *t;
	struct folio *alias;
	unsigned long end;
	bool truncated, got;

	if (num_online_cpus() < 2 && !IS_ENABLED(CONFIG_PREEMPT_RCU)) {
		folio_unlock(folio);
		folio_put(folio);
		kunit_skip(test, "needs a second CPU to truncate on");
	}
	init_completion(&tr.done);
	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map, 3), 0);
	folio_unlock(folio);
	t = kthread_create(sf_test_truncate_fn, &tr, "sf-test-truncate");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));

	rcu_read_lock();
	alias = xa_load(&map->i_pages, 3);
	wake_up_process(t);
	end = jiffies + 10 * HZ;
	while (!(truncated = completion_done(&tr.done)) && time_before(jiffies, end))
		cpu_relax();
	KUNIT_EXPECT_TRUE(test, truncated);
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(alias));
	KUNIT_EXPECT_EQ(test, map->nrpages, 0);
	/* What find_get_entry() and friends do with what they loaded. */
	KUNIT_EXPECT_EQ(test, folio_ref_count(alias), 0);
	got = folio_try_get(alias);
	KUNIT_EXPECT_FALSE(test, got);
	rcu_read_unlock();
	if (got)
		folio_put(alias);

	wait_for_completion(&tr.done);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base);
	folio_put(folio);
}

struct sf_test_releaser {
	struct folio *folio;
	bool released;
	struct completion done;
};

static int sf_test_release_fn(void *data)
{
	struct sf_test_releaser *r = data;

	folio_lock(r->folio);
	r->released = sf_folio_release(r->folio);
	folio_unlock(r->folio);
	complete(&r->done);
	return 0;
}

/*
 * Reclaim (->release_folio) of a physical folio two of whose aliases are
 * locked by other tasks (concurrent unsharers) returns at once: it detaches
 * the free alias and leaves the locked ones.  A walk that remembered only
 * the last skipped alias would alternate between the two for ever, holding
 * the physical folio lock (kswapd, compaction and drop_caches would spin).
 */
static void sf_test_release_with_locked_aliases(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 10, 0xaa);
	struct sf_test_releaser r = { .folio = folio };
	struct folio *a0, *a1;
	struct task_struct *t;
	bool finished;
	int i;

	if (num_online_cpus() < 2 && !IS_ENABLED(CONFIG_PREEMPTION)) {
		folio_unlock(folio);
		folio_put(folio);
		kunit_skip(test, "a livelocked walker would hold the only CPU");
	}
	for (i = 0; i < SF_TEST_FILES; i++)
		KUNIT_ASSERT_EQ(test, sf_test_add(folio, sf_test_map(test, i), 1), 0);
	folio_unlock(folio);
	a0 = filemap_lock_folio(sf_test_map(test, 0), 1);
	KUNIT_ASSERT_FALSE(test, IS_ERR(a0));
	a1 = filemap_lock_folio(sf_test_map(test, 1), 1);
	KUNIT_ASSERT_FALSE(test, IS_ERR(a1));
	init_completion(&r.done);
	t = kthread_run(sf_test_release_fn, &r, "sf-test-release");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	finished = wait_for_completion_timeout(&r.done, 2 * HZ);
	KUNIT_EXPECT_TRUE(test, finished);
	/* Lets a livelocked walker go on and finish. */
	folio_unlock(a0);
	folio_unlock(a1);
	if (!finished)
		wait_for_completion(&r.done);
	KUNIT_EXPECT_FALSE(test, r.released);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 2);
	KUNIT_EXPECT_EQ(test, sf_test_map(test, 2)->nrpages, 0);
	folio_put(a0);
	folio_put(a1);
	folio_put(folio);
}

/*
 * __remove_mapping() (fadvise DONTNEED, drop_caches, the inode LRU, a splice
 * steal) freezes an alias's refcount at zero and only then unlinks it from
 * the descriptor.  An invalidation of the extent cache in that window (the
 * extent was freed: dedupe leaves aliases on the old extent) must wait for
 * the unlink: skipping the frozen alias would free the descriptor (a WARN)
 * and the unlink would then lock freed memory.  The
 * window is held open here; the real remover holds the mapping's xa_lock
 * across it.
 */
static void sf_test_invalidate_waits_for_frozen_alias(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio = sf_test_physical(test, 11, 0xbb);
	struct address_space *map = sf_test_map(test, 0);
	struct sf_test_truncater tr = { .map = ctx->cache->i_mapping };
	struct task_struct *t;
	struct folio *alias;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map, 2), 0);
	folio_unlock(folio);
	alias = filemap_lock_folio(map, 2);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	/* As __remove_mapping(): freeze the cache's and our reference... */
	KUNIT_ASSERT_TRUE(test, folio_ref_freeze(alias, 2));
	init_completion(&tr.done);
	t = kthread_run(sf_test_truncate_fn, &tr, "sf-test-invalidate");
	KUNIT_ASSERT_FALSE(test, IS_ERR(t));
	msleep(200);
	KUNIT_EXPECT_FALSE(test, completion_done(&tr.done));
	KUNIT_EXPECT_TRUE(test, folio_test_private(folio));
	/* ...then remove it from the mapping, which unlinks it. */
	spin_lock(&map->host->i_lock);
	xa_lock_irq(&map->i_pages);
	__filemap_remove_folio(alias, NULL);
	xa_unlock_irq(&map->i_pages);
	spin_unlock(&map->host->i_lock);
	folio_ref_unfreeze(alias, 1);
	folio_unlock(alias);
	folio_put(alias);
	wait_for_completion(&tr.done);
	KUNIT_EXPECT_EQ(test, map->nrpages, 0);
	KUNIT_EXPECT_EQ(test, ctx->cache->i_mapping->nrpages, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.folios), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
	folio_put(folio);
}

/* Aliases are charged to the creator's memcg; NULL is no alias. */
static void sf_test_alias_accounting(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 12, 0xcc);
	struct folio *alias;
	struct page stack_copy;

	KUNIT_EXPECT_FALSE(test, page_is_sf_alias(NULL));
	memcpy(&stack_copy, &folio->page, sizeof(stack_copy));
	KUNIT_EXPECT_EQ(test, page_is_sf_alias(&stack_copy),
			!is_vmalloc_addr(&stack_copy) &&
			(unsigned long)&stack_copy < (unsigned long)high_memory);
	KUNIT_ASSERT_EQ(test, sf_test_add(folio, sf_test_map(test, 0), 8), 0);
	folio_unlock(folio);
	alias = filemap_get_folio(sf_test_map(test, 0), 8);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_TRUE(test, page_is_sf_alias(&alias->page));
	/* Only the zone and node links of the physical page's flags. */
	KUNIT_EXPECT_EQ(test, alias->flags & ~((1UL << NR_PAGEFLAGS) - 1) &
			~((ZONES_MASK << ZONES_PGSHIFT) | (NODES_MASK << NODES_PGSHIFT)),
			0);
	KUNIT_EXPECT_PTR_EQ(test, folio_zone(alias), folio_zone(folio));

	/* A preallocated alias is used first; what is left is freed. */
	{
		struct shared_folio_prealloc pa = { };

		shared_folio_prealloc(&pa, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, pa.sfa);
		KUNIT_ASSERT_NOT_NULL(test, pa.sf);
		folio_lock(folio);
		KUNIT_EXPECT_EQ(test, shared_folio_add_alias(folio, &folio->page,
							     sf_test_map(test, 1), 8,
							     &pa, GFP_NOWAIT), 0);
		folio_unlock(folio);
		KUNIT_EXPECT_NULL(test, pa.sfa);
		KUNIT_EXPECT_NOT_NULL(test, pa.sf);	/* already attached */
		KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 2);
		shared_folio_prealloc_free(&pa);
		KUNIT_EXPECT_NULL(test, pa.sf);
	}
	if (IS_ENABLED(CONFIG_MEMCG))
		KUNIT_EXPECT_TRUE(test, virt_to_slab(folio_sf_alias(alias))->slab_cache->flags &
				  SLAB_ACCOUNT);
	folio_put(alias);
	folio_put(folio);
}

/*
 * Mapping.  A file of the pseudo filesystem is mapped into the test
 * thread's own mm (kunit_vm_mmap()) and touched with get_user(), which
 * takes a real page fault.  Only indices that hold an alias are touched:
 * the files have no ->read_folio.  sf_test_fops maps with fault-around,
 * sf_test_fops_nomap without, so that a fault goes to filemap_fault() and
 * finish_fault().
 */
static const struct vm_operations_struct sf_test_vm_ops = {
	.fault = filemap_fault,
	.map_pages = filemap_map_pages,
};

static const struct vm_operations_struct sf_test_vm_ops_nomap = {
	.fault = filemap_fault,
};

static int sf_test_mmap(struct file *file, struct vm_area_struct *vma)
{
	vma->vm_ops = &sf_test_vm_ops;
	return 0;
}

static int sf_test_mmap_nomap(struct file *file, struct vm_area_struct *vma)
{
	vma->vm_ops = &sf_test_vm_ops_nomap;
	return 0;
}

static const struct file_operations sf_test_fops = { .mmap = sf_test_mmap };
static const struct file_operations sf_test_fops_nomap = { .mmap = sf_test_mmap_nomap };
/* As btrfs's: mappings of 2 MiB or more at an address aligned for a PMD. */
static const struct file_operations sf_test_fops_pmd = {
	.mmap = sf_test_mmap,
	.get_unmapped_area = thp_get_unmapped_area,
};

static const struct file_operations sf_test_fops_pmd_nomap = {
	.mmap = sf_test_mmap_nomap,
	.get_unmapped_area = thp_get_unmapped_area,
};

/* A MAP_SHARED mapping of a file opened for writing is VM_SHARED. */
static unsigned long __sf_test_mmap_file(struct kunit *test, int i,
					 const struct file_operations *fops,
					 unsigned long flags, unsigned long len)
{
	struct sf_test_ctx *ctx = test->priv;
	struct file *file;
	unsigned long addr;

	ihold(ctx->file[i]);
	file = alloc_file_pseudo(ctx->file[i], ctx->mnt, "sf_test",
				 flags & MAP_SHARED ? O_RDWR : O_RDONLY, fops);
	if (IS_ERR(file)) {
		iput(ctx->file[i]);
		KUNIT_FAIL_AND_ABORT(test, "alloc_file_pseudo: %ld", PTR_ERR(file));
	}
	addr = kunit_vm_mmap(test, file, 0, len, PROT_READ, flags, 0);
	fput(file);		/* the mapping holds the file */
	KUNIT_ASSERT_FALSE(test, IS_ERR_VALUE(addr) || !addr);
	return addr;
}

static unsigned long sf_test_mmap_file(struct kunit *test, int i,
				       const struct file_operations *fops,
				       unsigned long flags)
{
	return __sf_test_mmap_file(test, i, fops, flags,
				   SF_TEST_PAGES << PAGE_SHIFT);
}

/* get_user() of one byte: a page fault if the page is not mapped yet. */
static int sf_test_touch(unsigned long addr)
{
	char c;

	if (get_user(c, (char __user *)addr))
		return -1;
	return (unsigned char)c;
}

struct sf_test_ptes {
	unsigned int nr;
	unsigned long addr[16];
};

static bool sf_test_count_pte(struct folio *folio, struct vm_area_struct *vma,
			      unsigned long address, void *arg)
{
	DEFINE_FOLIO_VMA_WALK(pvmw, folio, vma, address, 0);
	struct sf_test_ptes *p = arg;

	while (page_vma_mapped_walk(&pvmw))
		if (p->nr < ARRAY_SIZE(p->addr))
			p->addr[p->nr++] = pvmw.address;
	return true;
}

static struct sf_test_ptes sf_test_walk(struct folio *folio)
{
	struct sf_test_ptes p = { };
	struct rmap_walk_control rwc = {
		.rmap_one = sf_test_count_pte,
		.arg = &p,
	};

	folio_lock(folio);
	rmap_walk(folio, &rwc);
	folio_unlock(folio);
	return p;
}

/*
 * A read fault on an alias maps the physical page, in MAP_SHARED and
 * MAP_PRIVATE mappings, with and without fault-around; the physical
 * folio's mapcount counts the PTEs, and rmap_walk() finds each of them
 * through the alias of its file, at that file's index.  try_to_unmap()
 * reaches them all, but leaves alone the one whose alias is locked.
 * Unsharing one file zaps only that file's PTE; truncating another file
 * zaps its own.
 */
static void sf_test_rmap_walks_aliases(struct kunit *test)
{
	struct folio *folio = sf_test_physical(test, 3, 0x3c);
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct folio *alias0, *new;
	unsigned long a0, a1, a2, x0, x1;
	struct sf_test_ptes p;

	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map0, 7), 0);
	KUNIT_ASSERT_EQ(test, sf_test_add(folio, map1, 2), 0);
	KUNIT_ASSERT_EQ(test, sf_test_add(folio, sf_test_map(test, 2), 9), 0);
	folio_unlock(folio);
	a0 = sf_test_mmap_file(test, 0, &sf_test_fops, MAP_SHARED);
	a1 = sf_test_mmap_file(test, 1, &sf_test_fops_nomap, MAP_PRIVATE);
	a2 = sf_test_mmap_file(test, 2, &sf_test_fops, MAP_SHARED);
	mmap_read_lock(current->mm);
	KUNIT_EXPECT_TRUE(test, vma_lookup(current->mm, a0)->vm_flags & VM_SHARED);
	mmap_read_unlock(current->mm);

	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 7 * PAGE_SIZE), 0x3c);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 2 * PAGE_SIZE), 0x3c);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 2);
	/* The aliases themselves are never mapped. */
	alias0 = filemap_get_folio(map0, 7);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias0));
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(alias0));
	KUNIT_EXPECT_FALSE(test, folio_mapped(alias0));
	KUNIT_EXPECT_TRUE(test, sf_alias_maybe_mapped(alias0));

	p = sf_test_walk(folio);
	KUNIT_EXPECT_EQ(test, p.nr, 2);
	x0 = a0 + 7 * PAGE_SIZE;
	x1 = a1 + 2 * PAGE_SIZE;
	KUNIT_EXPECT_TRUE(test, (p.addr[0] == x0 && p.addr[1] == x1) ||
			  (p.addr[1] == x0 && p.addr[0] == x1));

	/* A busy alias is skipped: its file's PTE stays. */
	folio_lock(folio);
	KUNIT_ASSERT_TRUE(test, folio_trylock(alias0));
	try_to_unmap(folio, 0);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 1);
	folio_unlock(alias0);
	folio_unlock(folio);
	folio_lock(folio);
	try_to_unmap(folio, 0);
	folio_unlock(folio);
	KUNIT_EXPECT_FALSE(test, folio_mapped(folio));

	/* Unsharing file 0 zaps its PTE only; file 1 keeps the page. */
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 7 * PAGE_SIZE), 0x3c);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 2 * PAGE_SIZE), 0x3c);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 2);
	new = sf_alias_unshare(map0, alias0, GFP_KERNEL);
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(new));
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 1);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 7 * PAGE_SIZE), 0x3c);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 1);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 1);
	folio_put(new);
	p = sf_test_walk(folio);
	KUNIT_EXPECT_EQ(test, p.nr, 1);
	KUNIT_EXPECT_EQ(test, p.addr[0], a1 + 2 * PAGE_SIZE);

	/* Truncating file 1 zaps its PTE before its alias goes. */
	truncate_inode_pages(map1, 0);
	KUNIT_EXPECT_FALSE(test, folio_mapped(folio));
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);

	vm_munmap(a0, SF_TEST_PAGES << PAGE_SHIFT);
	vm_munmap(a1, SF_TEST_PAGES << PAGE_SHIFT);
	vm_munmap(a2, SF_TEST_PAGES << PAGE_SHIFT);
	flush_delayed_fput();
	folio_put(folio);
}

/*
 * A locked, uptodate physical folio of order @order at @index of the cache,
 * page i filled with @c + i, with a descriptor; movable, for migration.
 */
static struct folio *sf_test_physical_large(struct kunit *test, pgoff_t index,
					    unsigned int order, int c)
{
	struct sf_test_ctx *ctx = test->priv;
	struct folio *folio;
	int i;

	folio = filemap_alloc_folio(GFP_HIGHUSER_MOVABLE, order);
	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(ctx->cache->i_mapping, folio, index,
						GFP_KERNEL), 0);
	for (i = 0; i < 1 << order; i++)
		memset(kmap_local_folio(folio, i * PAGE_SIZE), c + i, PAGE_SIZE);
	folio_mark_uptodate(folio);
	KUNIT_ASSERT_NOT_NULL(test, shared_folio_attach(folio, &ctx->stats, NULL,
							GFP_KERNEL));
	lru_add_drain();
	return folio;
}

/*
 * Migrate @folio, on the LRU, to a new folio; our reference goes (migration
 * expects only the references it knows).
 */
static void sf_test_migrate(struct kunit *test, struct folio *folio)
{
	struct migration_target_control mtc = {
		.nid = NUMA_NO_NODE,
		.gfp_mask = GFP_HIGHUSER_MOVABLE | __GFP_RETRY_MAYFAIL,
	};
	LIST_HEAD(list);

	KUNIT_ASSERT_TRUE(test, folio_isolate_lru(folio));
	node_stat_mod_folio(folio, NR_ISOLATED_FILE, folio_nr_pages(folio));
	list_add(&folio->lru, &list);
	folio_put(folio);
	KUNIT_EXPECT_EQ(test, migrate_pages(&list, alloc_migration_target, NULL,
					    (unsigned long)&mtc, MIGRATE_SYNC,
					    MR_COMPACTION, NULL), 0);
	if (!list_empty(&list))
		putback_movable_pages(&list);
}

/*
 * A large physical folio (DOC: Large physical folios): an order-0 alias per
 * page, of any of its pages at any index; each resolves to its own page,
 * maps its own page, and the reverse map finds each PTE exactly once (a
 * walk that took the cache index for the file's would scan on from each
 * alias's page and count its neighbours again).  An unshare copies the
 * alias's page; migration keeps every alias on its page of the new folio.
 */
static void sf_test_large_physical(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct folio *folio, *alias, *new;
	unsigned long a0, a1, pfn0;
	struct sf_test_ptes p;
	int base, i;

	folio = sf_test_physical_large(test, 4, 2, 0x40);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.folios), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.pages), 4);
	base = folio_ref_count(folio);

	for (i = 0; i < 4; i++)
		KUNIT_ASSERT_EQ(test, shared_folio_add_alias(folio, folio_page(folio, i),
							     map0, i, NULL, GFP_KERNEL), 0);
	KUNIT_ASSERT_EQ(test, shared_folio_add_alias(folio, folio_page(folio, 2),
						     map1, 10, NULL, GFP_KERNEL), 0);
	/*
	 * Never split while it has a descriptor: the release would detach
	 * every alias first.
	 */
	KUNIT_EXPECT_EQ(test, split_folio(folio), -EBUSY);
	KUNIT_EXPECT_EQ(test, folio_order(folio), 2);
	folio_unlock(folio);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 5);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 5);
	KUNIT_EXPECT_EQ(test, shared_folio_bytes_saved(&ctx->stats), PAGE_SIZE);
	for (i = 0; i < 4; i++) {
		alias = filemap_get_folio(map0, i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
		KUNIT_EXPECT_PTR_EQ(test, sf_alias_physical(alias), folio);
		KUNIT_EXPECT_PTR_EQ(test, sf_alias_page(alias), folio_page(folio, i));
		KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(folio) + i);
		KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(alias), 0x40 + i));
		folio_put(alias);
	}

	a0 = sf_test_mmap_file(test, 0, &sf_test_fops, MAP_SHARED);
	a1 = sf_test_mmap_file(test, 1, &sf_test_fops_nomap, MAP_PRIVATE);
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + i * PAGE_SIZE), 0x40 + i);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 10 * PAGE_SIZE), 0x42);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 5);
	p = sf_test_walk(folio);
	KUNIT_EXPECT_EQ(test, p.nr, 5);

	folio_lock(folio);
	try_to_unmap(folio, 0);
	folio_unlock(folio);
	KUNIT_EXPECT_FALSE(test, folio_mapped(folio));

	/* Unsharing file 0's index 2 copies page 2, and zaps only its PTE. */
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + i * PAGE_SIZE), 0x40 + i);
	alias = filemap_get_folio(map0, 2);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	new = sf_alias_unshare(map0, alias, GFP_KERNEL);
	KUNIT_ASSERT_FALSE(test, IS_ERR_OR_NULL(new));
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(new), 0x42));
	folio_put(new);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 3);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 4);

	/* Migration: each alias keeps its page's offset in the new folio. */
	pfn0 = folio_pfn(folio);
	sf_test_migrate(test, folio);
	alias = filemap_get_folio(map1, 10);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	new = sf_alias_physical(alias);
	KUNIT_EXPECT_NE(test, folio_pfn(new), pfn0);
	KUNIT_EXPECT_EQ(test, folio_order(new), 2);
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(new) + 2);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(alias), 0x42));
	folio_put(alias);
	for (i = 0; i < 4; i++) {
		if (i == 2)
			continue;
		alias = filemap_get_folio(map0, i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
		KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(new) + i);
		folio_put(alias);
		KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + i * PAGE_SIZE), 0x40 + i);
	}
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 10 * PAGE_SIZE), 0x42);

	vm_munmap(a0, SF_TEST_PAGES << PAGE_SHIFT);
	vm_munmap(a1, SF_TEST_PAGES << PAGE_SHIFT);
	flush_delayed_fput();
	truncate_inode_pages(map0, 0);
	truncate_inode_pages(map1, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
}

/* Store @entry over the four indices from @index of @mapping (a shadow). */
static void sf_test_store_order2(struct address_space *mapping, pgoff_t index,
				 void *entry)
{
	XA_STATE_ORDER(xas, &mapping->i_pages, index, 2);

	do {
		xas_lock_irq(&xas);
		xas_store(&xas, entry);
		xas_unlock_irq(&xas);
	} while (xas_nomem(&xas, GFP_KERNEL));
}

/* filemap_read() of [@pos, @pos + @len) of file @i into @buf. */
static ssize_t sf_test_read(struct kunit *test, int i, loff_t pos, void *buf,
			    size_t len)
{
	struct sf_test_ctx *ctx = test->priv;
	struct kvec kvec = { .iov_base = buf, .iov_len = len };
	struct iov_iter iter;
	struct kiocb kiocb;
	struct file *file;
	ssize_t ret;

	ihold(ctx->file[i]);
	file = alloc_file_pseudo(ctx->file[i], ctx->mnt, "sf_test", O_RDONLY,
				 &sf_test_fops);
	if (IS_ERR(file)) {
		iput(ctx->file[i]);
		KUNIT_FAIL_AND_ABORT(test, "alloc_file_pseudo: %ld", PTR_ERR(file));
	}
	init_sync_kiocb(&kiocb, file);
	kiocb.ki_pos = pos;
	iov_iter_kvec(&iter, ITER_DEST, &kvec, 1, len);
	ret = filemap_read(&kiocb, &iter, 0);
	fput(file);
	return ret;
}

/*
 * The large aliases both large-alias cases start from: pages 4-7 of
 * @folio (order 3, locked) at file 0's index 4, the whole folio at file
 * 1's index 8.
 */
static void sf_test_add_two_large(struct kunit *test, struct folio *folio)
{
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, folio_page(folio, 4),
							   2, sf_test_map(test, 0), 4,
							   NULL, GFP_KERNEL), 0);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, folio_page(folio, 0),
							   3, sf_test_map(test, 1), 8,
							   NULL, GFP_KERNEL), 0);
}

/*
 * A large alias (DOC: Large aliases): one object and one multi-index entry
 * for an aligned run of a large physical folio's pages; page_to_pfn() and
 * page_folio() of it are right; read() copies each page's own bytes,
 * across pages and from the middle of one; a lookup of one index splits
 * it into order-0 aliases of the same pages (sf_test_large_alias_mapped()
 * maps one); a lookup that must not wait leaves it; a busy range refuses it;
 * migration retargets it; eviction and the extent cache's truncate remove
 * it.
 */
static void sf_test_large_alias(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct address_space *map2 = sf_test_map(test, 2);
	struct folio *folio, *alias, *new;
	unsigned long pfn0;
	char *buf;
	int base, i;

	buf = kunit_kmalloc(test, 4 * PAGE_SIZE, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, buf);
	folio = sf_test_physical_large(test, 8, 3, 0x50);
	base = folio_ref_count(folio);

	/* Pages 4-7 at file 0's index 4; the whole folio at file 1's 8. */
	sf_test_add_two_large(test, folio);
	/* Taken: an order-0 alias inside it, a large one over an order-0. */
	KUNIT_EXPECT_EQ(test, shared_folio_add_alias(folio, folio_page(folio, 5),
						     map0, 5, NULL, GFP_KERNEL), -EEXIST);
	KUNIT_ASSERT_EQ(test, shared_folio_add_alias(folio, folio_page(folio, 1),
						     map2, 1, NULL, GFP_KERNEL), 0);
	KUNIT_EXPECT_EQ(test, shared_folio_add_large_alias(folio, folio_page(folio, 0),
							   2, map2, 0, NULL,
							   GFP_KERNEL), -EEXIST);
	folio_unlock(folio);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 8);
	KUNIT_EXPECT_EQ(test, map2->nrpages, 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 3);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 3);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 13);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 2);
	KUNIT_EXPECT_EQ(test, shared_folio_bytes_saved(&ctx->stats), 5 * PAGE_SIZE);

	/* One entry for eight indices; the PFN and folio of its head page. */
	alias = xa_load(&map1->i_pages, 11);
	KUNIT_ASSERT_TRUE(test, alias && folio_is_sf_alias(alias));
	KUNIT_EXPECT_PTR_EQ(test, xa_load(&map1->i_pages, 8), (void *)alias);
	KUNIT_EXPECT_EQ(test, folio_nr_pages(alias), 8);
	KUNIT_EXPECT_EQ(test, folio_ref_count(alias), 8);
	KUNIT_EXPECT_EQ(test, page_to_pfn(&alias->page), folio_pfn(folio));
	KUNIT_EXPECT_PTR_EQ(test, page_folio(&alias->page), alias);
	KUNIT_EXPECT_FALSE(test, folio_mapped(alias));
	alias = xa_load(&map0->i_pages, 7);
	KUNIT_ASSERT_TRUE(test, alias && folio_is_sf_alias(alias));
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(folio) + 4);
	KUNIT_EXPECT_PTR_EQ(test, sf_alias_physical(alias), folio);

	/* read(): each page's own bytes, whole and from the middle. */
	KUNIT_EXPECT_EQ(test, sf_test_read(test, 1, 8 * PAGE_SIZE, buf,
					   4 * PAGE_SIZE), 4 * PAGE_SIZE);
	for (i = 0; i < 4; i++)
		KUNIT_EXPECT_TRUE(test, sf_test_filled(buf + i * PAGE_SIZE, 0x50 + i));
	KUNIT_EXPECT_EQ(test, sf_test_read(test, 0, 5 * PAGE_SIZE + 100, buf,
					   PAGE_SIZE), PAGE_SIZE);
	KUNIT_EXPECT_TRUE(test, !memchr_inv(buf, 0x55, PAGE_SIZE - 100));
	KUNIT_EXPECT_TRUE(test, !memchr_inv(buf + PAGE_SIZE - 100, 0x56, 100));
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);

	/*
	 * Its tail pages are no pages: page_to_pfn() of one is no PFN, so a
	 * path that took one would fault, not reach physical page 0.
	 */
	KUNIT_EXPECT_GT(test, page_to_pfn(folio_page(alias, 1)), max_pfn);
	KUNIT_EXPECT_GT(test, page_to_pfn(folio_page(alias, 2)), max_pfn);

	/* A lookup that must not wait fails, and leaves it. */
	KUNIT_EXPECT_PTR_EQ(test, __filemap_get_folio(map0, 5, FGP_NOWAIT, 0),
			    ERR_PTR(-EAGAIN));
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);

	/* A lookup of one index splits it: an order-0 alias a page. */
	alias = filemap_get_folio(map0, 5);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_large(alias));
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(folio) + 5);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(alias), 0x55));
	folio_put(alias);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 13);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 6);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 6);
	truncate_inode_pages(map0, 0);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 2);

	/* Migration retargets it to the new folio. */
	pfn0 = folio_pfn(folio);
	sf_test_migrate(test, folio);
	alias = xa_load(&map1->i_pages, 8);
	KUNIT_ASSERT_TRUE(test, alias && folio_is_sf_alias(alias));
	new = sf_alias_physical(alias);
	KUNIT_EXPECT_NE(test, folio_pfn(new), pfn0);
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), folio_pfn(new));
	KUNIT_EXPECT_EQ(test, sf_test_read(test, 1, 14 * PAGE_SIZE, buf,
					   PAGE_SIZE), PAGE_SIZE);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(buf, 0x56));

	/* No alias of either size inside a larger shadow entry. */
	sf_test_store_order2(map2, 4, xa_mk_value(7));
	folio_lock(new);
	KUNIT_EXPECT_EQ(test, shared_folio_add_alias(new, folio_page(new, 5), map2,
						     5, NULL, GFP_KERNEL), -EEXIST);
	KUNIT_EXPECT_EQ(test, shared_folio_add_large_alias(new, folio_page(new, 4),
							   1, map2, 4, NULL,
							   GFP_KERNEL), -EEXIST);
	folio_unlock(new);
	KUNIT_EXPECT_PTR_EQ(test, xa_load(&map2->i_pages, 7), xa_mk_value(7));
	sf_test_store_order2(map2, 4, NULL);

	/* Eviction (fadvise DONTNEED) removes it whole. */
	invalidate_mapping_pages(map1, 0, ULONG_MAX);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 0);

	/* The extent cache's truncate detaches every alias. */
	folio_lock(new);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(new, folio_page(new, 0),
							   3, map1, 8, NULL,
							   GFP_KERNEL), 0);
	folio_unlock(new);
	truncate_inode_pages(ctx->cache->i_mapping, 0);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 0);
	KUNIT_EXPECT_EQ(test, map2->nrpages, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.folios), 0);
}

/* Does @p hold @addr exactly once? */
static bool sf_test_walk_has(const struct sf_test_ptes *p, unsigned long addr)
{
	unsigned int i, n = 0;

	for (i = 0; i < p->nr; i++)
		n += p->addr[i] == addr;
	return n == 1;
}

/*
 * A mapped large alias (DOC: Large aliases): fault-around maps the pages
 * of the alias in its window, and a fault without it maps the page at its
 * own index, both without splitting it; each PTE maps its own physical
 * page.  An alias none of whose pages is mapped is not "maybe mapped",
 * though its file has a VMA and the folio's other pages are mapped.  The
 * reverse map finds every PTE once, through the one alias that covers it,
 * next to an order-0 alias of the same folio in another file (a walk
 * bounded by the folio would scan on from each alias and count neighbours
 * again; one bounded by a page would miss all but the first).
 * try_to_unmap() reaches every PTE; a split leaves them mapped and
 * walkable through the order-0 aliases; migration moves the PTEs to the
 * new folio; truncate zaps the file's PTEs before the alias goes.
 */
static void sf_test_large_alias_mapped(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct address_space *map2 = sf_test_map(test, 2);
	struct folio *folio, *alias, *new;
	unsigned long a0, a1, a2, pfn0;
	struct sf_test_ptes p;
	int i;

	folio = sf_test_physical_large(test, 8, 3, 0x50);
	/* Pages 4-7 at file 0's 4; the whole folio at file 1's 8; page 1 at 2's 1. */
	sf_test_add_two_large(test, folio);
	KUNIT_ASSERT_EQ(test, shared_folio_add_alias(folio, folio_page(folio, 1),
						     map2, 1, NULL, GFP_KERNEL), 0);
	folio_unlock(folio);
	a0 = sf_test_mmap_file(test, 0, &sf_test_fops, MAP_PRIVATE);
	a1 = sf_test_mmap_file(test, 1, &sf_test_fops_nomap, MAP_PRIVATE);
	a2 = sf_test_mmap_file(test, 2, &sf_test_fops, MAP_SHARED);

	/* A fault without fault-around maps its own page of the alias. */
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 9 * PAGE_SIZE), 0x51);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 1);
	/*
	 * File 0's alias is not mapped, though its file has a VMA over it
	 * and another page of the folio is mapped: the shrinker may take it.
	 */
	alias = xa_load(&map0->i_pages, 4);
	folio_lock(alias);
	KUNIT_EXPECT_FALSE(test, sf_alias_maybe_mapped(alias));
	folio_unlock(alias);
	/* Fault-around maps pages 4-7 of file 0; each is its own page. */
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 6 * PAGE_SIZE), 0x56);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 5);
	for (i = 4; i < 8; i++)
		KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + i * PAGE_SIZE), 0x50 + i);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 5);
	folio_lock(alias);
	KUNIT_EXPECT_TRUE(test, sf_alias_maybe_mapped(alias));
	folio_unlock(alias);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 14 * PAGE_SIZE), 0x56);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a2 + 1 * PAGE_SIZE), 0x51);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 7);
	/* Neither was split. */
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 2);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 8);
	alias = xa_load(&map0->i_pages, 4);
	KUNIT_EXPECT_FALSE(test, folio_mapped(alias));
	KUNIT_EXPECT_EQ(test, folio_ref_count(alias), 4);

	/* Every PTE once, through the alias that covers it. */
	p = sf_test_walk(folio);
	KUNIT_EXPECT_EQ(test, p.nr, 7);
	for (i = 4; i < 8; i++)
		KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a0 + i * PAGE_SIZE));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a1 + 9 * PAGE_SIZE));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a1 + 14 * PAGE_SIZE));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a2 + 1 * PAGE_SIZE));

	/* try_to_unmap() reaches them all; the faults map them again. */
	folio_lock(folio);
	try_to_unmap(folio, 0);
	folio_unlock(folio);
	KUNIT_EXPECT_FALSE(test, folio_mapped(folio));
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 4 * PAGE_SIZE), 0x54);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 9 * PAGE_SIZE), 0x51);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 14 * PAGE_SIZE), 0x56);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 6);

	/* Migration moves every PTE to the new folio, page for page. */
	pfn0 = folio_pfn(folio);
	sf_test_migrate(test, folio);	/* our reference goes */
	alias = xa_load(&map1->i_pages, 8);
	KUNIT_ASSERT_TRUE(test, alias && folio_is_sf_alias(alias));
	new = sf_alias_physical(alias);
	KUNIT_EXPECT_NE(test, folio_pfn(new), pfn0);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 6);
	p = sf_test_walk(new);
	KUNIT_EXPECT_EQ(test, p.nr, 6);
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a1 + 14 * PAGE_SIZE));
	for (i = 4; i < 8; i++)
		KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + i * PAGE_SIZE), 0x50 + i);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 6);

	/* A split leaves the PTEs, now found through order-0 aliases. */
	alias = filemap_get_folio(map0, 5);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_large(alias));
	folio_put(alias);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 1);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 6);
	p = sf_test_walk(new);
	KUNIT_EXPECT_EQ(test, p.nr, 6);
	for (i = 4; i < 8; i++)
		KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a0 + i * PAGE_SIZE));

	/* Truncating file 1 zaps its two PTEs before its alias goes. */
	truncate_inode_pages(map1, 0);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 4);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 0);

	vm_munmap(a0, SF_TEST_PAGES << PAGE_SHIFT);
	vm_munmap(a1, SF_TEST_PAGES << PAGE_SHIFT);
	vm_munmap(a2, SF_TEST_PAGES << PAGE_SHIFT);
	flush_delayed_fput();
	KUNIT_EXPECT_FALSE(test, folio_mapped(new));
	truncate_inode_pages(ctx->cache->i_mapping, 0);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 0);
	KUNIT_EXPECT_EQ(test, map2->nrpages, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
}

/* The alias at @index of @mapping: its first index, order and first PFN. */
static void sf_test_expect_alias(struct kunit *test, struct address_space *mapping,
				 pgoff_t index, pgoff_t first, unsigned int order,
				 unsigned long pfn)
{
	struct folio *alias = xa_load(&mapping->i_pages, index);

	KUNIT_ASSERT_TRUE(test, alias && !xa_is_value(alias) && folio_is_sf_alias(alias));
	KUNIT_EXPECT_EQ(test, alias->index, first);
	KUNIT_EXPECT_EQ(test, folio_order(alias), order);
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), pfn);
}

/*
 * An overwrite splits a PMD-order alias at its edges into aliases of the
 * largest order each edge allows (sf_split_edges()), through every shape
 * of xarray split: 9 to 8 and 9 to 6 inside one node, 6 to 3 into a new
 * node of sibling entries, 3 to 0.
 */
static void sf_test_overwrite_split_orders(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct folio *folio, *other;
	unsigned long pfn;
	long large;

	i_size_write(ctx->file[0], PMD_SIZE);
	i_size_write(ctx->file[1], PMD_SIZE);
	folio = sf_test_physical_large(test, 2 << PMD_ORDER, PMD_ORDER, 0x30);
	pfn = folio_pfn(folio);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, &folio->page,
							   PMD_ORDER, map0, 0,
							   NULL, GFP_KERNEL), 0);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, &folio->page,
							   PMD_ORDER, map1, 0,
							   NULL, GFP_KERNEL), 0);
	folio_unlock(folio);

	/* File 1, a write of 0-255: two order-8 aliases, the first goes. */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 0, 15, 255, GFP_KERNEL), 1);
	sf_test_expect_alias(test, map1, 300, 256, 8, pfn + 256);
	sf_test_expect_alias(test, map1, 511, 256, 8, pfn + 256);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 256);

	/* File 0, a write of 0-63: eight order-6 aliases, the first goes. */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map0, 0, 63, 63, GFP_KERNEL), 1);
	sf_test_expect_alias(test, map0, 64, 64, 6, pfn + 64);
	sf_test_expect_alias(test, map0, 500, 448, 6, pfn + 448);
	large = atomic_long_read(&ctx->stats.large_aliases);
	KUNIT_EXPECT_EQ(test, large, 8);	/* 1 of file 1, 7 of file 0 */

	/*
	 * A write of 72: 64-127 to order 3 at its first edge (a new node of
	 * sibling entries), then 72-79 to order 0 at its last edge.
	 */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map0, 72, 72, 72, GFP_KERNEL), 1);
	sf_test_expect_alias(test, map0, 64, 64, 3, pfn + 64);
	sf_test_expect_alias(test, map0, 71, 64, 3, pfn + 64);
	sf_test_expect_alias(test, map0, 73, 73, 0, pfn + 73);
	sf_test_expect_alias(test, map0, 79, 79, 0, pfn + 79);
	sf_test_expect_alias(test, map0, 80, 80, 3, pfn + 80);
	sf_test_expect_alias(test, map0, 127, 120, 3, pfn + 120);
	sf_test_expect_alias(test, map0, 128, 128, 6, pfn + 128);
	other = xa_load(&map0->i_pages, 72);
	KUNIT_ASSERT_TRUE(test, other && !xa_is_value(other) && !folio_is_sf_alias(other));
	/* 64-127 became 7 order-3 aliases (72-79 went to order 0). */
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), large - 1 + 7);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 256 + 448 - 1);

	truncate_inode_pages(map0, 0);
	truncate_inode_pages(map1, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 0);
	folio_put(folio);
	truncate_inode_pages(ctx->cache->i_mapping, 0);
}

/*
 * A PMD-order alias of a PMD-order physical folio is mapped by a PMD where
 * the VMA is aligned for one (sf_alias_map_pmd()), by fault-around and by
 * finish_fault(), with a reference of its own on the physical folio; the
 * reverse map finds each PMD once; migration moves it with a PMD migration
 * entry and maps the new folio's head again (remove_migration_pte()); a
 * split of one file's alias zaps that file's PMD first (each of 512
 * order-0 aliases' walks would find it) and leaves the other file's.
 */
static void sf_test_pmd_alias(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct folio *folio, *alias, *new;
	unsigned long a0, a1, pfn0;
	struct sf_test_ptes p;
	int refs;

	if (!IS_ENABLED(CONFIG_TRANSPARENT_HUGEPAGE))
		kunit_skip(test, "no PMD-sized page cache folios");
	i_size_write(ctx->file[0], PMD_SIZE);
	i_size_write(ctx->file[1], PMD_SIZE);
	folio = sf_test_physical_large(test, 2 << PMD_ORDER, PMD_ORDER, 0x10);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, &folio->page,
							   PMD_ORDER, map0, 0,
							   NULL, GFP_KERNEL), 0);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, &folio->page,
							   PMD_ORDER, map1, 0,
							   NULL, GFP_KERNEL), 0);
	folio_unlock(folio);
	a0 = __sf_test_mmap_file(test, 0, &sf_test_fops_pmd_nomap, MAP_PRIVATE,
				 PMD_SIZE);
	a1 = __sf_test_mmap_file(test, 1, &sf_test_fops_pmd, MAP_SHARED, PMD_SIZE);
	KUNIT_ASSERT_TRUE(test, IS_ALIGNED(a0, PMD_SIZE) && IS_ALIGNED(a1, PMD_SIZE));

	/* finish_fault(), then fault-around: a PMD each, a reference each. */
	refs = folio_ref_count(folio);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 5 * PAGE_SIZE), 0x15);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 300 * PAGE_SIZE), (0x10 + 300) & 0xff);
	KUNIT_EXPECT_EQ(test, folio_entire_mapcount(folio), 2);
	KUNIT_EXPECT_EQ(test, folio_mapcount(folio), 2);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), refs + 2);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 0);
	p = sf_test_walk(folio);
	KUNIT_EXPECT_EQ(test, p.nr, 2);
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a0));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a1));

	/* Migration: the PMDs map the new folio's pages, page for page. */
	pfn0 = folio_pfn(folio);
	sf_test_migrate(test, folio);	/* our reference goes */
	alias = xa_load(&map0->i_pages, 0);
	KUNIT_ASSERT_TRUE(test, alias && folio_is_sf_alias(alias));
	new = sf_alias_physical(alias);
	KUNIT_EXPECT_NE(test, folio_pfn(new), pfn0);
	KUNIT_EXPECT_EQ(test, folio_entire_mapcount(new), 2);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 511 * PAGE_SIZE), (0x10 + 511) & 0xff);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a1 + 7 * PAGE_SIZE), 0x17);
	KUNIT_EXPECT_EQ(test, folio_entire_mapcount(new), 2);

	/* A split of file 0's alias zaps its PMD only; PTEs come back. */
	alias = filemap_get_folio(map0, 7);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_FALSE(test, folio_test_large(alias));
	folio_put(alias);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 1);
	KUNIT_EXPECT_EQ(test, folio_entire_mapcount(new), 1);
	KUNIT_EXPECT_EQ(test, folio_mapcount(new), 1);
	KUNIT_EXPECT_EQ(test, sf_test_touch(a0 + 7 * PAGE_SIZE), 0x17);
	KUNIT_EXPECT_EQ(test, folio_entire_mapcount(new), 1);
	p = sf_test_walk(new);
	KUNIT_EXPECT_EQ(test, p.nr, folio_mapcount(new));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a0 + 7 * PAGE_SIZE));
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, a1));

	vm_munmap(a0, PMD_SIZE);
	vm_munmap(a1, PMD_SIZE);
	flush_delayed_fput();
	KUNIT_EXPECT_FALSE(test, folio_mapped(new));
	truncate_inode_pages(map0, 0);
	truncate_inode_pages(map1, 0);
	truncate_inode_pages(ctx->cache->i_mapping, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
}

/*
 * A file's private folio becomes the physical folio in place: the same
 * memory, in the cache at the disk index, an alias in the file's slot.
 * Another reference (a reader between its lookup and its use, which
 * would step by the folio's index) leaves it private and untouched.
 */
static void sf_test_promote_in_place(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *cache = ctx->cache->i_mapping;
	struct address_space *map = sf_test_map(test, 0);
	struct folio *folio, *alias, *other;
	unsigned long pfn;

	folio = filemap_alloc_folio(GFP_KERNEL, 0);
	KUNIT_ASSERT_NOT_NULL(test, folio);
	KUNIT_ASSERT_EQ(test, filemap_add_folio(map, folio, 2, GFP_KERNEL), 0);
	memset(folio_address(folio), 0x3c, PAGE_SIZE);
	folio_mark_uptodate(folio);
	lru_add_drain();
	pfn = folio_pfn(folio);

	other = filemap_get_folio(map, 2);
	KUNIT_ASSERT_PTR_EQ(test, other, folio);
	KUNIT_EXPECT_EQ(test, shared_folio_promote(folio, cache, 7, &ctx->stats,
						   GFP_KERNEL), -EBUSY);
	KUNIT_EXPECT_PTR_EQ(test, folio->mapping, map);
	KUNIT_EXPECT_EQ(test, folio->index, 2);
	KUNIT_EXPECT_EQ(test, cache->nrpages, 0);
	KUNIT_EXPECT_FALSE(test, folio_test_private(folio));
	folio_put(other);

	/*
	 * The shadow of an evicted order-2 folio at 12-15: an order-0 store
	 * at 14 would cover all four indices.  The promotion gives way.
	 */
	sf_test_store_order2(cache, 12, xa_mk_value(0x5f));
	KUNIT_EXPECT_EQ(test, shared_folio_promote(folio, cache, 14, &ctx->stats,
						   GFP_KERNEL), -EEXIST);
	KUNIT_EXPECT_PTR_EQ(test, folio->mapping, map);
	KUNIT_EXPECT_PTR_EQ(test, xa_load(&cache->i_pages, 12), xa_mk_value(0x5f));
	KUNIT_EXPECT_PTR_EQ(test, xa_load(&cache->i_pages, 15), xa_mk_value(0x5f));
	KUNIT_EXPECT_EQ(test, cache->nrpages, 0);
	sf_test_store_order2(cache, 12, NULL);

	KUNIT_ASSERT_EQ(test, shared_folio_promote(folio, cache, 7, &ctx->stats,
						   GFP_KERNEL), 0);
	KUNIT_EXPECT_PTR_EQ(test, folio->mapping, cache);
	KUNIT_EXPECT_EQ(test, folio->index, 7);
	KUNIT_EXPECT_EQ(test, map->nrpages, 1);
	KUNIT_EXPECT_EQ(test, cache->nrpages, 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.promotions), 1);
	folio_unlock(folio);

	alias = filemap_get_folio(map, 2);
	KUNIT_ASSERT_FALSE(test, IS_ERR(alias));
	KUNIT_EXPECT_TRUE(test, folio_is_sf_alias(alias));
	/* Locked while it was published, unlocked before the return. */
	KUNIT_EXPECT_FALSE(test, folio_test_locked(alias));
	KUNIT_EXPECT_EQ(test, folio_pfn(alias), pfn);
	KUNIT_EXPECT_TRUE(test, sf_test_filled(folio_address(alias), 0x3c));
	other = filemap_get_folio(cache, 7);
	KUNIT_EXPECT_PTR_EQ(test, other, folio);
	if (!IS_ERR(other))
		folio_put(other);
	folio_put(alias);
	folio_put(folio);
}

/* The whole order-3 @folio (unlocked) at @mapping's 8 again. */
static void sf_test_add_large_again(struct kunit *test, struct folio *folio,
				    struct address_space *mapping)
{
	folio_lock(folio);
	KUNIT_ASSERT_EQ(test, shared_folio_add_large_alias(folio, folio_page(folio, 0),
							   3, mapping, 8, NULL,
							   GFP_KERNEL), 0);
	folio_unlock(folio);
}

/*
 * An overwrite (shared_folio_overwrite()) removes a large alias that the
 * whole write covers, from its first chunk on, without a split, and splits
 * one across an edge of the write, replacing only the chunk's pages; in a
 * file with a VMA, it takes the chunk's pages only.
 */
static void sf_test_overwrite_large_alias(struct kunit *test)
{
	struct sf_test_ctx *ctx = test->priv;
	struct address_space *map0 = sf_test_map(test, 0);
	struct address_space *map1 = sf_test_map(test, 1);
	struct folio *folio, *other;
	struct sf_test_ptes p;
	unsigned long addr;
	int base, i;

	folio = sf_test_physical_large(test, 8, 3, 0x50);
	base = folio_ref_count(folio);
	/* Pages 4-7 at file 0's index 4; the whole folio at file 1's 8. */
	sf_test_add_two_large(test, folio);
	folio_unlock(folio);

	/*
	 * File 1's 8-9, the first chunk of a write of 8-15: its alias of
	 * 8-15 goes whole, nothing is split, nothing is left, and the next
	 * chunk finds nothing to do.
	 */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 8, 9, 15, GFP_KERNEL), 1);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.unshares), 8);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.overwrites), 8);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 1);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);
	KUNIT_EXPECT_EQ(test, folio_ref_count(folio), base + 1);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 10, 15, 15, GFP_KERNEL), 0);

	/* File 0's 5-6, inside its alias of 4-7: split, 5 and 6 replaced. */
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map0, 5, 6, 6, GFP_KERNEL), 2);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.large_aliases), 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.unshares), 10);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.overwrites), 10);
	KUNIT_EXPECT_EQ(test, map0->nrpages, 4);
	for (i = 4; i < 8; i++) {
		other = filemap_get_folio(map0, i);
		KUNIT_ASSERT_FALSE(test, IS_ERR(other));
		KUNIT_EXPECT_EQ(test, folio_order(other), 0);
		/* 4 and 7 still share their own pages; 5 and 6 are the write's. */
		KUNIT_EXPECT_EQ(test, folio_is_sf_alias(other), i == 4 || i == 7);
		if (i == 4 || i == 7)
			KUNIT_EXPECT_EQ(test, folio_pfn(other), folio_pfn(folio) + i);
		else
			KUNIT_EXPECT_FALSE(test, folio_test_uptodate(other));
		folio_put(other);
	}
	truncate_inode_pages(map0, 0);

	/*
	 * File 1's 8-9 of a write of 8-11: the alias of 8-15 goes on past
	 * the write's end, so it is split in two of order 2, at the write's
	 * end; the write fills 8-11 whole, which goes, and 12-15 stays.
	 */
	sf_test_add_large_again(test, folio, map1);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 8, 9, 11, GFP_KERNEL), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 2);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 1);
	KUNIT_EXPECT_EQ(test, map1->nrpages, 4);
	sf_test_expect_alias(test, map1, 13, 12, 2, folio_pfn(folio) + 4);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 10, 11, 11, GFP_KERNEL), 0);
	truncate_inode_pages(map1, 0);

	/*
	 * A write of 9-9: split at its first edge, which only order 0
	 * allows (a split is uniform, as in 6.12's page cache), and 9
	 * replaced.
	 */
	sf_test_add_large_again(test, folio, map1);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 9, 9, 9, GFP_KERNEL), 1);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 3);
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 7);
	other = xa_load(&map1->i_pages, 11);
	KUNIT_ASSERT_TRUE(test, other && folio_is_sf_alias(other));
	KUNIT_EXPECT_EQ(test, folio_order(other), 0);
	other = xa_load(&map1->i_pages, 9);
	KUNIT_ASSERT_TRUE(test, other && !folio_is_sf_alias(other));
	truncate_inode_pages(map1, 0);

	/* The same write of a file with a VMA: the chunk's pages only. */
	sf_test_add_large_again(test, folio, map1);
	addr = sf_test_mmap_file(test, 1, &sf_test_fops, MAP_SHARED);
	KUNIT_EXPECT_EQ(test, sf_test_touch(addr + 12 * PAGE_SIZE), 0x54);
	KUNIT_EXPECT_EQ(test, shared_folio_overwrite(map1, 8, 9, 15, GFP_KERNEL), 2);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.breaks), 4);
	/* The chunk's end allows order 1, which costs more than order 0. */
	KUNIT_EXPECT_EQ(test, sf_folio_nr_aliases(folio), 6);
	/* Page 12 is still shared, and still mapped; 8 and 9 are not. */
	p = sf_test_walk(folio);
	KUNIT_EXPECT_TRUE(test, sf_test_walk_has(&p, addr + 12 * PAGE_SIZE));
	KUNIT_EXPECT_FALSE(test, sf_test_walk_has(&p, addr + 8 * PAGE_SIZE));
	KUNIT_EXPECT_FALSE(test, sf_test_walk_has(&p, addr + 9 * PAGE_SIZE));
	KUNIT_EXPECT_EQ(test, sf_test_touch(addr + 12 * PAGE_SIZE), 0x54);
	vm_munmap(addr, SF_TEST_PAGES << PAGE_SHIFT);
	flush_delayed_fput();
	truncate_inode_pages(map1, 0);
	KUNIT_EXPECT_EQ(test, atomic_long_read(&ctx->stats.aliases), 0);
	folio_put(folio);
}

static struct kunit_case shared_folio_test_cases[] = {
	KUNIT_CASE(sf_test_alias_resolves_to_physical),
	KUNIT_CASE(sf_test_truncate_frees_alias),
	KUNIT_CASE(sf_test_unshare_on_write),
	KUNIT_CASE(sf_test_overwrite_without_copy),
	KUNIT_CASE(sf_test_release_detaches_all),
	KUNIT_CASE(sf_test_busy_alias_pins_physical),
	KUNIT_CASE(sf_test_mark_accessed_physical),
	KUNIT_CASE(sf_test_freed_alias_outlives_rcu_reader),
	KUNIT_CASE(sf_test_release_with_locked_aliases),
	KUNIT_CASE(sf_test_invalidate_waits_for_frozen_alias),
	KUNIT_CASE(sf_test_alias_accounting),
	KUNIT_CASE(sf_test_rmap_walks_aliases),
	KUNIT_CASE(sf_test_promote_in_place),
	KUNIT_CASE(sf_test_large_physical),
	KUNIT_CASE(sf_test_large_alias),
	KUNIT_CASE(sf_test_large_alias_mapped),
	KUNIT_CASE(sf_test_overwrite_large_alias),
	KUNIT_CASE(sf_test_overwrite_split_orders),
	KUNIT_CASE(sf_test_pmd_alias),
	{}
};

static struct kunit_suite shared_folio_test_suite = {
	.name = "shared_folio",
	.init = sf_test_init,
	.exit = sf_test_exit,
	.test_cases = shared_folio_test_cases,
};

kunit_test_suite(shared_folio_test_suite);

MODULE_DESCRIPTION("KUnit tests for shared folios");
MODULE_LICENSE("GPL");
