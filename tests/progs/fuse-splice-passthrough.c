// SPDX-License-Identifier: GPL-2.0
/*
 * fuse-splice-passthrough: a minimal libfuse3 low-level passthrough of ONE
 * backing file, shown read-write as the regular file "f" in the root of the
 * mount, that answers READs by splicing the backing file's pages with
 * SPLICE_F_MOVE.
 *
 * It exists to drive the kernel's page-moving FUSE read path: the READ
 * handler answers with fuse_reply_data() on a buffer that names the backing
 * fd and offset (FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK) with FUSE_BUF_SPLICE_MOVE.
 * libfuse then vmsplices the 16-byte reply header into a pipe, splices the
 * backing file's page-cache pages into the same pipe behind it, and splices
 * the pipe into /dev/fuse with SPLICE_F_MOVE.  For a readahead READ (the
 * only kind with args->page_replace) the kernel's fuse_copy_page() then
 * calls fuse_try_move_page() on every whole, page-aligned 4096-byte pipe
 * buffer: pipe_buf_try_steal() removes the backing file's folio from its
 * mapping and replace_page_cache_folio() puts it in the FUSE file's page
 * cache instead of copying.
 *
 * What that needs, and how this server gives it:
 *  - FUSE_CAP_SPLICE_WRITE and FUSE_CAP_SPLICE_MOVE in conn->want (init);
 *  - replies of at least 2 pages (libfuse copies smaller ones): READs are
 *    page cache readahead, up to max_read (default 128 KiB here), and the
 *    size is clamped to EOF so the splice is never short (a short splice
 *    makes libfuse read the pipe back and copy);
 *  - page-aligned offsets: readahead READs are, so every pipe buffer is a
 *    whole page of the backing file's page cache;
 *  - no FOPEN_DIRECT_IO, so reads go through the FUSE page cache.
 * FUSE_CAP_SPLICE_READ is asked for too, and writes are write_buf: WRITE
 * data of a page or more stays in the pipe and is spliced into the backing
 * file.
 *
 * Each open answers keep_cache=0 (the kernel drops the FUSE page cache at
 * every open) unless -k is given (FOPEN_KEEP_CACHE: what one open put in the
 * FUSE page cache is still there for the next).  FUSE_CAP_AUTO_INVAL_DATA is
 * turned off and entry/attribute timeouts are a day, so the FUSE page cache
 * changes only through opens, writes, truncates and eviction, not through a
 * changed mtime noticed at some getattr.
 *
 * Single-threaded, foreground (fuse_session_loop); as root libfuse mounts
 * with mount(2) itself.  Ends when unmounted or on SIGINT/SIGTERM/SIGHUP.
 *
 * usage: fuse-splice-passthrough [-k] [-d] [-o OPT[,OPT...]]...
 *                                BACKINGFILE MOUNTPOINT
 *   -k  keep_cache=1 on open (default keep_cache=0)
 *   -d  libfuse debug output
 *   -o  mount options (max_read=N, fsname=..., allow_other, ...);
 *       max_read=131072 is added when none is given
 * Prints the granted splice capabilities to stderr once mounted.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILE_INO	2
#define FILE_NAME	"f"
#define TIMEOUT		86400.0

static int backing_fd = -1;
static int keep_cache;
static unsigned int max_read = 131072;

static int file_stat(struct stat *st)
{
	if (fstat(backing_fd, st) == -1)
		return errno;
	st->st_ino = FILE_INO;
	st->st_mode = S_IFREG | (st->st_mode & 07777);
	st->st_nlink = 1;
	return 0;
}

static void dir_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = FUSE_ROOT_ID;
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
}

static void sf_init(void *userdata, struct fuse_conn_info *conn)
{
	unsigned int want = FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
			    FUSE_CAP_SPLICE_MOVE;

	(void)userdata;
	conn->want |= want & conn->capable;
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* libfuse 3.14 insists that this equals the max_read mount option. */
	conn->max_read = max_read;
	fprintf(stderr, "fuse-splice-passthrough: splice_read %s, splice_write %s, "
		"splice_move %s, max_read %u, keep_cache %d\n",
		conn->want & FUSE_CAP_SPLICE_READ ? "granted" : "NOT granted",
		conn->want & FUSE_CAP_SPLICE_WRITE ? "granted" : "NOT granted",
		conn->want & FUSE_CAP_SPLICE_MOVE ? "granted" : "NOT granted",
		max_read, keep_cache);
}

static void sf_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int err;

	if (parent != FUSE_ROOT_ID || strcmp(name, FILE_NAME) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	err = file_stat(&e.attr);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	e.ino = FILE_INO;
	e.generation = 1;
	e.attr_timeout = TIMEOUT;
	e.entry_timeout = TIMEOUT;
	fuse_reply_entry(req, &e);
}

static void sf_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	if (ino == FUSE_ROOT_ID) {
		dir_stat(&st);
	} else if (ino == FILE_INO) {
		err = file_stat(&st);
		if (err) {
			fuse_reply_err(req, err);
			return;
		}
	} else {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_attr(req, &st, TIMEOUT);
}

/* Only the size can change (ftruncate); other attributes are ignored. */
static void sf_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	if (ino != FILE_INO) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EPERM : ENOENT);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && ftruncate(backing_fd, attr->st_size) == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	err = file_stat(&st);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, TIMEOUT);
}

static void sf_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (ino != FILE_INO) {
		fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
		return;
	}
	/* FUSE_CAP_ATOMIC_O_TRUNC (a libfuse default): the truncate is ours. */
	if ((fi->flags & O_TRUNC) && ftruncate(backing_fd, 0) == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->direct_io = 0;
	fi->keep_cache = keep_cache;
	fuse_reply_open(req, fi);
}

static void sf_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(size);
	struct stat st;

	(void)ino;
	(void)fi;
	if (fstat(backing_fd, &st) == -1) {
		fuse_reply_err(req, errno);
		return;
	}
	if (off >= st.st_size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* Never ask libfuse to splice past EOF: a short splice is copied. */
	if ((off_t)size > st.st_size - off)
		size = st.st_size - off;
	bv.buf[0].size = size;
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = backing_fd;
	bv.buf[0].pos = off;
	fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
}

static void sf_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in,
			 off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	ssize_t res;

	(void)ino;
	(void)fi;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY;
	out.buf[0].fd = backing_fd;
	out.buf[0].pos = off;
	res = fuse_buf_copy(&out, in, 0);
	if (res < 0)
		fuse_reply_err(req, -res);
	else
		fuse_reply_write(req, res);
}

static void sf_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void sf_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void sf_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	int res = datasync ? fdatasync(backing_fd) : fsync(backing_fd);

	(void)ino;
	(void)fi;
	fuse_reply_err(req, res == -1 ? errno : 0);
}

static const struct fuse_lowlevel_ops sf_ops = {
	.init		= sf_init,
	.lookup		= sf_lookup,
	.getattr	= sf_getattr,
	.setattr	= sf_setattr,
	.open		= sf_open,
	.read		= sf_read,
	.write_buf	= sf_write_buf,
	.flush		= sf_flush,
	.release	= sf_release,
	.fsync		= sf_fsync,
};

static void usage(void)
{
	fprintf(stderr, "usage: fuse-splice-passthrough [-k] [-d] [-o OPT[,OPT...]]... "
		"BACKINGFILE MOUNTPOINT\n");
	exit(2);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	const char *backing = NULL, *mnt = NULL;
	struct fuse_session *se;
	int i, have_max_read = 0, ret = 1;
	char opt[64];

	if (fuse_opt_add_arg(&args, argv[0]) == -1)
		return 2;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *m;

		if (strcmp(a, "-k") == 0) {
			keep_cache = 1;
		} else if (strcmp(a, "-d") == 0) {
			if (fuse_opt_add_arg(&args, "-d") == -1)
				return 2;
		} else if (strncmp(a, "-o", 2) == 0) {
			const char *o = a[2] ? a + 2 : (++i < argc ? argv[i] : NULL);

			if (!o)
				usage();
			/* Every "max_read=" in the list: the last one counts. */
			for (m = strstr(o, "max_read="); m; m = strstr(m + 1, "max_read=")) {
				if (m == o || m[-1] == ',') {
					max_read = strtoul(m + 9, NULL, 0);
					have_max_read = 1;
				}
			}
			if (fuse_opt_add_arg(&args, "-o") == -1 ||
			    fuse_opt_add_arg(&args, o) == -1)
				return 2;
		} else if (a[0] == '-') {
			usage();
		} else if (!backing) {
			backing = a;
		} else if (!mnt) {
			mnt = a;
		} else {
			usage();
		}
	}
	if (!backing || !mnt)
		usage();
	if (!have_max_read) {
		snprintf(opt, sizeof(opt), "-omax_read=%u", max_read);
		if (fuse_opt_add_arg(&args, opt) == -1)
			return 2;
	}

	backing_fd = open(backing, O_RDWR);
	if (backing_fd == -1) {
		fprintf(stderr, "fuse-splice-passthrough: open %s: %s\n", backing,
			strerror(errno));
		return 2;
	}

	se = fuse_session_new(&args, &sf_ops, sizeof(sf_ops), NULL);
	if (!se)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	if (fuse_session_mount(se, mnt) != 0)
		goto out_handlers;
	ret = fuse_session_loop(se) ? 1 : 0;
	fuse_session_unmount(se);
out_handlers:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
	close(backing_fd);
	return ret;
}
