// SPDX-License-Identifier: GPL-2.0
/*
 * faults: anonymous page-fault and zap microbenchmark, to measure the cost
 * of page_to_pfn() (every PTE install and zap resolves a page to a PFN).
 * Usage: faults MIB ROUNDS ; prints ns per page (fault + unmap).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv)
{
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
