// SPDX-License-Identifier: GPL-2.0
/*
 * share-race: reads of a shared file racing changes to the same file.
 *
 * A file is a reflink of a source full of non-zero bytes.  Reader threads
 * drop the file's page cache and read it again, over and over, so that
 * shared-folio aliases are being installed all the time.  The main thread
 * changes the whole file in one way (-m) and reads it back; what it reads
 * must be exactly the change:
 *
 *   truncate  truncate to 0 and extend back: a hole, all zeros
 *   punch     FALLOC_FL_PUNCH_HOLE over the file: zeros
 *   zero      FALLOC_FL_ZERO_RANGE over the file: zeros
 *   write     pwrite() of a new pattern: that pattern
 *   clone     FICLONE from a second source: its pattern
 *
 * Page cache left by a read that raced the change would show the old data.
 * Then the source is rewritten (a new extent, so readers wait for disk
 * reads of it, which widens the windows) and cloned again for the next
 * round.
 *
 * usage: share-race [-m MODE] [-t SECONDS] [-r READERS] [-l BYTES] DIR
 * exit: 0 nothing stale seen, 1 stale data (mode, round, offset printed),
 * 2 error.  Prints the number of rounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;
static int dfd;
static size_t len = 1 << 20;

static void die(const char *what)
{
	fprintf(stderr, "share-race: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void *reader(void *arg __attribute__((unused)))
{
	char *buf = malloc(len);

	if (!buf)
		die("malloc");
	while (!atomic_load(&stop)) {
		posix_fadvise(dfd, 0, 0, POSIX_FADV_DONTNEED);
		/* short reads and EOF are expected: the file changes size */
		if (pread(dfd, buf, len, 0) < 0)
			die("pread (reader)");
	}
	free(buf);
	return NULL;
}

/* DIR/NAME, created empty, or full of byte @v (synced) if @buf is given. */
static int create(const char *dir, const char *name, char *buf, int v)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	if (buf) {
		memset(buf, v, len);
		if (pwrite(fd, buf, len, 0) != (ssize_t)len || fsync(fd))
			die(path);
	}
	return fd;
}

static const char *const modes[] = { "truncate", "punch", "zero", "write", "clone" };

/* Change the whole of the file as @mode says; return the byte it must hold. */
static unsigned char change(int mode, int s2fd, char *buf, long round)
{
	unsigned char v;

	switch (mode) {
	case 0:
		if (ftruncate(dfd, 0) || ftruncate(dfd, len))
			die("ftruncate");
		return 0;
	case 1:
		if (fallocate(dfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, len))
			die("punch");
		return 0;
	case 2:
		if (fallocate(dfd, FALLOC_FL_ZERO_RANGE, 0, len))
			die("zero range");
		return 0;
	case 3:
		v = 0x80 | (round % 127);
		memset(buf, v, len);
		if (pwrite(dfd, buf, len, 0) != (ssize_t)len)
			die("pwrite");
		return v;
	default:
		if (ioctl(dfd, FICLONE, s2fd))
			die("FICLONE (second source)");
		return 0xff;
	}
}

int main(int argc, char **argv)
{
	double seconds = 20;
	int readers = 2, mode = 0, c, sfd, s2fd, i;
	char *buf;
	pthread_t th[16];
	long rounds = 0;
	time_t end;

	while ((c = getopt(argc, argv, "m:t:r:l:")) != -1) {
		switch (c) {
		case 'm':
			for (mode = 0; mode < 5 && strcmp(optarg, modes[mode]); mode++)
				;
			if (mode == 5)
				goto usage;
			break;
		case 't': seconds = atof(optarg); break;
		case 'r': readers = atoi(optarg); break;
		case 'l': len = strtoul(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || readers < 1 || readers > 16 || !len || len % 4096) {
usage:
		fprintf(stderr, "usage: share-race [-m truncate|punch|zero|write|clone] [-t SECONDS]"
			" [-r READERS 1-16] [-l BYTES, pages] DIR\n");
		return 2;
	}
	buf = malloc(len);
	if (!buf)
		die("malloc");
	s2fd = create(argv[optind], "src2", buf, 0xff);
	sfd = create(argv[optind], "src", buf, 0x7f);
	dfd = create(argv[optind], "dst", NULL, 0);
	if (ioctl(dfd, FICLONE, sfd))
		die("FICLONE");
	for (i = 0; i < readers; i++)
		if (pthread_create(&th[i], NULL, reader, NULL))
			die("pthread_create");
	end = time(NULL) + (time_t)seconds;
	while (time(NULL) < end) {
		unsigned char want;
		ssize_t n;
		size_t off;

		rounds++;
		want = change(mode, s2fd, buf, rounds);
		n = pread(dfd, buf, len, 0);
		if (n != (ssize_t)len)
			die("pread after the change");
		for (off = 0; off < len && (unsigned char)buf[off] == want; off++)
			;
		if (off < len) {
			atomic_store(&stop, 1);
			printf("share-race: STALE DATA, mode %s, round %ld: byte %zu (page %zu)"
			       " reads %#x, must be %#x\n", modes[mode], rounds, off, off / 4096,
			       (unsigned char)buf[off], want);
			return 1;
		}
		/* the source's bytes are 1..0x7f, never a value checked above */
		memset(buf, 1 + rounds % 127, len);
		if (pwrite(sfd, buf, len, 0) != (ssize_t)len || fsync(sfd))
			die("rewrite src");
		if (ioctl(dfd, FICLONE, sfd))
			die("FICLONE");
	}
	atomic_store(&stop, 1);
	for (i = 0; i < readers; i++)
		pthread_join(th[i], NULL);
	printf("share-race: mode %s: %ld rounds in %.0f s with %d readers, nothing stale\n",
	       modes[mode], rounds, seconds, readers);
	return 0;
}
