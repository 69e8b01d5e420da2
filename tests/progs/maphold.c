// SPDX-License-Identifier: GPL-2.0
/*
 * maphold: map FILE read-only (MAP_SHARED), read one byte of every page,
 * create READY, then wait for SIGTERM with the mapping kept.  For the
 * memory benchmark: the pages stay mapped while meminfo is read.
 *
 *   maphold FILE READY       exit 0 on SIGTERM, 1 on error
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t done;

static void on_term(int sig)
{
	(void)sig;
	done = 1;
}

int main(int argc, char **argv)
{
	volatile unsigned char sink = 0;
	struct stat st;
	unsigned char *p;
	long pg = sysconf(_SC_PAGESIZE);
	off_t off;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: maphold FILE READY\n");
		return 1;
	}
	signal(SIGTERM, on_term);
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0) {
		perror(argv[1]);
		return 1;
	}
	p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (off = 0; off < st.st_size; off += pg)
		sink += p[off];
	fd = open(argv[2], O_WRONLY | O_CREAT, 0644);
	if (fd < 0) {
		perror(argv[2]);
		return 1;
	}
	close(fd);
	while (!done)
		pause();
	return 0;
}
