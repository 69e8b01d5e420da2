// SPDX-License-Identifier: GPL-2.0
/*
 * movepages: move_pages(2) every present page of another process's
 * mappings of a file to one NUMA node, as numactl --move-pages or a
 * NUMA daemon would, with MPOL_MF_MOVE_ALL (root): a page that several
 * processes map moves too.
 *
 * Usage: movepages PID MATCH NODE
 *   Every mapping of PID whose path in /proc/PID/maps contains MATCH.
 *   Prints "movepages: N pages, M now on node NODE, E errors (first:
 *   page I: ERRNO)".
 * Exit: 0 every page on NODE afterwards, 1 some not, 2 usage or setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_MF_MOVE_ALL (1 << 2)

int main(int argc, char **argv)
{
	unsigned long lo, hi, a, psz = sysconf(_SC_PAGESIZE);
	size_t n = 0, cap = 0, i, on = 0, err = 0, first_bad = 0;
	int pid, node, *nodes, *status, first_errno = 0;
	void **pages = NULL;
	char path[64], line[4096];
	FILE *maps;

	if (argc != 4) {
		fprintf(stderr, "usage: movepages PID MATCH NODE\n");
		return 2;
	}
	pid = atoi(argv[1]);
	node = atoi(argv[3]);
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	maps = fopen(path, "r");
	if (!maps) {
		fprintf(stderr, "movepages: %s: %s\n", path, strerror(errno));
		return 2;
	}
	while (fgets(line, sizeof(line), maps)) {
		if (!strstr(line, argv[2]) || sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		for (a = lo; a < hi; a += psz) {
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				pages = realloc(pages, cap * sizeof(*pages));
				if (!pages)
					return 2;
			}
			pages[n++] = (void *)a;
		}
	}
	fclose(maps);
	if (!n) {
		fprintf(stderr, "movepages: no mapping of %s in process %d\n", argv[2], pid);
		return 2;
	}
	nodes = malloc(n * sizeof(*nodes));
	status = malloc(n * sizeof(*status));
	if (!nodes || !status)
		return 2;
	for (i = 0; i < n; i++)
		nodes[i] = node;
	if (syscall(SYS_move_pages, pid, n, pages, nodes, status, MPOL_MF_MOVE_ALL) < 0) {
		fprintf(stderr, "movepages: move_pages: %s\n", strerror(errno));
		return 2;
	}
	/* Where each page is now. */
	if (syscall(SYS_move_pages, pid, n, pages, NULL, status, 0) < 0) {
		fprintf(stderr, "movepages: move_pages (query): %s\n", strerror(errno));
		return 2;
	}
	for (i = 0; i < n; i++) {
		if (status[i] == node) {
			on++;
		} else if (!err++) {
			first_bad = i;
			first_errno = status[i];
		}
	}
	printf("movepages: %zu pages, %zu now on node %d, %zu errors", n, on, node, err);
	if (err)
		printf(" (first: page %zu: %s)", first_bad,
		       first_errno < 0 ? strerror(-first_errno) : "on another node");
	printf("\n");
	return on == n ? 0 : 1;
}
