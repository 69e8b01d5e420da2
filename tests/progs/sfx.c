// SPDX-License-Identifier: GPL-2.0
/*
 * sfx: a randomized model checker for files that share extents.
 *
 * In the spirit of fsx, but for many files at once: files spread over
 * subvolumes, snapshots and reflink copies, driven by a seeded random
 * sequence of operations, each checked against an in-memory model of what
 * every file must contain.  Every read is verified; every file is verified
 * in full every -V operations and at the end.  On a mismatch sfx prints the
 * seed, the operations leading to it and the first differing bytes, and
 * exits 1.  The same seed and options reproduce the same run.
 *
 * With -P N, N workers run at once on files that share extents with a
 * common set of "golden" files, each worker owning its own files, so each
 * one's model stays exact while all of them hit the same physical folios.
 *
 * With -c and -r a run goes on across unmounts and boots: the state is
 * checkpointed at the end and resumed later, with the same sequence.
 *
 * Mappings that outlive an operation: each file may hold up to NMAPS
 * persistent mappings, MAP_SHARED (PROT_READ, or PROT_READ|PROT_WRITE) and
 * at most one MAP_PRIVATE PROT_READ|PROT_WRITE, made by "map", dropped by
 * "unmap", moved, grown or shrunk by "mremap" (MREMAP_MAYMOVE, sometimes
 * MREMAP_FIXED), written through by "map_write", advised by "madvise"
 * (DONTNEED, COLD, PAGEOUT, WILLNEED, POPULATE_READ) and read in full by
 * "mcheck", which compares every page of every live mapping of a file with
 * the model: a MAP_SHARED page (and a page of the MAP_PRIVATE one that the
 * process never wrote) shows the file's current data, zeros past EOF in
 * the page holding EOF, and SIGBUS when wholly beyond EOF; a page written
 * through the MAP_PRIVATE mapping keeps what it held when first written
 * (the file's data then) plus the writes, until a truncate below it or
 * MADV_DONTNEED drops it.  Every operation that changes a file (or its
 * page cache) is followed, with probability 1/2, by an mcheck of the files
 * it touched, so that a stale PTE is caught right after the change.  A
 * file's mappings go before it is unlinked (after an optional last mcheck
 * of the unlinked inode) or its snapshot deleted.  "fork_read" forks a
 * child that reads a range through a mapping (or a new one) and pread(2)
 * and compares it with the model it inherited (and sometimes scribbles on
 * its copy of the MAP_PRIVATE pages, which the parent then checks are
 * still its own).  -m N weights all the mmap operations N times.
 *
 * Usage: sfx [options] DIR      (DIR on btrfs, emptied first unless -r)
 * Exit: 0 all verified, 1 mismatch, 2 usage or setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>

#define BLK		4096UL
#define MAXFILES	48
#define MAXSUBVOLS	8
#define LOGSZ		64
#define NMAPS		4	/* persistent mappings per file */
#define MAPPAGES	64	/* pages in each at most (bits of ->dirty) */

#ifndef MADV_COLD
#define MADV_COLD		20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT		21
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif

/*
 * A mapping of [off, off + len) of a file that lives across operations;
 * off and len are multiples of BLK (the page size, checked at start).
 */
struct mmapping {
	unsigned char *p;
	size_t off, len;
	bool priv;		/* MAP_PRIVATE, PROT_READ|PROT_WRITE */
	bool wr;		/* MAP_SHARED with PROT_WRITE too */
	uint64_t dirty;		/* MAP_PRIVATE: pages the process wrote */
	unsigned char *cow;	/* ... and what they must hold (MAPPAGES pages) */
};

struct mfile {
	bool used;
	int subvol;		/* index in subvols[] */
	char name[32];
	int fd;
	unsigned char *data;	/* what the file must contain */
	size_t size;
	int nmaps;		/* live mappings: map[0 .. nmaps - 1] */
	struct mmapping map[NMAPS];
};

struct subvol {
	bool used;
	char name[32];
};

static struct {
	uint64_t seed;
	long ops;
	double seconds;
	long verify_every;
	size_t maxlen;
	int nfiles;
	int workers;
	bool mmap_ops;
	bool direct_ops;
	bool snapshots;
	bool drop_caches;
	bool balance;
	long hog_mb;
	int racers;		/* reader threads per worker racing the operations */
	int mmap_weight;	/* -m: the mmap operations' weights times this */
	bool quiet;
	bool compressible;	/* -Z: data a compress= mount compresses */
	double progress;	/* -p: a progress line every this many seconds */
	long corrupt_at;	/* self-test: falsify the model at this op */
	const char *save;	/* -c: checkpoint to SAVE.w<N> at the end */
	const char *resume;	/* -r: continue from RESUME.w<N> */
	const char *dir;
} opt = {
	.seed = 1, .ops = 10000, .verify_every = 1000, .maxlen = 256 * 1024,
	.nfiles = 8, .workers = 1, .mmap_ops = true, .direct_ops = true,
	.snapshots = true, .drop_caches = true, .mmap_weight = 1,
};

/* Per worker state. */
static int wid;
static char wdir[32];
static struct mfile files[MAXFILES];
static struct subvol subvols[MAXSUBVOLS];
static uint64_t rng;
static long opno;
static long logno;		/* lines logged: the ring's index */
static char oplog[LOGSZ][160];
static unsigned char *iobuf, *dbuf;
static long counts[32];
static double op_seconds[32];	/* time spent in each kind of operation */
/*
 * Per worker, shared with the parent and the -p process: the operation the
 * run started from (-1 until the worker is under way) and the operations of
 * the sequence done so far.  A run's count is their difference, so a reader
 * never sees one half of an update.
 */
static long *start_ops;
static long *total_ops;
static int snap_serial;		/* names snapshots snap1, snap2, ... */
static uint64_t ckpt_token;	/* DIR's mark when resuming (0: none) */
static uint64_t ckpt_next;	/* the mark of the checkpoint this run writes */
static uint64_t loghash = 0xcbf29ce484222325ULL;	/* FNV-1a of the log */

static const char *const opnames[] = {
	"read", "pread", "write", "dread", "dwrite", "truncate", "falloc",
	"punch", "zero", "clone", "clonerange", "dedupe", "snapshot",
	"fsync", "sync", "drop_caches", "dontneed", "mmap_read",
	"mmap_shared_write", "mmap_private_write", "unlink", "map", "unmap",
	"mremap", "mcheck", "madvise", "map_write", "fork_read", "verify",
};

enum {
	OP_READ, OP_PREAD, OP_WRITE, OP_DREAD, OP_DWRITE, OP_TRUNCATE,
	OP_FALLOC, OP_PUNCH, OP_ZERO, OP_CLONE, OP_CLONERANGE, OP_DEDUPE,
	OP_SNAPSHOT, OP_FSYNC, OP_SYNC, OP_DROP, OP_DONTNEED, OP_MREAD,
	OP_MSHARED, OP_MPRIVATE, OP_UNLINK, OP_MAP, OP_UNMAP, OP_MREMAP,
	OP_MCHECK, OP_MADVISE, OP_MAPWRITE, OP_FORKREAD, OP_VERIFY, NR_OPS
};
_Static_assert(NR_OPS <= 32, "counts[] and op_seconds[] hold 32");
_Static_assert(sizeof(opnames) / sizeof(opnames[0]) == NR_OPS, "opnames[]");

/* The operations -M leaves out and -m weights up. */
static const int mmap_ops[] = {
	OP_MREAD, OP_MSHARED, OP_MPRIVATE, OP_MAP, OP_UNMAP, OP_MREMAP,
	OP_MCHECK, OP_MADVISE, OP_MAPWRITE, OP_FORKREAD,
};

/* Relative frequency of each operation. */
static int weight[NR_OPS] = {
	[OP_READ] = 12, [OP_PREAD] = 12, [OP_WRITE] = 10, [OP_DREAD] = 4,
	[OP_DWRITE] = 3, [OP_TRUNCATE] = 4, [OP_FALLOC] = 2, [OP_PUNCH] = 3,
	[OP_ZERO] = 2, [OP_CLONE] = 4, [OP_CLONERANGE] = 8, [OP_DEDUPE] = 4,
	[OP_SNAPSHOT] = 1, [OP_FSYNC] = 2, [OP_SYNC] = 1, [OP_DROP] = 1,
	[OP_DONTNEED] = 3, [OP_MREAD] = 4, [OP_MSHARED] = 3, [OP_MPRIVATE] = 3,
	[OP_UNLINK] = 1, [OP_MAP] = 3, [OP_UNMAP] = 1, [OP_MREMAP] = 1,
	[OP_MCHECK] = 2, [OP_MADVISE] = 2, [OP_MAPWRITE] = 2, [OP_FORKREAD] = 1,
};

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "sfx[%d]: ", wid);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* xorshift64*: small, fast, and the same on every machine */
static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545F4914F6CDD1DULL;
}

static uint64_t rnd(void)
{
	return xorshift(&rng);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static void logop(const char *fmt, ...)
{
	char *l = oplog[logno++ % LOGSZ];
	va_list ap;
	int n;

	n = snprintf(l, sizeof(oplog[0]), "%8ld ", opno);
	va_start(ap, fmt);
	vsnprintf(l + n, sizeof(oplog[0]) - n, fmt, ap);
	va_end(ap);
	for (; *l; l++)
		loghash = (loghash ^ (unsigned char)*l) * 0x100000001b3ULL;
}

static void dump_log(void)
{
	long i;

	fprintf(stderr, "sfx[%d]: seed %" PRIu64 ", last operations:\n", wid, opt.seed);
	for (i = logno - LOGSZ; i < logno; i++)
		if (i >= 0 && oplog[i % LOGSZ][0])
			fprintf(stderr, "  %s\n", oplog[i % LOGSZ]);
}

static const char *fpath(const struct mfile *f)
{
	static char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s/%s", wdir, subvols[f->subvol].name, f->name);
	return p;
}

/* @exp: what [off, off + len) must hold, @got: what it holds */
static void mismatch_exp(const struct mfile *f, const char *what, size_t off,
			 const unsigned char *exp, const unsigned char *got, size_t len)
{
	size_t i, j;

	for (i = 0; i < len && got[i] == exp[i]; i++)
		;
	dump_log();
	fprintf(stderr, "sfx[%d]: MISMATCH in %s of %s (size %zu) at offset %zu (0x%zx), op %ld\n",
		wid, what, fpath(f), f->size, off + i, off + i, opno);
	fprintf(stderr, "  expected:");
	for (j = i; j < len && j < i + 16; j++)
		fprintf(stderr, " %02x", exp[j]);
	fprintf(stderr, "\n  got:     ");
	for (j = i; j < len && j < i + 16; j++)
		fprintf(stderr, " %02x", got[j]);
	fprintf(stderr, "\nsfx: reproduce with: sfx -s %" PRIu64 " -n %ld ... (same options)\n",
		opt.seed, opt.ops);
	exit(1);
}

static void mismatch(const struct mfile *f, const char *what, size_t off,
		     const unsigned char *got, size_t len)
{
	mismatch_exp(f, what, off, f->data + off, got, len);
}

static void check(const struct mfile *f, const char *what, size_t off,
		  const unsigned char *got, size_t len)
{
	if (memcmp(got, f->data + off, len))
		mismatch(f, what, off, got, len);
}

/*
 * Random bytes; with -Z, random letters of four, 2 bits of entropy a byte,
 * which btrfs compresses (and every page still differs from every other).
 */
static void fill(unsigned char *p, size_t len)
{
	uint64_t x = rnd() | 1;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7)) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		p[i] = x >> ((i & 7) * 8);
		if (opt.compressible)
			p[i] = 'a' + (p[i] & 3);
	}
}

static void drop_cows(struct mfile *f, size_t size);

static void model_resize(struct mfile *f, size_t size)
{
	if (size > f->size)
		memset(f->data + f->size, 0, size - f->size);
	else
		drop_cows(f, size);
	f->size = size;
}

/* The model of a write of @len bytes at @off (@buf may lie in a model). */
static void model_write(struct mfile *f, size_t off, const unsigned char *buf, size_t len)
{
	if (off > f->size)
		model_resize(f, off);
	memmove(f->data + off, buf, len);
	if (off + len > f->size)
		f->size = off + len;
}

static int live_files(int *idx)
{
	int i, n = 0;

	for (i = 0; i < MAXFILES; i++)
		if (files[i].used)
			idx[n++] = i;
	return n;
}

static struct mfile *pick(void)
{
	int idx[MAXFILES], n = live_files(idx);

	return n ? &files[idx[below(n)]] : NULL;
}

static void open_file(struct mfile *f, bool create)
{
	f->fd = open(fpath(f), O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0644);
	if (f->fd < 0)
		die("open %s: %s", fpath(f), strerror(errno));
}

static struct mfile *new_file(int subvol, const char *name)
{
	int i;

	for (i = 0; i < MAXFILES; i++) {
		struct mfile *f = &files[i];

		if (f->used)
			continue;
		memset(f, 0, sizeof(*f));
		f->used = true;
		f->subvol = subvol;
		snprintf(f->name, sizeof(f->name), "%s", name);
		f->data = calloc(1, opt.maxlen);
		if (!f->data)
			die("out of memory");
		return f;
	}
	return NULL;
}

/*
 * Read [off, off + len) of f through fd and check it against the model:
 * with pread(2), or, if !positional, with lseek(2) and read(2) through the
 * file position, as cp and cat do.
 */
static void xread_at(struct mfile *f, const char *what, int fd, unsigned char *buf,
		     size_t len, size_t off, bool positional)
{
	size_t want = off >= f->size ? 0 : (f->size - off < len ? f->size - off : len);
	size_t done = 0;
	ssize_t n;

	if (!positional && lseek(fd, off, SEEK_SET) < 0)
		die("lseek %s: %s", fpath(f), strerror(errno));
	while (done < len) {
		n = positional ? pread(fd, buf + done, len - done, off + done) :
				 read(fd, buf + done, len - done);
		if (n < 0) {
			dump_log();
			die("%s %s at %zu+%zu: %s", what, fpath(f), off, len, strerror(errno));
		}
		if (n == 0)
			break;
		done += n;
	}
	if (done != want) {
		dump_log();
		fprintf(stderr, "sfx[%d]: MISMATCH: %s of %s at %zu+%zu returned %zu bytes, size is %zu\n",
			wid, what, fpath(f), off, len, done, f->size);
		exit(1);
	}
	check(f, what, off, buf, done);
}

static void xpread(struct mfile *f, const char *what, int fd, unsigned char *buf,
		   size_t len, size_t off)
{
	xread_at(f, what, fd, buf, len, off, true);
}

static void xpwrite(struct mfile *f, int fd, const unsigned char *buf, size_t len,
		    size_t off)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pwrite(fd, buf + done, len - done, off + done);
		if (n <= 0) {
			dump_log();
			die("write %s at %zu+%zu: %s", fpath(f), off, len,
			    n < 0 ? strerror(errno) : "short");
		}
		done += n;
	}
}

/*
 * Reads and writes through mappings go through guarded_copy(): a SIGBUS
 * there makes it return false; a SIGBUS anywhere else (a per-operation
 * mapping, say) is a failure, reported with the log.  The handler runs with
 * SA_NODEFER, so that leaving it by siglongjmp() needs no signal mask.
 */
static sigjmp_buf bus_env;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (bus_armed) {
		bus_armed = 0;
		siglongjmp(bus_env, 1);
	}
	dump_log();
	fprintf(stderr, "sfx[%d]: MISMATCH: unexpected SIGBUS at %p, op %ld\n", wid,
		si->si_addr, opno);
	_exit(1);
}

static bool guarded_copy(void *dst, const void *src, size_t len)
{
	if (sigsetjmp(bus_env, 0))
		return false;
	bus_armed = 1;
	__asm__ __volatile__("" ::: "memory");
	memcpy(dst, src, len);
	__asm__ __volatile__("" ::: "memory");
	bus_armed = 0;
	return true;
}

static const char *map_kind(const struct mmapping *m)
{
	return m->priv ? "private" : m->wr ? "shared-rw" : "shared";
}

/* Mapping pages [first, first + n) as a 64-bit mask (n <= MAPPAGES). */
static uint64_t page_mask(size_t first, size_t n)
{
	return (n >= 64 ? ~0ULL : (1ULL << n) - 1) << first;
}

/*
 * What page @i of @m must show: fills @exp and returns true, or returns
 * false if touching it must raise SIGBUS (wholly beyond EOF, not a page the
 * process wrote through its MAP_PRIVATE mapping).
 */
static bool expect_page(const struct mfile *f, const struct mmapping *m, size_t i,
			unsigned char *exp)
{
	size_t fo = m->off + i * BLK, n;

	if (m->priv && (m->dirty >> i & 1)) {
		memcpy(exp, m->cow + i * BLK, BLK);
		return true;
	}
	if (fo >= f->size)
		return false;
	n = f->size - fo < BLK ? f->size - fo : BLK;
	memcpy(exp, f->data + fo, n);
	memset(exp + n, 0, BLK - n);	/* past EOF in the page holding it */
	return true;
}

/* Reads pages [first, first + n) of mapping @m (slot @k of @f, -1: none). */
static void check_pages(const struct mfile *f, const struct mmapping *m, int k,
			size_t first, size_t n, const char *why)
{
	static unsigned char exp[BLK], got[BLK];
	char what[192];
	size_t i;

	for (i = first; i < first + n && i < m->len / BLK; i++) {
		size_t fo = m->off + i * BLK;
		bool readable = expect_page(f, m, i, exp);

		if (!guarded_copy(got, m->p + i * BLK, readable ? BLK : 1)) {
			if (!readable)
				continue;	/* SIGBUS, as it must */
			dump_log();
			fprintf(stderr, "sfx[%d]: MISMATCH: SIGBUS in %s through %s mapping #%d (%zu+%zu) of %s (size %zu) at offset %zu, below EOF, op %ld\n",
				wid, why, map_kind(m), k, m->off, m->len, fpath(f), f->size, fo, opno);
			exit(1);
		}
		if (!readable) {
			dump_log();
			fprintf(stderr, "sfx[%d]: MISMATCH: no SIGBUS in %s through %s mapping #%d (%zu+%zu) of %s (size %zu) at offset %zu, wholly beyond EOF (read %02x): a stale PTE, op %ld\n",
				wid, why, map_kind(m), k, m->off, m->len, fpath(f), f->size, fo,
				got[0], opno);
			exit(1);
		}
		if (memcmp(got, exp, BLK)) {
			snprintf(what, sizeof(what), "%s through %s mapping #%d (%zu+%zu%s)", why,
				 map_kind(m), k, m->off, m->len,
				 m->priv && (m->dirty >> i & 1) ? ", a page it wrote" : "");
			mismatch_exp(f, what, fo, exp, got, BLK);
		}
	}
}

/* Every page of every live mapping of @f against the model. */
static void mcheck_file(const struct mfile *f, const char *why)
{
	int k;

	for (k = 0; k < f->nmaps; k++)
		check_pages(f, &f->map[k], k, 0, f->map[k].len / BLK, why);
}

/* The same, logged (a file without mappings has nothing to check). */
static void mcheck_logged(const struct mfile *f, const char *note)
{
	if (!f->used || !f->nmaps)
		return;
	logop("mcheck %s (%d mappings)%s", fpath(f), f->nmaps, note);
	mcheck_file(f, "mcheck");
}

static void mcheck_all_logged(const char *note)
{
	int i;

	for (i = 0; i < MAXFILES; i++)
		mcheck_logged(&files[i], note);
}

/* Maps the mapping described in slot @k of @f (p not set yet). */
static void map_attach(struct mfile *f, int k, bool populate)
{
	struct mmapping *m = &f->map[k];
	int prot = PROT_READ | (m->priv || m->wr ? PROT_WRITE : 0);
	int flags = (m->priv ? MAP_PRIVATE : MAP_SHARED) | (populate ? MAP_POPULATE : 0);

	m->p = mmap(NULL, m->len, prot, flags, f->fd, m->off);
	if (m->p == MAP_FAILED)
		die("mmap %s %zu+%zu: %s", fpath(f), m->off, m->len, strerror(errno));
}

static int map_create(struct mfile *f, size_t off, size_t len, bool priv, bool wr,
		      bool populate)
{
	struct mmapping *m = &f->map[f->nmaps];

	memset(m, 0, sizeof(*m));
	m->off = off;
	m->len = len;
	m->priv = priv;
	m->wr = wr && !priv;
	if (priv && !(m->cow = malloc(MAPPAGES * BLK)))
		die("out of memory");
	map_attach(f, f->nmaps, populate);
	return f->nmaps++;
}

static void unmap_slot(struct mfile *f, int k)
{
	struct mmapping *m = &f->map[k];

	if (munmap(m->p, m->len))
		die("munmap %s: %s", fpath(f), strerror(errno));
	free(m->cow);
	if (k != f->nmaps - 1)
		*m = f->map[f->nmaps - 1];
	memset(&f->map[--f->nmaps], 0, sizeof(*m));
}

static void unmap_all(struct mfile *f)
{
	while (f->nmaps)
		unmap_slot(f, f->nmaps - 1);
}

/*
 * A truncate to @size drops the pages a MAP_PRIVATE mapping wrote that lie
 * wholly beyond the new EOF (truncate_pagecache() unmaps even the COWed
 * pages there); the page holding EOF keeps what the process wrote.
 */
static void drop_cows(struct mfile *f, size_t size)
{
	int k;

	for (k = 0; k < f->nmaps; k++) {
		struct mmapping *m = &f->map[k];
		size_t i;

		for (i = 0; m->priv && i < m->len / BLK; i++)
			if (m->off + i * BLK >= size)
				m->dirty &= ~(1ULL << i);
	}
}

static void verify_file(struct mfile *f)
{
	struct stat st;

	if (fstat(f->fd, &st))
		die("fstat %s: %s", fpath(f), strerror(errno));
	if ((size_t)st.st_size != f->size) {
		dump_log();
		fprintf(stderr, "sfx[%d]: MISMATCH: %s has size %jd, model %zu\n",
			wid, fpath(f), (intmax_t)st.st_size, f->size);
		exit(1);
	}
	xpread(f, "verify", f->fd, iobuf, opt.maxlen, 0);
	mcheck_file(f, "verify");
}

static void verify_all(void)
{
	int i;

	for (i = 0; i < MAXFILES; i++)
		if (files[i].used)
			verify_file(&files[i]);
}

/* A random range: [off, off + len) within maxlen, sometimes page aligned. */
static void range(size_t *off, size_t *len, bool aligned)
{
	size_t max = opt.maxlen;

	if (aligned) {
		*off = below(max / BLK) * BLK;
		*len = (1 + below((max - *off) / BLK < 32 ? (max - *off) / BLK : 32)) * BLK;
		return;
	}
	*off = below(max);
	switch (below(4)) {
	case 0:
		*len = 1 + below(64);
		break;
	case 1:
		*len = 1 + below(BLK);
		break;
	default:
		*len = 1 + below(16 * BLK);
		break;
	}
	if (*off + *len > max)
		*len = max - *off;
}

static void do_read(struct mfile *f, bool positional)
{
	size_t off, len;

	range(&off, &len, false);
	if (f->size && below(2))	/* mostly inside the file */
		off = below(f->size);
	if (off + len > opt.maxlen)
		len = opt.maxlen - off;
	logop("%s %s %zu+%zu", positional ? "pread" : "read", fpath(f), off, len);
	xread_at(f, positional ? "pread" : "read", f->fd, iobuf, len, off, positional);
}

static void do_write(struct mfile *f)
{
	size_t off, len;

	range(&off, &len, false);
	logop("write %s %zu+%zu", fpath(f), off, len);
	fill(iobuf, len);
	xpwrite(f, f->fd, iobuf, len, off);
	model_write(f, off, iobuf, len);
}

static int open_direct(struct mfile *f)
{
	int fd = open(fpath(f), O_RDWR | O_DIRECT);

	if (fd < 0)
		die("open O_DIRECT %s: %s", fpath(f), strerror(errno));
	return fd;
}

static void do_dread(struct mfile *f)
{
	size_t off, len;
	int fd;

	range(&off, &len, true);
	logop("dread %s %zu+%zu", fpath(f), off, len);
	fd = open_direct(f);
	xpread(f, "O_DIRECT read", fd, dbuf, len, off);
	close(fd);
}

static void do_dwrite(struct mfile *f)
{
	size_t off, len;
	int fd;

	range(&off, &len, true);
	logop("dwrite %s %zu+%zu", fpath(f), off, len);
	fill(dbuf, len);
	fd = open_direct(f);
	xpwrite(f, fd, dbuf, len, off);
	close(fd);
	model_write(f, off, dbuf, len);
}

static void do_truncate(struct mfile *f)
{
	size_t size = below(opt.maxlen + 1);

	if (below(2))
		size = size / BLK * BLK;
	logop("truncate %s %zu -> %zu", fpath(f), f->size, size);
	if (ftruncate(f->fd, size))
		die("truncate %s: %s", fpath(f), strerror(errno));
	model_resize(f, size);
}

static void do_fallocate(struct mfile *f, int op)
{
	static const char *const what[] = { "falloc", "punch", "zero" };
	int mode, w = op == OP_FALLOC ? 0 : op == OP_PUNCH ? 1 : 2;
	size_t off, len;

	range(&off, &len, below(2));
	mode = op == OP_FALLOC ? (below(2) ? FALLOC_FL_KEEP_SIZE : 0) :
	       op == OP_PUNCH ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE :
	       FALLOC_FL_ZERO_RANGE | (below(2) ? FALLOC_FL_KEEP_SIZE : 0);
	logop("%s %s %zu+%zu mode %#x", what[w], fpath(f), off, len, mode);
	if (fallocate(f->fd, mode, off, len)) {
		if (errno == EOPNOTSUPP)
			return;
		die("fallocate %s: %s", fpath(f), strerror(errno));
	}
	if (op != OP_FALLOC) {
		size_t end = off + len;

		if (mode & FALLOC_FL_KEEP_SIZE && end > f->size)
			end = f->size;
		if (end > off) {
			if (end > f->size)
				model_resize(f, end);
			memset(f->data + off, 0, end - off);
		}
	}
	if (!(mode & FALLOC_FL_KEEP_SIZE) && off + len > f->size)
		model_resize(f, off + len);
}

static void do_clone(struct mfile *dst, struct mfile *src, bool whole)
{
	struct file_clone_range r;
	size_t soff, doff, len, send;

	if (dst == src && whole)
		return;
	if (whole) {
		logop("clone %s <- %s (%zu)", fpath(dst), fpath(src), src->size);
		/* as cp --reflink over an existing file: the tail goes too */
		if (ftruncate(dst->fd, 0))
			die("truncate %s: %s", fpath(dst), strerror(errno));
		drop_cows(dst, 0);
		if (ioctl(dst->fd, FICLONE, src->fd))
			die("FICLONE %s <- %s: %s", fpath(dst), fpath(src), strerror(errno));
		memcpy(dst->data, src->data, src->size);
		dst->size = src->size;
		return;
	}
	if (src->size < BLK)
		return;
	soff = below(src->size / BLK) * BLK;
	send = src->size / BLK * BLK;
	/* a range ending at the source's EOF may be unaligned */
	if (below(3) == 0)
		send = src->size;
	len = send - soff;
	if (len > 32 * BLK)
		len = (1 + below(32)) * BLK;
	doff = below(opt.maxlen / BLK) * BLK;
	if (doff + len > opt.maxlen)
		return;
	/* an unaligned end is only allowed at the destination's EOF too */
	if ((len % BLK) && doff + len < dst->size)
		len = len / BLK * BLK;
	if (!len)
		return;
	if (dst == src && doff < soff + len && soff < doff + len)
		return;	/* overlapping ranges in one file are refused */
	logop("clonerange %s %zu <- %s %zu +%zu", fpath(dst), doff, fpath(src), soff, len);
	r.src_fd = src->fd;
	r.src_offset = soff;
	r.src_length = len;
	r.dest_offset = doff;
	if (ioctl(dst->fd, FICLONERANGE, &r))
		die("FICLONERANGE %s <- %s: %s", fpath(dst), fpath(src), strerror(errno));
	model_write(dst, doff, src->data + soff, len);
}

/*
 * Make a range of @dst equal to one of @src with a buffered write, then
 * FIDEDUPERANGE them; sometimes dedupe ranges the model says differ, and
 * check that the kernel says so too.
 */
static void do_dedupe(struct mfile *dst, struct mfile *src)
{
	struct file_dedupe_range *r;
	size_t soff, doff, len;
	bool same;

	if (src->size < BLK || dst->size < BLK || dst == src)
		return;
	soff = below(src->size / BLK) * BLK;
	len = (1 + below(16)) * BLK;
	if (soff + len > src->size / BLK * BLK)
		len = src->size / BLK * BLK - soff;
	doff = below(dst->size / BLK) * BLK;
	if (doff + len > dst->size / BLK * BLK)
		len = dst->size / BLK * BLK - doff;
	if (!len)
		return;
	if (below(4)) {
		xpwrite(dst, dst->fd, src->data + soff, len, doff);
		memcpy(dst->data + doff, src->data + soff, len);
	}
	same = !memcmp(dst->data + doff, src->data + soff, len);
	logop("dedupe %s %zu <- %s %zu +%zu (%s)", fpath(dst), doff, fpath(src), soff,
	      len, same ? "same" : "differs");
	r = calloc(1, sizeof(*r) + sizeof(r->info[0]));
	r->src_offset = soff;
	r->src_length = len;
	r->dest_count = 1;
	r->info[0].dest_fd = dst->fd;
	r->info[0].dest_offset = doff;
	if (ioctl(src->fd, FIDEDUPERANGE, r))
		die("FIDEDUPERANGE: %s", strerror(errno));
	if (r->info[0].status < 0)
		die("FIDEDUPERANGE status: %s", strerror(-r->info[0].status));
	if ((r->info[0].status == FILE_DEDUPE_RANGE_SAME) != same) {
		dump_log();
		fprintf(stderr, "sfx[%d]: MISMATCH: dedupe says the ranges %s, the model says %s\n",
			wid, same ? "differ" : "are the same", same ? "same" : "differ");
		exit(1);
	}
	free(r);
}

static int new_subvol_slot(void)
{
	int i;

	for (i = 0; i < MAXSUBVOLS; i++)
		if (!subvols[i].used)
			return i;
	return -1;
}

static void close_subvol_files(int s, bool forget)
{
	int i;

	for (i = 0; i < MAXFILES; i++) {
		if (!files[i].used || files[i].subvol != s)
			continue;
		if (forget)
			unmap_all(&files[i]);
		close(files[i].fd);
		if (forget) {
			free(files[i].data);
			files[i].used = false;
		}
	}
}

static int open_dir(const char *sub)
{
	char p[PATH_MAX];
	int fd;

	if (snprintf(p, sizeof(p), "%s%s%s", wdir, sub ? "/" : "", sub ? sub : "") >= (int)sizeof(p))
		die("path %s/%s too long", wdir, sub);
	fd = open(p, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		die("open %s: %s", p, strerror(errno));
	return fd;
}

static void delete_subvol(int s)
{
	struct btrfs_ioctl_vol_args a = { };
	int dfd;

	logop("delete subvolume %s", subvols[s].name);
	close_subvol_files(s, true);
	dfd = open_dir(NULL);
	snprintf(a.name, sizeof(a.name), "%s", subvols[s].name);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &a))
		die("delete subvolume %s: %s", subvols[s].name, strerror(errno));
	close(dfd);
	subvols[s].used = false;
}

static void do_snapshot(void)
{
	struct btrfs_ioctl_vol_args_v2 a = { };
	int idx[MAXFILES], n = live_files(idx), s, src, i, sfd, dfd, nsrc = 0;

	/* keep room: delete a snapshot (never subvolume 0) when full */
	s = new_subvol_slot();
	if (s < 0) {
		do {
			s = 1 + below(MAXSUBVOLS - 1);
		} while (!subvols[s].used);
		delete_subvol(s);
		return;
	}
	src = files[idx[below(n)]].subvol;
	for (i = 0; i < n; i++)
		nsrc += files[idx[i]].subvol == src;
	if (n + nsrc > MAXFILES) {
		/* no room for its files: delete another snapshot instead */
		for (i = 1; i < MAXSUBVOLS; i++)
			if (subvols[i].used && i != src) {
				delete_subvol(i);
				return;
			}
		return;
	}
	snprintf(subvols[s].name, sizeof(subvols[s].name), "snap%d", ++snap_serial);
	logop("snapshot %s -> %s", subvols[src].name, subvols[s].name);
	sfd = open_dir(subvols[src].name);
	dfd = open_dir(NULL);
	a.fd = sfd;
	snprintf(a.name, sizeof(a.name), "%s", subvols[s].name);
	if (ioctl(dfd, BTRFS_IOC_SNAP_CREATE_V2, &a))
		die("snapshot: %s", strerror(errno));
	close(sfd);
	close(dfd);
	subvols[s].used = true;
	for (i = 0; i < n; i++) {
		struct mfile *f = &files[idx[i]], *c;

		if (f->subvol != src)
			continue;
		c = new_file(s, f->name);
		memcpy(c->data, f->data, f->size);
		c->size = f->size;
		open_file(c, false);
	}
}

static void do_unlink(struct mfile *f)
{
	int idx[MAXFILES], n = live_files(idx);
	char name[32];
	int s = f->subvol;

	if (n <= 2)
		return;
	logop("unlink %s", fpath(f));
	if (unlink(fpath(f)))
		die("unlink %s: %s", fpath(f), strerror(errno));
	/*
	 * The inode lives on while mapped, with the same data: check that,
	 * then let the mappings go with the file (the model forgets it).
	 */
	if (opt.mmap_ops && below(2))
		mcheck_logged(f, " after unlink");
	unmap_all(f);
	close(f->fd);
	/* and a new file in its place, cloned from another */
	snprintf(name, sizeof(name), "%s", f->name);
	free(f->data);
	f->used = false;
	f = new_file(s, name);
	open_file(f, true);
	do_clone(f, pick(), true);
}

static void drop_caches(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);

	if (fd < 0)
		return;	/* not root: the rest still runs */
	if (write(fd, "3\n", 2) != 2)
		die("drop_caches: %s", strerror(errno));
	close(fd);
}

static void do_mmap(struct mfile *f, int op)
{
	size_t off, len, moff, mlen;
	unsigned char *p;
	int prot = PROT_READ, flags = MAP_SHARED;
	bool sync = false, readback = false;

	if (f->size == 0)
		return;
	off = below(f->size);
	len = 1 + below(f->size - off < 8 * BLK ? f->size - off : 8 * BLK);
	moff = off / BLK * BLK;
	mlen = off + len - moff;
	if (op != OP_MREAD)
		prot |= PROT_WRITE;
	if (op == OP_MPRIVATE)
		flags = MAP_PRIVATE;
	if (op == OP_MSHARED) {
		sync = below(2);
		readback = below(2);
	}
	logop("%s %s %zu+%zu%s%s", opnames[op], fpath(f), off, len, sync ? " msync" : "",
	      readback ? " pread" : "");
	p = mmap(NULL, mlen, prot, flags, f->fd, moff);
	if (p == MAP_FAILED)
		die("mmap %s: %s", fpath(f), strerror(errno));
	check(f, "mmap read", off, p + (off - moff), len);
	if (op != OP_MREAD) {
		fill(iobuf, len);
		memcpy(p + (off - moff), iobuf, len);
		/* the mapping sees its own write at once */
		if (memcmp(p + (off - moff), iobuf, len)) {
			dump_log();
			fprintf(stderr, "sfx[%d]: MISMATCH: %s mapping does not hold its write\n",
				wid, opnames[op]);
			exit(1);
		}
		if (op == OP_MSHARED) {
			memcpy(f->data + off, iobuf, len);
			if (sync && msync(p, mlen, MS_SYNC))
				die("msync: %s", strerror(errno));
			/* the page cache is one: read(2) sees it, msync or not */
			if (readback)
				xpread(f, sync ? "pread after msync" : "pread after MAP_SHARED write",
				       f->fd, dbuf, len, off);
		}
	}
	munmap(p, mlen);
	/* a private write never reaches the file */
	if (op == OP_MPRIVATE)
		xpread(f, "pread after MAP_PRIVATE write", f->fd, iobuf, len, off);
}

static bool has_map(const struct mfile *f, bool writable)
{
	int k;

	for (k = 0; k < f->nmaps; k++)
		if (!writable || f->map[k].priv || f->map[k].wr)
			return true;
	return false;
}

/*
 * The file a mapping operation works on: @f if it has a mapping (a
 * writable one if @writable), else a random one of the files that do;
 * NULL if none does.
 */
static struct mfile *mapped_file(struct mfile *f, bool writable)
{
	int idx[MAXFILES], n = 0, i;

	if (has_map(f, writable))
		return f;
	for (i = 0; i < MAXFILES; i++)
		if (files[i].used && has_map(&files[i], writable))
			idx[n++] = i;
	return n ? &files[idx[below(n)]] : NULL;
}

static int pick_map(const struct mfile *f, bool writable)
{
	int slot[NMAPS], n = 0, k;

	for (k = 0; k < f->nmaps; k++)
		if (!writable || f->map[k].priv || f->map[k].wr)
			slot[n++] = k;
	return slot[below(n)];
}

/* Pages of @m that may be touched without SIGBUS: a prefix of it. */
static size_t touchable_pages(const struct mfile *f, const struct mmapping *m)
{
	size_t eof = (f->size + BLK - 1) / BLK * BLK;

	if (eof <= m->off)
		return 0;
	return (eof - m->off) / BLK < m->len / BLK ? (eof - m->off) / BLK : m->len / BLK;
}

/* A random range of whole pages to map: mostly over the file's data. */
static void map_range(const struct mfile *f, size_t maxpages, size_t *off, size_t *len)
{
	size_t all = opt.maxlen / BLK, first, lim;

	if (f->size && below(4))
		first = below((f->size + BLK - 1) / BLK);
	else
		first = below(all);
	lim = all - first < maxpages ? all - first : maxpages;
	*off = first * BLK;
	*len = (1 + below(lim)) * BLK;
}

/*
 * A file that has persistent mappings (mapped_file()) and one of them,
 * chosen at random: its slot in *kp.  NULL when no file has one.
 */
static struct mmapping *pick_any_mapping(struct mfile **fp, int *kp)
{
	*fp = mapped_file(*fp, false);
	if (!*fp)
		return NULL;
	*kp = below((*fp)->nmaps);
	return &(*fp)->map[*kp];
}

static struct mfile *do_unmap(struct mfile *f)
{
	struct mmapping *m;
	int k;

	m = pick_any_mapping(&f, &k);
	if (!m)
		return NULL;
	logop("unmap %s #%d (%s %zu+%zu)", fpath(f), k, map_kind(m), m->off, m->len);
	unmap_slot(f, k);
	return f;
}

/* A new persistent mapping of @f (in place of one, when it has NMAPS). */
static struct mfile *do_map(struct mfile *f)
{
	bool priv, wr, populate;
	size_t off, len;
	int k;

	if (f->nmaps == NMAPS)
		return do_unmap(f);
	priv = below(3) == 0;
	for (k = 0; k < f->nmaps; k++)
		if (f->map[k].priv)
			priv = false;	/* one MAP_PRIVATE mapping at most */
	wr = !priv && below(2);
	populate = below(4) == 0;
	map_range(f, MAPPAGES, &off, &len);
	logop("map %s #%d %zu+%zu %s%s", fpath(f), f->nmaps, off, len,
	      priv ? "private" : wr ? "shared-rw" : "shared", populate ? " populate" : "");
	k = map_create(f, off, len, priv, wr, populate);
	if (priv && populate) {
		struct mmapping *m = &f->map[k];
		size_t i;

		/*
		 * MAP_POPULATE faults a writable private mapping in for write
		 * (populate_vma_page_range()): every page below EOF is COWed
		 * now, with the file's data, and no longer follows the file.
		 */
		for (i = 0; i < touchable_pages(f, m); i++) {
			expect_page(f, m, i, m->cow + i * BLK);
			m->dirty |= 1ULL << i;
		}
	}
	check_pages(f, &f->map[k], k, 0, len / BLK, "map");
	return f;
}

/* mremap: grow, shrink or move (to an address of its choosing, or one given) */
static struct mfile *do_mremap(struct mfile *f)
{
	size_t all = opt.maxlen / BLK, lim, len;
	struct mmapping *m;
	bool fixed;
	void *p, *q;
	int k;

	m = pick_any_mapping(&f, &k);
	if (!m)
		return NULL;
	lim = all - m->off / BLK < MAPPAGES ? all - m->off / BLK : MAPPAGES;
	len = (1 + below(lim)) * BLK;
	fixed = below(3) == 0;
	logop("mremap %s #%d (%s %zu+%zu) to +%zu%s", fpath(f), k, map_kind(m), m->off,
	      m->len, len, fixed ? " fixed" : "");
	if (fixed) {
		/* a new place, reserved first: MREMAP_FIXED replaces it */
		q = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (q == MAP_FAILED)
			die("mmap: %s", strerror(errno));
		p = mremap(m->p, m->len, len, MREMAP_MAYMOVE | MREMAP_FIXED, q);
	} else {
		p = mremap(m->p, m->len, len, MREMAP_MAYMOVE);
	}
	if (p == MAP_FAILED)
		die("mremap %s %zu+%zu to +%zu: %s", fpath(f), m->off, m->len, len, strerror(errno));
	m->p = p;
	m->len = len;
	m->dirty &= page_mask(0, len / BLK);	/* the pages cut off are gone */
	check_pages(f, m, k, 0, len / BLK, "mremap");
	return f;
}

static struct mfile *do_mcheck(struct mfile *f)
{
	if (!f->nmaps) {
		logop("mcheck all");
		mcheck_all_logged("");
		return NULL;
	}
	logop("mcheck %s (%d mappings)", fpath(f), f->nmaps);
	mcheck_file(f, "mcheck");
	return f;
}

static struct mfile *do_madvise(struct mfile *f)
{
	static const int adv[] = {
		MADV_DONTNEED, MADV_COLD, MADV_PAGEOUT, MADV_WILLNEED, MADV_POPULATE_READ,
	};
	static const char *const advname[] = {
		"DONTNEED", "COLD", "PAGEOUT", "WILLNEED", "POPULATE_READ",
	};
	struct mmapping *m;
	size_t first, n, ok;
	int k, a;

	m = pick_any_mapping(&f, &k);
	if (!m)
		return NULL;
	first = below(m->len / BLK);
	n = 1 + below(m->len / BLK - first);
	a = below(5);
	if (adv[a] == MADV_POPULATE_READ) {
		/* it fails with EFAULT where a read would raise SIGBUS */
		ok = touchable_pages(f, m);
		n = first >= ok ? 0 : first + n > ok ? ok - first : n;
	}
	logop("madvise %s #%d (%s %zu+%zu) pages %zu+%zu %s", fpath(f), k, map_kind(m), m->off,
	      m->len, first, n, advname[a]);
	if (n && madvise(m->p + first * BLK, n * BLK, adv[a])) {
		if (errno == EFAULT && adv[a] == MADV_POPULATE_READ) {
			dump_log();
			fprintf(stderr, "sfx[%d]: MISMATCH: MADV_POPULATE_READ of pages below EOF of %s (size %zu) failed with EFAULT (SIGBUS), op %ld\n",
				wid, fpath(f), f->size, opno);
			exit(1);
		}
		/* COLD, PAGEOUT, POPULATE_READ: not on every kernel */
		if (errno != EINVAL || adv[a] == MADV_DONTNEED || adv[a] == MADV_WILLNEED)
			die("madvise %s %s: %s", advname[a], fpath(f), strerror(errno));
	}
	if (n && adv[a] == MADV_DONTNEED && m->priv)
		m->dirty &= ~page_mask(first, n);	/* back to the file's pages */
	mcheck_file(f, "mcheck after madvise");
	return f;
}

/*
 * A write through a writable persistent mapping: through MAP_SHARED it
 * changes the file (below EOF only: what lands past EOF is not kept); through
 * MAP_PRIVATE it copies each page it touches first (the model takes the
 * page's current view) and leaves the file alone.
 */
static struct mfile *do_mapwrite(struct mfile *f)
{
	struct mmapping *m;
	size_t end, avail, a, n, i;
	bool sync, readback;
	int k;

	f = mapped_file(f, true);
	if (!f)
		return NULL;
	k = pick_map(f, true);
	m = &f->map[k];
	end = m->priv ? m->off + touchable_pages(f, m) * BLK : f->size;
	if (end > m->off + m->len)
		end = m->off + m->len;
	if (end <= m->off)
		return f;	/* all beyond EOF */
	avail = end - m->off;
	a = below(avail);
	n = 1 + below(avail - a < 8 * BLK ? avail - a : 8 * BLK);
	sync = !m->priv && below(2);
	readback = below(2);
	logop("map_write %s #%d (%s %zu+%zu) at %zu+%zu%s%s", fpath(f), k, map_kind(m), m->off,
	      m->len, m->off + a, n, sync ? " msync" : "", readback ? " pread" : "");
	fill(iobuf, n);
	if (m->priv) {
		for (i = a / BLK; i <= (a + n - 1) / BLK; i++)
			if (!(m->dirty >> i & 1)) {
				expect_page(f, m, i, m->cow + i * BLK);
				m->dirty |= 1ULL << i;
			}
		memcpy(m->cow + a, iobuf, n);
	} else {
		model_write(f, m->off + a, iobuf, n);
	}
	if (!guarded_copy(m->p + a, iobuf, n)) {
		dump_log();
		fprintf(stderr, "sfx[%d]: MISMATCH: SIGBUS writing through %s mapping #%d of %s (size %zu) at %zu+%zu, below EOF, op %ld\n",
			wid, map_kind(m), k, fpath(f), f->size, m->off + a, n, opno);
		exit(1);
	}
	check_pages(f, m, k, a / BLK, (a + n - 1) / BLK - a / BLK + 1, "map_write");
	if (sync && msync(m->p + a / BLK * BLK, (a + n + BLK - 1) / BLK * BLK - a / BLK * BLK,
			  MS_SYNC))
		die("msync %s: %s", fpath(f), strerror(errno));
	if (readback)
		xpread(f, m->priv ? "pread after a MAP_PRIVATE map_write" :
		       "pread after a MAP_SHARED map_write", f->fd, dbuf, n, m->off + a);
	return f;
}

/*
 * fork_read: a child reads pages through one of @f's mappings (or a new
 * one of its own) and with pread(2), against the model it inherited; with
 * a MAP_PRIVATE mapping it may then scribble on its copy, which must not
 * show in the parent's.
 */
static struct mfile *do_forkread(struct mfile *f)
{
	static unsigned char junk[BLK];
	struct mmapping anew, *m = &anew;
	size_t first, n, ok, i;
	bool scribble;
	pid_t pid;
	int k, st;

	memset(&anew, 0, sizeof(anew));
	k = f->nmaps ? (int)below(f->nmaps + 1) : f->nmaps;
	if (k < f->nmaps)
		m = &f->map[k];
	else
		map_range(f, 16, &anew.off, &anew.len);
	first = below(m->len / BLK);
	n = 1 + below(m->len / BLK - first);
	scribble = m->priv && below(2);
	logop("fork_read %s %s%d (%s %zu+%zu) pages %zu+%zu%s", fpath(f),
	      m == &anew ? "new " : "#", m == &anew ? 0 : k, map_kind(m), m->off, m->len,
	      first, n, scribble ? " scribble" : "");
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		if (m == &anew) {
			m->p = mmap(NULL, m->len, PROT_READ, MAP_SHARED, f->fd, m->off);
			if (m->p == MAP_FAILED)
				die("mmap %s in fork_read: %s", fpath(f), strerror(errno));
		}
		check_pages(f, m, m == &anew ? -1 : k, first, n, "fork_read child");
		xpread(f, "pread in fork_read child", f->fd, dbuf, n * BLK, m->off + first * BLK);
		if (scribble) {
			memset(junk, 0xa5, sizeof(junk));
			ok = touchable_pages(f, m);
			for (i = first; i < first + n && i < ok; i++)
				if (!guarded_copy(m->p + i * BLK, junk, BLK)) {
					dump_log();
					fprintf(stderr, "sfx[%d]: MISMATCH: SIGBUS writing through MAP_PRIVATE mapping #%d of %s (size %zu) at %zu in fork_read child, below EOF\n",
						wid, k, fpath(f), f->size, m->off + i * BLK);
					_exit(1);
				}
		}
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		if (!WIFEXITED(st))
			dump_log();	/* else the child printed it */
		fprintf(stderr, "sfx[%d]: %s: fork_read child of op %ld failed (%s %d)\n", wid,
			WIFEXITED(st) && WEXITSTATUS(st) == 2 ? "ERROR" : "MISMATCH", opno,
			WIFSIGNALED(st) ? "signal" : "status",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		exit(WIFEXITED(st) && WEXITSTATUS(st) == 2 ? 2 : 1);
	}
	if (scribble)
		check_pages(f, m, k, first, n, "after fork_read");
	return f;
}

static int pick_op(void)
{
	int total = 0, i, r;

	for (i = 0; i < NR_OPS; i++)
		total += weight[i];
	r = below(total);
	for (i = 0; i < NR_OPS; i++) {
		if (r < weight[i])
			return i;
		r -= weight[i];
	}
	return OP_READ;
}

static double now(void);

/*
 * The operations after which the live mappings of the files they touched
 * are checked with probability 1/2: those that change a file or what of
 * it is in the page cache (or write it back).
 */
static const bool check_after[NR_OPS] = {
	[OP_WRITE] = true, [OP_DREAD] = true, [OP_DWRITE] = true, [OP_TRUNCATE] = true,
	[OP_FALLOC] = true, [OP_PUNCH] = true, [OP_ZERO] = true, [OP_CLONE] = true,
	[OP_CLONERANGE] = true, [OP_DEDUPE] = true, [OP_SNAPSHOT] = true,
	[OP_FSYNC] = true, [OP_SYNC] = true, [OP_DROP] = true, [OP_DONTNEED] = true,
	[OP_MSHARED] = true, [OP_MPRIVATE] = true, [OP_MAPWRITE] = true,
};

static void one_op(void)
{
	struct mfile *f = pick(), *g = pick(), *t = f;
	int op = pick_op();
	double t0 = now();

	counts[op]++;
	switch (op) {
	case OP_READ:
	case OP_PREAD:
		do_read(f, op == OP_PREAD);
		break;
	case OP_WRITE:
		do_write(f);
		break;
	case OP_DREAD:
		do_dread(f);
		break;
	case OP_DWRITE:
		do_dwrite(f);
		break;
	case OP_TRUNCATE:
		do_truncate(f);
		break;
	case OP_FALLOC:
	case OP_PUNCH:
	case OP_ZERO:
		do_fallocate(f, op);
		break;
	case OP_CLONE:
		do_clone(f, g, true);
		break;
	case OP_CLONERANGE:
		do_clone(f, g, false);
		break;
	case OP_DEDUPE:
		do_dedupe(f, g);
		break;
	case OP_SNAPSHOT:
		do_snapshot();
		break;
	case OP_FSYNC:
		logop("fsync %s", fpath(f));
		if (fsync(f->fd))
			die("fsync: %s", strerror(errno));
		break;
	case OP_SYNC:
		logop("sync");
		sync();
		break;
	case OP_DROP:
		logop("drop_caches");
		drop_caches();
		break;
	case OP_DONTNEED:
		logop("fadvise DONTNEED %s", fpath(f));
		posix_fadvise(f->fd, 0, 0, POSIX_FADV_DONTNEED);
		break;
	case OP_MREAD:
	case OP_MSHARED:
	case OP_MPRIVATE:
		do_mmap(f, op);
		break;
	case OP_UNLINK:
		do_unlink(f);	/* checks the unlinked file's mappings itself */
		break;
	case OP_MAP:
		do_map(f);
		break;
	case OP_UNMAP:
		do_unmap(f);
		break;
	case OP_MREMAP:
		do_mremap(f);
		break;
	case OP_MCHECK:
		do_mcheck(f);
		break;
	case OP_MADVISE:
		do_madvise(f);
		break;
	case OP_MAPWRITE:
		t = do_mapwrite(f);
		break;
	case OP_FORKREAD:
		do_forkread(f);
		break;
	}
	/* catch a stale PTE right after the change that left it */
	if (opt.mmap_ops && check_after[op] && below(2)) {
		if (op == OP_SNAPSHOT) {
			/* it may have deleted a snapshot, f's and g's included */
			mcheck_all_logged(" after snapshot");
		} else if (t) {
			mcheck_logged(t, "");
			if (g != t && (op == OP_CLONE || op == OP_CLONERANGE || op == OP_DEDUPE))
				mcheck_logged(g, " (source)");
		}
	}
	op_seconds[op] += now() - t0;
}

static void mkdir_p(const char *p)
{
	if (mkdir(p, 0755) && errno != EEXIST)
		die("mkdir %s: %s", p, strerror(errno));
}

static void create_subvol(const char *name)
{
	struct btrfs_ioctl_vol_args a = { };
	int dfd = open_dir(NULL);

	snprintf(a.name, sizeof(a.name), "%s", name);
	if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &a))
		die("create subvolume %s/%s: %s", wdir, name, strerror(errno));
	close(dfd);
}

/* The golden files every worker's files start as reflinks of. */
static void make_golden(void)
{
	char p[PATH_MAX];
	int i, fd;

	snprintf(wdir, sizeof(wdir), ".");
	create_subvol("golden");
	for (i = 0; i < opt.nfiles; i++) {
		size_t len = opt.maxlen / 2 + below(opt.maxlen / 2);

		snprintf(p, sizeof(p), "golden/g%d", i);
		fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			die("create %s: %s", p, strerror(errno));
		fill(iobuf, len);
		if (write(fd, iobuf, len) != (ssize_t)len)
			die("write %s: %s", p, strerror(errno));
		close(fd);
	}
	sync();
}

static void golden_data(int i, struct mfile *f)
{
	char p[PATH_MAX];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "golden/g%d", i);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		die("open %s: %s", p, strerror(errno));
	n = pread(fd, f->data, opt.maxlen, 0);
	if (n < 0)
		die("read %s: %s", p, strerror(errno));
	f->size = n;
	if (ioctl(f->fd, FICLONE, fd))
		die("FICLONE %s <- %s: %s", fpath(f), p, strerror(errno));
	close(fd);
}

static volatile sig_atomic_t stop;

static void on_alarm(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Checkpoints (-c, -r): a long run in several boots.  At the end of a run
 * that verified, each worker writes everything the rest of its sequence
 * depends on (random state, operation number, log hash, subvolumes, files
 * and their models) to SAVE.w<N>, and the parent marks DIR with a token
 * the files also hold.  A run with -r RESUME reads them back, checks that
 * DIR carries the same token (so a state never meets a filesystem that has
 * moved on since, after a failed run for instance), removes the mark,
 * verifies every file against its model (on a remounted filesystem, this
 * checks what reached the disk) and goes on with the same sequence: the
 * log hash of a run checkpointed and resumed equals that of one run.
 */
/*
 * A new value whenever what an operation draws from rnd() changes: a
 * checkpoint of the old sequence must not resume into the new one.
 */
#define CKPT_MAGIC	"sfxckpt3"
#define CKPT_MARK	".sfx-checkpoint"

struct ckpt {
	char magic[8];
	uint32_t hdr_size;	/* sizeof(struct ckpt): same build only */
	int32_t worker, workers, nfiles;
	uint64_t seed, maxlen, rng, loghash, token;
	int64_t opno, logno, verify_every;
	int32_t weight[NR_OPS], snap_serial;
	struct subvol subvols[MAXSUBVOLS];
	struct {
		int32_t used, subvol;
		char name[32];
		uint64_t size;
		int32_t nmaps, pad;
		struct {
			uint64_t off, len, dirty;
			int32_t priv, wr;
		} map[NMAPS];
	} files[MAXFILES];
	char oplog[LOGSZ][160];
};

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
	const unsigned char *c = p;

	while (len--)
		h = (h ^ *c++) * 0x100000001b3ULL;
	return h;
}

static void ckpt_path(char *p, size_t n, const char *base, int w)
{
	if (snprintf(p, n, "%s.w%d", base, w) >= (int)n)
		die("checkpoint path %s too long", base);
}

static void ckpt_save(uint64_t hash)
{
	char p[PATH_MAX], tmp[PATH_MAX + 8];
	uint64_t h = 0xcbf29ce484222325ULL;
	struct ckpt *c = calloc(1, sizeof(*c));
	FILE *fp;
	int i, k;

	if (!c)
		die("out of memory");
	memcpy(c->magic, CKPT_MAGIC, 8);
	c->hdr_size = sizeof(*c);
	c->worker = wid;
	c->workers = opt.workers;
	c->nfiles = opt.nfiles;
	c->seed = opt.seed;
	c->maxlen = opt.maxlen;
	c->rng = rng;
	c->loghash = hash;
	c->token = ckpt_next;
	c->opno = opno;
	c->logno = logno;
	c->verify_every = opt.verify_every;
	memcpy(c->weight, weight, sizeof(weight));
	c->snap_serial = snap_serial;
	memcpy(c->subvols, subvols, sizeof(subvols));
	for (i = 0; i < MAXFILES; i++) {
		c->files[i].used = files[i].used;
		c->files[i].subvol = files[i].subvol;
		memcpy(c->files[i].name, files[i].name, sizeof(c->files[i].name));
		c->files[i].size = files[i].used ? files[i].size : 0;
		c->files[i].nmaps = files[i].used ? files[i].nmaps : 0;
		for (k = 0; k < c->files[i].nmaps; k++) {
			c->files[i].map[k].off = files[i].map[k].off;
			c->files[i].map[k].len = files[i].map[k].len;
			c->files[i].map[k].dirty = files[i].map[k].dirty;
			c->files[i].map[k].priv = files[i].map[k].priv;
			c->files[i].map[k].wr = files[i].map[k].wr;
		}
	}
	memcpy(c->oplog, oplog, sizeof(oplog));

	ckpt_path(p, sizeof(p), opt.save, wid);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	fp = fopen(tmp, "w");
	if (!fp)
		die("checkpoint %s: %s", tmp, strerror(errno));
	h = fnv(h, c, sizeof(*c));
	fwrite(c, sizeof(*c), 1, fp);
	for (i = 0; i < MAXFILES; i++)
		if (files[i].used) {
			h = fnv(h, files[i].data, files[i].size);
			fwrite(files[i].data, 1, files[i].size, fp);
		}
	/* then the pages written through MAP_PRIVATE mappings */
	for (i = 0; i < MAXFILES; i++)
		for (k = 0; files[i].used && k < files[i].nmaps; k++) {
			const struct mmapping *m = &files[i].map[k];
			size_t pg;

			for (pg = 0; m->priv && pg < m->len / BLK; pg++)
				if (m->dirty >> pg & 1) {
					h = fnv(h, m->cow + pg * BLK, BLK);
					fwrite(m->cow + pg * BLK, 1, BLK, fp);
				}
		}
	fwrite(&h, sizeof(h), 1, fp);
	if (fflush(fp) || fsync(fileno(fp)) || ferror(fp) || fclose(fp))
		die("checkpoint %s: write failed: %s", tmp, strerror(errno));
	if (rename(tmp, p))
		die("checkpoint %s: %s", p, strerror(errno));
	free(c);
}

/*
 * Opens RESUME.w<w> and checks its header against this run: the same
 * build, worker, options and DIR's token.  Exits 2 on any doubt, before
 * anything is changed.
 */
static FILE *ckpt_open(int w, struct ckpt *c)
{
	char p[PATH_MAX];
	FILE *fp;

	ckpt_path(p, sizeof(p), opt.resume, w);
	fp = fopen(p, "r");
	if (!fp)
		die("resume: %s: %s", p, strerror(errno));
	if (fread(c, sizeof(*c), 1, fp) != 1 || memcmp(c->magic, CKPT_MAGIC, 8) ||
	    c->hdr_size != sizeof(*c) || c->worker != w)
		die("resume: %s is not a checkpoint of worker %d written by this sfx", p, w);
	if (c->workers != opt.workers || c->nfiles != opt.nfiles || c->seed != opt.seed ||
	    c->maxlen != opt.maxlen || c->verify_every != opt.verify_every ||
	    memcmp(c->weight, weight, sizeof(weight)))
		die("resume: %s was made with -s %" PRIu64 " -P %d -f %d -l %" PRIu64 " -V %" PRId64
		    " (and its own -M -m -D -S -C): give the same options", p, c->seed, c->workers,
		    c->nfiles, c->maxlen, c->verify_every);
	if (!ckpt_token || c->token != ckpt_token)
		die("resume: %s/%s %s %s: the filesystem is not the one it checkpointed",
		    opt.dir, CKPT_MARK, ckpt_token ? "does not match" : "is missing for", p);
	return fp;
}

/* Reads RESUME.w<wid> back into this worker's state and reopens its files. */
static void ckpt_load(void)
{
	uint64_t h = 0xcbf29ce484222325ULL, sum;
	struct ckpt *c = calloc(1, sizeof(*c));
	FILE *fp;
	int i, k;

	if (!c)
		die("out of memory");
	fp = ckpt_open(wid, c);
	h = fnv(h, c, sizeof(*c));
	rng = c->rng;
	loghash = c->loghash;
	opno = c->opno;
	logno = c->logno;
	snap_serial = c->snap_serial;
	memcpy(subvols, c->subvols, sizeof(subvols));
	memcpy(oplog, c->oplog, sizeof(oplog));
	for (i = 0; i < MAXFILES; i++) {
		struct mfile *f = &files[i];

		memset(f, 0, sizeof(*f));
		if (!c->files[i].used)
			continue;
		if (c->files[i].size > opt.maxlen || c->files[i].subvol < 0 ||
		    c->files[i].subvol >= MAXSUBVOLS || !subvols[c->files[i].subvol].used)
			die("resume: checkpoint of worker %d is damaged (file %d)", wid, i);
		f->used = true;
		f->subvol = c->files[i].subvol;
		memcpy(f->name, c->files[i].name, sizeof(f->name));
		f->name[sizeof(f->name) - 1] = 0;
		f->size = c->files[i].size;
		f->data = calloc(1, opt.maxlen);
		if (!f->data)
			die("out of memory");
		if (fread(f->data, 1, f->size, fp) != f->size)
			die("resume: checkpoint of worker %d is truncated", wid);
		h = fnv(h, f->data, f->size);
	}
	for (i = 0; i < MAXFILES; i++) {
		struct mfile *f = &files[i];

		if (!f->used)
			continue;
		if (c->files[i].nmaps < 0 || c->files[i].nmaps > NMAPS)
			die("resume: checkpoint of worker %d is damaged (mappings of file %d)", wid, i);
		for (k = 0; k < c->files[i].nmaps; k++) {
			struct mmapping *m = &f->map[k];
			size_t pg;

			m->off = c->files[i].map[k].off;
			m->len = c->files[i].map[k].len;
			m->dirty = c->files[i].map[k].dirty;
			m->priv = c->files[i].map[k].priv;
			m->wr = c->files[i].map[k].wr;
			if (m->off % BLK || m->len % BLK || !m->len || m->len > MAPPAGES * BLK ||
			    m->off + m->len > opt.maxlen || (m->dirty & ~page_mask(0, m->len / BLK)) ||
			    (m->dirty && !m->priv))
				die("resume: checkpoint of worker %d is damaged (mapping %d of file %d)",
				    wid, k, i);
			if (m->priv && !(m->cow = malloc(MAPPAGES * BLK)))
				die("out of memory");
			for (pg = 0; pg < m->len / BLK; pg++)
				if (m->dirty >> pg & 1) {
					if (fread(m->cow + pg * BLK, 1, BLK, fp) != BLK)
						die("resume: checkpoint of worker %d is truncated", wid);
					h = fnv(h, m->cow + pg * BLK, BLK);
				}
			f->nmaps++;
		}
	}
	if (fread(&sum, sizeof(sum), 1, fp) != 1 || sum != h || fgetc(fp) != EOF)
		die("resume: checkpoint of worker %d is damaged (checksum)", wid);
	fclose(fp);
	free(c);
	for (i = 0; i < MAXFILES; i++) {
		struct mfile *f = &files[i];

		if (!f->used)
			continue;
		open_file(f, false);
		/* the mappings again, with what the process wrote through them */
		for (k = 0; k < f->nmaps; k++) {
			struct mmapping *m = &f->map[k];
			size_t pg;

			map_attach(f, k, false);
			for (pg = 0; pg < m->len / BLK; pg++)
				if (m->dirty >> pg & 1 &&
				    !guarded_copy(m->p + pg * BLK, m->cow + pg * BLK, BLK))
					die("resume: SIGBUS writing page %zu of MAP_PRIVATE mapping %d of %s (size %zu)",
					    pg, k, fpath(f), f->size);
		}
	}
}

/* DIR's mark: the token of the checkpoint it matches (0 if none). */
static uint64_t ckpt_mark_read(void)
{
	unsigned long long t = 0;
	FILE *fp = fopen(CKPT_MARK, "r");

	if (!fp)
		return 0;
	if (fscanf(fp, "%llx", &t) != 1)
		t = 0;
	fclose(fp);
	return t;
}

static void ckpt_mark_write(uint64_t token)
{
	FILE *fp = fopen(CKPT_MARK ".tmp", "w");
	int dfd;

	if (!fp || fprintf(fp, "%016" PRIx64 "\n", token) < 0 || fflush(fp) ||
	    fsync(fileno(fp)) || fclose(fp) || rename(CKPT_MARK ".tmp", CKPT_MARK))
		die("mark %s/%s: %s", opt.dir, CKPT_MARK, strerror(errno));
	dfd = open(".", O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

/*
 * A racing reader (-R): drops and rereads random ranges of the worker's
 * files while the worker changes them, so that page cache (aliases
 * included) is being filled concurrently with every operation.  It checks
 * nothing itself (the file changes under it); the worker's own reads and
 * verifies see whatever a lost race left behind.  Reading and dropping
 * clean page cache never changes what a file holds, so the model stays
 * exact.  A stale file descriptor (closed by an unlink) only fails the read.
 */
static volatile int racers_stop;

static void *racer(void *arg)
{
	uint64_t r = (uintptr_t)arg * 0x9E3779B97F4A7C15ULL + 1;
	unsigned char *buf = malloc(opt.maxlen);

	if (!buf)
		return NULL;
	while (!racers_stop) {
		int fd;

		xorshift(&r);
		fd = files[(r >> 8) % MAXFILES].fd;
		if (fd <= 0)
			continue;
		if (r & 1)
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		if (pread(fd, buf, opt.maxlen - ((r >> 20) % opt.maxlen), (r >> 20) % opt.maxlen) < 0)
			continue;
	}
	free(buf);
	return NULL;
}

static int worker(int w)
{
	pthread_t rt[8];
	double t0 = now();
	uint64_t h;
	long start;
	int i;

	wid = w;
	/* relative to DIR, so that the log does not depend on where it is */
	snprintf(wdir, sizeof(wdir), "w%d", w);
	if (opt.resume) {
		ckpt_load();
		/* not in the hash: an uninterrupted run has no such step */
		h = loghash;
		logop("resume: verify all");
		verify_all();
		loghash = h;
		goto run;
	}
	rng = opt.seed * 0x9E3779B97F4A7C15ULL + w + 1;
	mkdir_p(wdir);
	create_subvol("s0");
	subvols[0].used = true;
	snprintf(subvols[0].name, sizeof(subvols[0].name), "s0");
	for (i = 0; i < opt.nfiles; i++) {
		char name[32];
		struct mfile *f;

		snprintf(name, sizeof(name), "f%d", i);
		f = new_file(0, name);
		open_file(f, true);
		golden_data(i, f);
	}
run:
	start = opno;
	__atomic_store_n(&total_ops[w], opno, __ATOMIC_RELAXED);
	__atomic_store_n(&start_ops[w], opno, __ATOMIC_RELEASE);	/* under way */
	for (i = 0; i < opt.racers; i++)
		if (pthread_create(&rt[i], NULL, racer, (void *)(uintptr_t)(w * 8 + i + 1)))
			die("pthread_create");
	for (; opt.ops < 0 || opno < opt.ops; opno++) {
		if (stop)
			break;
		one_op();
		__atomic_store_n(&total_ops[w], opno + 1, __ATOMIC_RELAXED);
		if (opt.corrupt_at && opno == opt.corrupt_at) {
			struct mfile *f = pick();

			/* must be caught by the next verify: proves sfx can fail */
			if (!f->size)
				model_resize(f, 1);
			f->data[f->size / 2] ^= 0x5a;
			logop("self-test: model of %s falsified at %zu", fpath(f), f->size / 2);
			verify_file(f);
		}
		if (opt.verify_every && opno % opt.verify_every == opt.verify_every - 1) {
			double t1 = now();

			logop("verify all");
			verify_all();
			counts[OP_VERIFY]++;
			op_seconds[OP_VERIFY] += now() - t1;
		}
	}
	racers_stop = 1;
	for (i = 0; i < opt.racers; i++)
		pthread_join(rt[i], NULL);
	h = loghash;
	logop("final verify");
	verify_all();
	if (opt.save)
		ckpt_save(h);
	if (!opt.quiet) {
		double t = now() - t0;

		printf("sfx[%d]: %ld operations in %.1f s (%.0f/s), 0 mismatches, log hash %016" PRIx64,
		       w, opno - start, t, (opno - start) / (t > 0 ? t : 1), loghash);
		if (opt.resume)
			printf(", operations %ld to %ld of the sequence", start, opno);
		printf(";");
		for (i = 0; i < NR_OPS; i++)
			if (counts[i])
				printf(" %s %ld", opnames[i], counts[i]);
		printf("\nsfx[%d]: share of the time:", w);
		for (i = 0; i < NR_OPS; i++)
			if (counts[i] && op_seconds[i] >= t / 200)
				printf(" %s %.1f%% (%.1f ms each)", opnames[i],
				       100 * op_seconds[i] / (t > 0 ? t : 1),
				       1000 * op_seconds[i] / counts[i]);
		printf("\n");
		fflush(stdout);
	}
	return 0;
}

static pid_t spawn(void (*fn)(void))
{
	pid_t pid = fork();

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		fn();
		_exit(0);
	}
	return pid;
}

/* -p: what the workers have done so far; it touches no file, so no run changes */
static void progress_loop(void)
{
	double t0 = now();

	for (;;) {
		long done = 0, all = 0;
		int i, starting = 0;
		double t;

		usleep((useconds_t)(opt.progress * 1e6));
		for (i = 0; i < opt.workers; i++) {
			long s = __atomic_load_n(&start_ops[i], __ATOMIC_ACQUIRE);
			long n = __atomic_load_n(&total_ops[i], __ATOMIC_RELAXED);

			if (s < 0) {
				starting++;
				continue;
			}
			done += n - s;
			all += n;
		}
		t = now() - t0;
		if (starting) {
			printf("sfx: progress: %d of %d worker(s) still %s (%.0f s)\n", starting,
			       opt.workers, opt.resume ? "verifying the checkpointed files" :
			       "creating their files", t);
			fflush(stdout);
			continue;
		}
		printf("sfx: progress: %ld operations in %.0f s (%.0f/s)", done, t, done / t);
		if (opt.ops >= 0)
			printf(", %ld of %ld in all", all, opt.ops * opt.workers);
		printf("\n");
		fflush(stdout);
	}
}

static void balance_loop(void)
{
	for (;;) {
		pid_t p = fork();

		if (p == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			dup2(fd, 2);
			execlp("btrfs", "btrfs", "balance", "start", "--full-balance", ".",
			       (char *)NULL);
			_exit(127);
		}
		if (p < 0 || waitpid(p, NULL, 0) < 0)
			_exit(1);
		sleep(1);
	}
}

static void hog_loop(void)
{
	size_t len = (size_t)opt.hog_mb << 20, i;
	unsigned char *p;

	for (;;) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			sleep(1);
			continue;
		}
		for (i = 0; i < len; i += 4096)
			p[i] = i;
		munmap(p, len);
	}
}

/* -c and -r name files relative to where sfx started, not to DIR. */
static const char *abspath(const char *p)
{
	char cwd[PATH_MAX], *a = NULL;

	if (p[0] == '/')
		return p;
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&a, "%s/%s", cwd, p) < 0)
		die("path %s: %s", p, strerror(errno));
	return a;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sfx [options] DIR\n"
		"  DIR is a directory on btrfs (created; must be empty, unless -r)\n"
		"  -s SEED     random seed (default 1); the same seed repeats the run\n"
		"  -n OPS      operations per worker (default 10000; -1: until -t)\n"
		"  -t SECONDS  stop after this long\n"
		"  -P N        N workers on files sharing one set of extents (default 1)\n"
		"  -f N        files per worker to start with (default 8)\n"
		"  -l BYTES    maximum file length (default 262144)\n"
		"  -V N        verify every file every N operations (default 1000; 0: at the end)\n"
		"  -M          no mmap operations    -D  no O_DIRECT operations\n"
		"  -m N        weight every mmap operation N times (default 1; 0 is -M):\n"
		"              mmap_read/shared_write/private_write, map, unmap, mremap,\n"
		"              mcheck, madvise, map_write, fork_read\n"
		"  -S          no snapshots          -C  no drop_caches\n"
		"  -B          btrfs balance in the background\n"
		"  -H MB       a memory hog of MB in the background\n"
		"  -R N        N reader threads per worker racing its operations (0-8)\n"
		"  -q          quiet: print nothing on success\n"
		"  -Z          compressible data (for a compress= mount; still random)\n"
		"  -p SECONDS  a progress line every SECONDS: operations so far and per second\n"
		"  -X OP       self-test: falsify the model after operation OP (must fail)\n"
		"  -c FILE     checkpoint: at the end, save the state to FILE.w<N> and mark DIR\n"
		"  -r FILE     resume from FILE.w<N> in DIR (same options; -n counts from the\n"
		"              first run); every file is verified before going on\n"
		"exit: 0 verified, 1 mismatch (seed and operation log printed), 2 error\n");
	exit(2);
}

int main(int argc, char **argv)
{
	pid_t bg[3] = { 0, 0, 0 }, *pids;
	struct statfs sfs;
	double t0;
	int c, i, failed = 0;
	long total = 0, all = 0;

	while ((c = getopt(argc, argv, "s:n:t:P:f:l:V:Mm:DSCBH:R:X:c:r:p:qZh")) != -1) {
		switch (c) {
		case 's': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'n': opt.ops = strtol(optarg, NULL, 0); break;
		case 't': opt.seconds = strtod(optarg, NULL); break;
		case 'P': opt.workers = atoi(optarg); break;
		case 'f': opt.nfiles = atoi(optarg); break;
		case 'l': opt.maxlen = strtoul(optarg, NULL, 0); break;
		case 'V': opt.verify_every = strtol(optarg, NULL, 0); break;
		case 'M': opt.mmap_ops = false; break;
		case 'm': opt.mmap_weight = atoi(optarg); break;
		case 'D': opt.direct_ops = false; break;
		case 'S': opt.snapshots = false; break;
		case 'C': opt.drop_caches = false; break;
		case 'B': opt.balance = true; break;
		case 'H': opt.hog_mb = atol(optarg); break;
		case 'R': opt.racers = atoi(optarg); break;
		case 'q': opt.quiet = true; break;
		case 'Z': opt.compressible = true; break;
		case 'p': opt.progress = strtod(optarg, NULL); break;
		case 'X': opt.corrupt_at = atol(optarg); break;
		case 'c': opt.save = abspath(optarg); break;
		case 'r': opt.resume = abspath(optarg); break;
		default: usage();
		}
	}
	if (optind != argc - 1)
		usage();
	opt.dir = argv[optind];
	if (opt.workers < 1 || opt.workers > 64 || opt.nfiles < 2 ||
	    opt.nfiles > MAXFILES / 2 || opt.maxlen < 4 * BLK || opt.maxlen % BLK ||
	    opt.maxlen > (64 << 20) || opt.racers < 0 || opt.racers > 8 ||
	    opt.mmap_weight < 0 || opt.mmap_weight > 1000 ||
	    !(opt.progress == 0 || (opt.progress >= 0.1 && opt.progress <= 86400)))
		die("bad option: need 1 <= -P <= 64, 2 <= -f <= %d, -l a multiple of 4096 in [16K, 64M], 0 <= -R <= 8, 0 <= -m <= 1000, -p 0 or 0.1 to 86400",
		    MAXFILES / 2);
	if (opt.mmap_weight == 0)
		opt.mmap_ops = false;
	for (i = 0; i < (int)(sizeof(mmap_ops) / sizeof(mmap_ops[0])); i++)
		weight[mmap_ops[i]] *= opt.mmap_ops ? opt.mmap_weight : 0;
	if (opt.mmap_ops && sysconf(_SC_PAGESIZE) != (long)BLK)
		die("the mmap operations assume %lu-byte pages, not %ld: run with -M", BLK,
		    sysconf(_SC_PAGESIZE));
	if (!opt.direct_ops)
		weight[OP_DREAD] = weight[OP_DWRITE] = 0;
	if (!opt.snapshots)
		weight[OP_SNAPSHOT] = 0;
	if (!opt.drop_caches)
		weight[OP_DROP] = 0;
	if (opt.ops < 0 && opt.seconds <= 0)
		die("-n -1 needs -t");

	if (!opt.resume)
		mkdir_p(opt.dir);
	if (statfs(opt.dir, &sfs))
		die("statfs %s: %s", opt.dir, strerror(errno));
	if (sfs.f_type != BTRFS_SUPER_MAGIC)
		die("%s is not on btrfs", opt.dir);
	if (opt.resume)
		;	/* DIR holds the files of the run being resumed */
	else if (rmdir(opt.dir) == 0)
		mkdir_p(opt.dir);
	else if (errno == ENOTEMPTY || errno == EEXIST)
		die("%s is not empty", opt.dir);
	if (chdir(opt.dir))
		die("chdir %s: %s", opt.dir, strerror(errno));
	if (opt.save) {
		char p[PATH_MAX + 8];
		int fd;

		/* find out now, not after hours of operations */
		ckpt_path(p, sizeof(p) - 8, opt.save, 0);
		strcat(p, ".tmp");
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die("checkpoint %s: %s", p, strerror(errno));
		close(fd);
		unlink(p);
		fd = open("/dev/urandom", O_RDONLY);
		if (fd < 0 || read(fd, &ckpt_next, sizeof(ckpt_next)) != sizeof(ckpt_next))
			die("/dev/urandom: %s", strerror(errno));
		close(fd);
		ckpt_next |= 1;	/* never 0, the value of no mark */
	}
	if (opt.resume) {
		struct ckpt *ck = malloc(sizeof(*ck));

		if (!ck)
			die("out of memory");
		/* check every worker's header before the mark goes */
		ckpt_token = ckpt_mark_read();
		for (i = 0; i < opt.workers; i++)
			fclose(ckpt_open(i, ck));
		free(ck);
		if (unlink(CKPT_MARK))
			die("resume: remove %s/%s: %s", opt.dir, CKPT_MARK, strerror(errno));
	}

	{
		struct sigaction sa;

		/* inherited by the workers and their fork_read children */
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO | SA_NODEFER;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL))
			die("sigaction: %s", strerror(errno));
	}
	iobuf = aligned_alloc(BLK, opt.maxlen + BLK);
	dbuf = aligned_alloc(BLK, opt.maxlen + BLK);
	if (!iobuf || !dbuf)
		die("out of memory");
	rng = opt.seed ^ 0x5F0E1D2C3B4A5968ULL;
	if (!opt.resume)
		make_golden();

	if (!opt.quiet) {
		char each[64];

		if (opt.ops < 0)
			snprintf(each, sizeof(each), "operations for %.0f s", opt.seconds);
		else
			snprintf(each, sizeof(each), "%ld operations each", opt.ops);
		printf("sfx: seed %" PRIu64 ", %d worker(s), %s, files up to %zu bytes%s%s%s%s%s\n",
		       opt.seed, opt.workers, each, opt.maxlen,
		       opt.balance ? ", background balance" : "",
		       opt.hog_mb ? ", memory hog" : "",
		       !opt.mmap_ops ? "" : opt.mmap_weight > 1 ? ", mmap weighted up" : ", mmap",
		       opt.racers ? ", racing readers" : "",
		       opt.resume ? ", resumed from a checkpoint" : "");
	}
	fflush(stdout);
	if (opt.balance)
		bg[0] = spawn(balance_loop);
	if (opt.hog_mb)
		bg[1] = spawn(hog_loop);

	t0 = now();
	pids = calloc(opt.workers, sizeof(*pids));
	start_ops = mmap(NULL, 2 * opt.workers * sizeof(long), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!pids || start_ops == MAP_FAILED)
		die("out of memory");
	total_ops = start_ops + opt.workers;
	for (i = 0; i < opt.workers; i++)
		start_ops[i] = -1;	/* not under way yet */
	if (opt.progress > 0)
		bg[2] = spawn(progress_loop);
	for (i = 0; i < opt.workers; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			die("fork: %s", strerror(errno));
		if (pids[i] == 0) {
			if (opt.seconds > 0) {
				signal(SIGALRM, on_alarm);
				alarm((unsigned int)opt.seconds ? (unsigned int)opt.seconds : 1);
			}
			_exit(worker(i));
		}
	}
	for (i = 0; i < opt.workers; i++) {
		int st;

		if (waitpid(pids[i], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "sfx: worker %d failed (%s %d)\n", i,
				WIFSIGNALED(st) ? "signal" : "status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			failed = failed ?: (WIFEXITED(st) ? WEXITSTATUS(st) : 1);
		}
	}
	for (i = 0; i < 3; i++)
		if (bg[i]) {
			kill(bg[i], SIGKILL);
			waitpid(bg[i], NULL, 0);
		}
	/* a balance started by the loop may still be running */
	if (opt.balance) {
		pid_t p = fork();

		if (p == 0) {
			int fd = open("/dev/null", O_WRONLY);

			dup2(fd, 1);
			dup2(fd, 2);
			execlp("btrfs", "btrfs", "balance", "cancel", ".", (char *)NULL);
			_exit(127);
		}
		waitpid(p, NULL, 0);
	}
	for (i = 0; i < opt.workers; i++) {
		if (start_ops[i] >= 0)	/* -1: never under way */
			total += total_ops[i] - start_ops[i];
		all += total_ops[i];
	}
	t0 = now() - t0;
	if (opt.save && !failed)
		ckpt_mark_write(ckpt_next);
	if (!opt.quiet || failed) {
		printf("sfx: seed %" PRIu64 ": %ld operations in %.1f s (%.0f/s), %s",
		       opt.seed, total, t0, total / (t0 > 0 ? t0 : 1),
		       failed == 1 ? "MISMATCH" : failed ? "ERROR" : "0 mismatches");
		if (opt.resume && !failed)
			printf(", %ld in all", all);
		if (opt.save && !failed)
			printf(", checkpoint %s.w*", opt.save);
		printf("\n");
	}
	return failed;
}
