// SPDX-License-Identifier: GPL-2.0
/*
 * faults: page-fault and zap microbenchmarks.
 *
 *   faults MIB ROUNDS        anonymous memory: the cost of page_to_pfn()
 *                            (every PTE install and zap resolves a page to
 *                            a PFN); prints the best ns per page (fault +
 *                            unmap) of ROUNDS.
 *   faults -f FILE ROUNDS    map FILE read-only (MAP_SHARED), read a byte
 *                            of every page, unmap; prints "FIRST BEST": ns
 *                            per page of the first pass, and of the best
 *                            round of 10 passes.  With FILE in the page
 *                            cache these are minor faults (fault-around maps
 *                            16 pages at a time).
 *
 * The guests' clock may tick at 4 ms (HZ=250, no TSC clocksource under
 * TCG), so a timed stretch is kept to hundreds of milliseconds.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1e9 + (t1.tv_nsec - t0->tv_nsec);
}

static int file_faults(const char *path, int rounds)
{
	double first = 0, best = 1e30;
	volatile unsigned char sink = 0;
	struct timespec t0;
	struct stat st;
	size_t pages, i;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		return perror(path), 1;
	pages = st.st_size / 4096;
	for (int r = 0; r <= rounds; r++) {
		int passes = r ? 10 : 1;
		double ns;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int k = 0; k < passes; k++) {
			unsigned char *p = mmap(NULL, pages * 4096, PROT_READ,
						MAP_SHARED, fd, 0);

			if (p == MAP_FAILED)
				return perror("mmap"), 1;
			for (i = 0; i < pages; i++)
				sink += p[i * 4096];
			munmap(p, pages * 4096);
		}
		ns = since(&t0) / pages / passes;
		if (!r)
			first = ns;
		else if (ns < best)
			best = ns;
	}
	printf("%.1f %.1f\n", first, best);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "-f"))
		return file_faults(argv[2], atoi(argv[3]));

	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	size_t len = mib << 20, pages = len / 4096, i;
	struct timespec t0, t1;
	double best = 1e30;

	for (int r = 0; r < rounds; r++) {
		char *p;
		double ns;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return perror("mmap"), 1;
		for (i = 0; i < pages; i++)
			p[i * 4096] = (char)i;
		munmap(p, len);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / pages;
		if (ns < best)
			best = ns;
	}
	printf("%.1f\n", best);
	return 0;
}
