// SPDX-License-Identifier: GPL-2.0
/*
 * randread: pread(2) pages of a file at pseudo-random page offsets, as a
 * database or a key-value store with a working set larger than its memory
 * would: the same sequence for the same seed on every kernel.
 *
 * Usage: randread FILE COUNT SEED [random]
 *   COUNT reads of 4 KiB each, page-aligned, from a xorshift sequence
 *   seeded with SEED.  Prints "randread: COUNT reads, checksum X".
 *   "random": posix_fadvise(POSIX_FADV_RANDOM) first, so that a miss reads
 *   only its page (no read-around from the cached pages before it).
 * Exit: 0 done, 1 a read failed or came short, 2 usage.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	unsigned long count, i, pages;
	uint64_t x, sum = 0;
	char buf[4096];
	struct stat st;
	int fd;

	if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "random"))) {
		fprintf(stderr, "usage: randread FILE COUNT SEED [random]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[1]);
		return 2;
	}
	if (argc == 5 && posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM)) {
		fprintf(stderr, "randread: posix_fadvise failed\n");
		return 2;
	}
	pages = st.st_size / sizeof(buf);
	count = strtoul(argv[2], NULL, 0);
	x = strtoull(argv[3], NULL, 0) * 0x9e3779b97f4a7c15ULL + 1;
	if (!x)		/* xorshift stays at 0 */
		x = 1;
	if (!pages) {
		fprintf(stderr, "randread: %s is smaller than a page\n", argv[1]);
		return 2;
	}
	for (i = 0; i < count; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (pread(fd, buf, sizeof(buf), (off_t)(x % pages) * sizeof(buf)) !=
		    sizeof(buf)) {
			perror("randread: pread");
			return 1;
		}
		sum += buf[0] + buf[4095];
	}
	printf("randread: %lu reads, checksum %llu\n", count, (unsigned long long)sum);
	return 0;
}
