// SPDX-License-Identifier: GPL-2.0
/*
 * tenant: what one sharer can try on another (the tenant cases, 110-114).
 *
 *   tenant [-u UID] pageout FILE   as UID (after setgid/setuid), map FILE
 *                                  read-only, touch every page, then
 *                                  MADV_COLD, MADV_PAGEOUT and
 *                                  fadvise(DONTNEED) it, and print
 *                                  "cold R pageout R dontneed R" (0 or errno)
 *   tenant [-u UID] read FILE OFF  as UID, pread one byte at OFF; prints it
 *   tenant soft FILE PAGE          map FILE, touch page PAGE, soft-offline
 *                                  it (MADV_SOFT_OFFLINE); prints "rc R
 *                                  before PFN after PFN" (R: 0 or errno)
 *   tenant hard FILE PAGE          the same with MADV_HWPOISON (a hard
 *                                  memory failure, injected): "after" is
 *                                  the PFN once the page is touched again
 *   tenant pvw [-P] FILE OFF STR   a child maps FILE read-write (MAP_SHARED,
 *                                  or MAP_PRIVATE with -P) and reads it; the
 *                                  parent writes STR at OFF into the
 *                                  child's mapping with process_vm_writev();
 *                                  the child msyncs and checks it reads STR
 *                                  back; prints "pvw R child C" (R: bytes
 *                                  written or -errno; C: child's status)
 *
 * Exit: 0 when the call ran (its result is printed), 1 on a setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_HWPOISON
#define MADV_HWPOISON 100
#endif
#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
#ifndef MADV_COLD
#define MADV_COLD 20
#endif
#ifndef MADV_PAGEOUT
#define MADV_PAGEOUT 21
#endif

static long psz;

static void die(const char *what)
{
	fprintf(stderr, "tenant: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void become(long uid)
{
	if (uid < 0)
		return;
	if (setgroups(0, NULL) || setgid(uid) || setuid(uid))
		die("setuid");
}

static uint64_t pfn_of(void *addr)
{
	uint64_t e;
	int pm = open("/proc/self/pagemap", O_RDONLY);

	if (pm < 0)
		die("open pagemap");
	if (pread(pm, &e, sizeof(e), ((uintptr_t)addr / psz) * sizeof(e)) != sizeof(e))
		die("read pagemap");
	close(pm);
	return (e >> 63) & 1 ? e & ((1ULL << 55) - 1) : 0;
}

static char *map_file(const char *path, int prot, int flags, size_t *len, int *fdp)
{
	struct stat st;
	char *p;
	int fd = open(path, (prot & PROT_WRITE) && (flags & MAP_SHARED) ? O_RDWR : O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		die(path);
	*len = st.st_size;
	p = mmap(NULL, *len, prot, flags, fd, 0);
	if (p == MAP_FAILED)
		die("mmap");
	if (fdp)
		*fdp = fd;
	else
		close(fd);
	return p;
}

static int pageout(const char *path)
{
	volatile char sink = 0;
	int cold, out, dn, fd;
	size_t len, i;
	char *p = map_file(path, PROT_READ, MAP_SHARED, &len, &fd);

	for (i = 0; i < len; i += psz)
		sink += p[i];
	cold = madvise(p, len, MADV_COLD) ? errno : 0;
	out = madvise(p, len, MADV_PAGEOUT) ? errno : 0;
	munmap(p, len);
	dn = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	printf("cold %d pageout %d dontneed %d\n", cold, out, dn);
	return 0;
}

static int readone(const char *path, off_t off)
{
	unsigned char c;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		die(path);
	if (pread(fd, &c, 1, off) != 1)
		die("pread");
	printf("%u\n", c);
	return 0;
}

static int offline(const char *path, unsigned long page, int advice)
{
	volatile char sink;
	uint64_t before, after;
	size_t len;
	char *p = map_file(path, PROT_READ, MAP_SHARED, &len, NULL);
	int rc;

	if ((page + 1) * psz > len)
		die("page beyond EOF");
	sink = p[page * psz];
	before = pfn_of(p + page * psz);
	rc = madvise(p + page * psz, psz, advice) ? errno : 0;
	sink = p[page * psz];
	(void)sink;
	after = pfn_of(p + page * psz);
	printf("rc %d before %" PRIu64 " after %" PRIu64 "\n", rc, before, after);
	return 0;
}

static int pvw(const char *path, off_t off, const char *str, int private)
{
	int go[2], done[2], status;
	size_t len, n = strlen(str);
	struct iovec l, r;
	char *p;
	uintptr_t addr;
	ssize_t w;
	pid_t pid;

	if (pipe(go) || pipe(done))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		volatile char sink = 0;
		size_t i;
		char c;

		p = map_file(path, PROT_READ | PROT_WRITE,
			     private ? MAP_PRIVATE : MAP_SHARED, &len, NULL);
		if (off + n > len)
			_exit(3);
		for (i = 0; i < len; i += psz)
			sink += p[i];	/* read faults: the shared pages */
		addr = (uintptr_t)p;
		if (write(go[1], &addr, sizeof(addr)) != sizeof(addr) ||
		    read(done[0], &c, 1) != 1)
			_exit(4);
		if (msync(p, len, MS_SYNC))
			_exit(5);
		_exit(memcmp(p + off, str, n) ? 2 : 0);
	}
	if (read(go[0], &addr, sizeof(addr)) != sizeof(addr))
		die("child");
	l.iov_base = (void *)str;
	l.iov_len = n;
	r.iov_base = (void *)(addr + off);
	r.iov_len = n;
	w = process_vm_writev(pid, &l, 1, &r, 1, 0);
	if (w < 0)
		w = -errno;
	if (write(done[1], "x", 1) != 1 || waitpid(pid, &status, 0) != pid)
		die("wait");
	printf("pvw %zd child %d\n", w, WIFEXITED(status) ? WEXITSTATUS(status) : 128);
	return 0;
}

int main(int argc, char **argv)
{
	long uid = -1;
	int opt, private = 0;

	psz = sysconf(_SC_PAGESIZE);
	while ((opt = getopt(argc, argv, "+u:")) != -1) {
		if (opt == 'u')
			uid = atol(optarg);
		else
			return 1;
	}
	argc -= optind;
	argv += optind;
	if (argc >= 2 && !strcmp(argv[0], "pageout")) {
		become(uid);
		return pageout(argv[1]);
	}
	if (argc >= 3 && !strcmp(argv[0], "read")) {
		become(uid);
		return readone(argv[1], atoll(argv[2]));
	}
	if (argc >= 3 && !strcmp(argv[0], "soft"))
		return offline(argv[1], strtoul(argv[2], NULL, 0), MADV_SOFT_OFFLINE);
	if (argc >= 3 && !strcmp(argv[0], "hard"))
		return offline(argv[1], strtoul(argv[2], NULL, 0), MADV_HWPOISON);
	if (argc >= 2 && !strcmp(argv[0], "pvw")) {
		if (!strcmp(argv[1], "-P")) {
			private = 1;
			argc--;
			argv++;
		}
		if (argc >= 4)
			return pvw(argv[1], atoll(argv[2]), argv[3], private);
	}
	fprintf(stderr, "usage: see tests/progs/tenant.c\n");
	return 1;
}
