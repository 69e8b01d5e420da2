// SPDX-License-Identifier: GPL-2.0
/*
 * mmap-race: a file's mapping must follow the file while its VMA is merged
 * and split, its page cache evicted and written, and another file maps the
 * same shared pages.  Stale PTEs (an alias removed from the page cache
 * while a PTE still maps its physical page) show as a mapping that stops
 * seeing the file's writes.
 *
 *   mapper of G     maps G (shares F's pages) and touches it in a loop, so
 *                   that the physical pages stay mapped
 *   merger of F     maps the first half of F, then in a loop maps the second
 *                   half right after it (the two VMAs merge), checks every
 *                   page against pread(), and unmaps it (they split)
 *   writer of F     writes an increasing counter into a random page of F
 *                   and now and then fadvise(DONTNEED)s all of F
 *
 * The check: the counter a mapping shows is never older than what pread()
 * returned before that mapping read it.
 *
 * F must start with zeros at the start of every page (the counters only
 * grow from 0), and G share its extents (a reflink).
 *
 * Usage: mmap-race F G SECONDS      Exit: 0 fine, 1 stale, 2 setup error.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PG 4096

static size_t pages;

static void mapper(const char *g)
{
	int fd = open(g, O_RDONLY);
	volatile unsigned char *p;
	unsigned long sink = 0;

	if (fd < 0)
		exit(2);
	p = mmap(NULL, pages * PG, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		exit(2);
	for (;;)
		for (size_t i = 0; i < pages; i++)
			sink += p[i * PG];
}

static void writer(const char *f)
{
	int fd = open(f, O_WRONLY);
	uint64_t n = 1;

	if (fd < 0)
		exit(2);
	srand(getpid());
	for (;; n++) {
		size_t i = rand() % pages;

		if (pwrite(fd, &n, 8, i * PG) != 8)
			exit(2);
		if (!(n % 64))
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
}

static int merger(const char *f, int secs)
{
	int fd = open(f, O_RDONLY);
	size_t half = pages / 2, rounds = 0;
	time_t end = time(NULL) + secs;
	volatile uint64_t *base;

	if (fd < 0)
		return 2;
	/* reserve the whole range, then map the first half in it */
	base = mmap(NULL, pages * PG, PROT_READ, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return 2;
	munmap((char *)base + half * PG, (pages - half) * PG);
	while (time(NULL) < end) {
		char *second = mmap((char *)base + half * PG, (pages - half) * PG,
				    PROT_READ, MAP_SHARED | MAP_FIXED, fd, half * PG);

		if (second == MAP_FAILED)
			return 2;
		for (size_t i = 0; i < pages; i++) {
			uint64_t before, seen;

			if (pread(fd, &before, 8, i * PG) != 8)
				return 2;
			seen = base[i * PG / 8];
			if (seen < before) {
				printf("mmap-race: page %zu: the mapping shows %" PRIu64
				       ", the file had %" PRIu64 " before (round %zu)\n",
				       i, seen, before, rounds);
				return 1;
			}
		}
		munmap(second, (pages - half) * PG);
		rounds++;
	}
	printf("mmap-race: %zu rounds of merge, check and split in %d s, nothing stale\n",
	       rounds, secs);
	return 0;
}

int main(int argc, char **argv)
{
	struct stat st;
	pid_t m, w;
	int rc;

	if (argc != 4 || stat(argv[1], &st))
		return fprintf(stderr, "usage: mmap-race F G SECONDS\n"), 2;
	pages = st.st_size / PG;
	if (pages < 4)
		return fprintf(stderr, "mmap-race: F too small\n"), 2;
	m = fork();
	if (!m)
		mapper(argv[2]);
	w = fork();
	if (!w)
		writer(argv[1]);
	rc = merger(argv[1], atoi(argv[3]));
	kill(m, SIGKILL);
	kill(w, SIGKILL);
	waitpid(m, NULL, 0);
	waitpid(w, NULL, 0);
	return rc;
}
