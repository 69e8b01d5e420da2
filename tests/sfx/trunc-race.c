// SPDX-License-Identifier: GPL-2.0
/*
 * trunc-race: reads of a shared file racing truncate.
 *
 * A file is a reflink of a source full of non-zero bytes.  Reader threads
 * drop the file's page cache and read it again, over and over, so that
 * shared-folio aliases are installed all the time.  The main thread
 * truncates the file to 0 and extends it back to its size, which must
 * leave a hole: every byte read afterwards must be zero.  Page cache left
 * beyond EOF by a read that raced the truncate would show the old data
 * here.  Then the source is rewritten (a new extent, so that readers wait
 * for disk reads of it, which widens the windows) and cloned again, and
 * the next round starts.
 *
 * usage: trunc-race [-t SECONDS] [-r READERS] [-l BYTES] DIR
 * exit: 0 no stale byte seen, 1 stale data (round and offset printed),
 * 2 error.  Prints the number of rounds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
	fprintf(stderr, "trunc-race: %s: %s\n", what, strerror(errno));
	exit(2);
}

static void *reader(void *arg)
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

int main(int argc, char **argv)
{
	double seconds = 20;
	int readers = 2, c, sfd, i;
	char path[4096], *buf;
	pthread_t th[16];
	long rounds = 0;
	time_t end;

	while ((c = getopt(argc, argv, "t:r:l:")) != -1) {
		switch (c) {
		case 't': seconds = atof(optarg); break;
		case 'r': readers = atoi(optarg); break;
		case 'l': len = strtoul(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || readers < 1 || readers > 16 || !len || len % 4096) {
usage:
		fprintf(stderr, "usage: trunc-race [-t SECONDS] [-r READERS 1-16] [-l BYTES, pages] DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/src", argv[optind]);
	sfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (sfd < 0)
		die(path);
	buf = malloc(len);
	if (!buf)
		die("malloc");
	memset(buf, 0xa5, len);
	if (pwrite(sfd, buf, len, 0) != (ssize_t)len || fsync(sfd))
		die("write src");
	snprintf(path, sizeof(path), "%s/dst", argv[optind]);
	dfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (dfd < 0)
		die(path);
	if (ioctl(dfd, FICLONE, sfd))
		die("FICLONE");
	for (i = 0; i < readers; i++)
		if (pthread_create(&th[i], NULL, reader, NULL))
			die("pthread_create");
	end = time(NULL) + (time_t)seconds;
	while (time(NULL) < end) {
		ssize_t n;
		size_t off;

		rounds++;
		if (ftruncate(dfd, 0) || ftruncate(dfd, len))
			die("ftruncate");
		n = pread(dfd, buf, len, 0);
		if (n != (ssize_t)len)
			die("pread after truncate");
		for (off = 0; off < len && !buf[off]; off++)
			;
		if (off < len) {
			atomic_store(&stop, 1);
			printf("trunc-race: STALE DATA in round %ld: byte %zu (page %zu) of a hole"
			       " reads %#x after truncate to 0 and back to %zu\n",
			       rounds, off, off / 4096, (unsigned char)buf[off], len);
			return 1;
		}
		memset(buf, 1 + rounds % 255, len);
		if (pwrite(sfd, buf, len, 0) != (ssize_t)len || fsync(sfd))
			die("rewrite src");
		if (ioctl(dfd, FICLONE, sfd))
			die("FICLONE");
	}
	atomic_store(&stop, 1);
	for (i = 0; i < readers; i++)
		pthread_join(th[i], NULL);
	printf("trunc-race: %ld rounds in %.0f s with %d readers, no stale byte\n",
	       rounds, seconds, readers);
	return 0;
}
