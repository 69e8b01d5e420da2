// SPDX-License-Identifier: GPL-2.0
/*
 * zc-recv: TCP_ZEROCOPY_RECEIVE of file pages that were sendfile()d while
 * they were shared-folio aliases, and detached before the receive.
 *
 * Reading a file whose extents are shared installs aliases in its page
 * cache.  sendfile() to a loopback TCP socket puts the alias pages into
 * the skb's frags; a pwrite() into each page then replaces the alias by a
 * private copy and detaches it (alias->mapping = NULL) while the skb still
 * holds it.  TCP_ZEROCOPY_RECEIVE maps frag pages without a ->mapping into
 * the receiver's mmap of the socket: a detached alias must be refused (the
 * receive then copies) and never mapped.  Before that was refused, munmap
 * of the receive mapping printed "BUG: Bad page map".
 *
 * Steps:
 *  1. read() the whole file once (installs the aliases); keep its first
 *     16 pages;
 *  2. a loopback TCP pair; a control exchange first: 16 pipe pages
 *     spliced to the socket and received with TCP_ZEROCOPY_RECEIVE must
 *     get mapped, else this kernel or program cannot test anything;
 *  3. sendfile() of the first 16 pages (page-aligned, whole pages: only
 *     a whole page at frag offset 0 can be mapped);
 *  4. pwrite() of one changed byte into each of the 16 pages, fsync; the
 *     file must read back as written;
 *  5. TCP_ZEROCOPY_RECEIVE into a 16-page PROT_READ MAP_SHARED mmap of the
 *     receiving socket, what cannot be mapped copied through copybuf (or,
 *     last, recv()); every byte must equal the file as sent (step 1);
 *     munmap.
 *
 * With two CPUs or more in its affinity mask, steps 2-4 run on the first
 * and step 5 on the second: the receive then frees the skbs, which hold
 * the file's (physical) pages, through the first CPU's deferred-free list
 * (skb_attempt_defer_free()), which only NET_RX there empties; case 027
 * checks that the pages are freed once it has.
 *
 * usage: zc-recv FILE      (FILE: at least 16 pages, written to)
 * Prints "zc-recv: mapped N bytes, copied M bytes, received R bytes,
 * mismatches X" for the file pages (step 5).
 * exit: 0 all received and equal, 1 short or different, 2 usage or setup
 * error (message names the call).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NPAGES 16
#define WAIT_SECONDS 10

static size_t pg, len;		/* page size, NPAGES pages */
static int zc_works;		/* the control exchange mapped pages */

struct result {
	size_t mapped, copied, recvd, received, mismatches;
};

static void die(const char *what)
{
	fprintf(stderr, "zc-recv: %s: %s\n", what, strerror(errno));
	exit(2);
}

/*
 * Run on the @nth CPU (0 or 1) of the affinity mask we started with, if it
 * has two or more; else stay where we are.
 */
static void run_on(int nth)
{
	static cpu_set_t start;
	static int have;
	cpu_set_t set;
	int cpu, seen = 0;

	if (!have) {
		if (sched_getaffinity(0, sizeof(start), &start))
			die("sched_getaffinity");
		have = 1;
	}
	if (CPU_COUNT(&start) < 2)
		return;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &start) || seen++ != nth)
			continue;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			die("sched_setaffinity");
		return;
	}
}

static double now(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		die("clock_gettime");
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void setint(int fd, int level, int opt, int v, const char *name)
{
	if (setsockopt(fd, level, opt, &v, sizeof(v)))
		die(name);
}

/* A connected loopback pair: *tx sends, *rx receives. */
static void tcp_pair(int *tx, int *rx)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int l, big = 4 << 20;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		die("socket (listener)");
	/* before listen(): accepted sockets inherit it, window scale follows */
	setint(l, SOL_SOCKET, SO_RCVBUF, big, "setsockopt(SO_RCVBUF)");
	setint(l, SOL_SOCKET, SO_SNDBUF, big, "setsockopt(SO_SNDBUF) (listener)");
	if (bind(l, (struct sockaddr *)&a, sizeof(a)))
		die("bind 127.0.0.1:0");
	if (listen(l, 1))
		die("listen");
	if (getsockname(l, (struct sockaddr *)&a, &alen))
		die("getsockname");
	*tx = socket(AF_INET, SOCK_STREAM, 0);
	if (*tx < 0)
		die("socket (sender)");
	setint(*tx, SOL_SOCKET, SO_SNDBUF, big, "setsockopt(SO_SNDBUF)");
	setint(*tx, SOL_SOCKET, SO_RCVBUF, big, "setsockopt(SO_RCVBUF) (sender)");
	/* nothing held back for coalescing: everything queued at once */
	setint(*tx, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
	if (connect(*tx, (struct sockaddr *)&a, sizeof(a)))
		die("connect to the loopback listener (is lo up?)");
	*rx = accept(l, NULL, NULL);
	if (*rx < 0)
		die("accept");
	close(l);
}

/*
 * Wait until @want bytes are queued on @rx (bounded): all of them must be
 * there before the zerocopy receive so that its inq is exactly what is left.
 */
static int wait_queued(int rx, int want, const char *what)
{
	double end = now() + WAIT_SECONDS;
	struct pollfd p = { .fd = rx, .events = POLLIN };
	int q;

	for (;;) {
		if (ioctl(rx, FIONREAD, &q))
			die("ioctl(FIONREAD)");
		if (q >= want)
			return 0;
		if (now() > end) {
			printf("zc-recv: %s: only %d of %d bytes queued after %d s\n",
			       what, q, want, WAIT_SECONDS);
			return -1;
		}
		if (q == 0) {
			if (poll(&p, 1, 100) < 0 && errno != EINTR)
				die("poll");
		} else {
			/* poll() would return at once: the rest is on its way */
			usleep(1000);
		}
	}
}

/*
 * Receive len bytes on @rx with TCP_ZEROCOPY_RECEIVE into a fresh mapping
 * of the socket, compare them with @want, unmap.  The mapping address
 * advances by what each call mapped; what it could not map comes through
 * copybuf, or, when a call gives nothing at all, through recv().
 */
static void zc_receive(int rx, const unsigned char *want, struct result *r,
		       const char *what)
{
	static unsigned char *got, *copybuf;
	double end = now() + WAIT_SECONDS;
	size_t mapoff = 0, i;
	char *map;

	memset(r, 0, sizeof(*r));
	if (!got) {
		got = malloc(len);
		copybuf = malloc(len);
		if (!got || !copybuf)
			die("malloc");
	}
	memset(got, 0, len);
	if (wait_queued(rx, len, what))
		goto compare;
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, rx, 0);
	if (map == MAP_FAILED)
		die("mmap of the receiving socket");

	while (r->received < len) {
		size_t rem = len - r->received;
		struct tcp_zerocopy_receive zc;
		socklen_t zlen = sizeof(zc);
		ssize_t n;

		memset(&zc, 0, sizeof(zc));
		zc.address = (unsigned long)(map + mapoff);
		zc.length = len - mapoff;
		zc.copybuf_address = (unsigned long)copybuf;
		/*
		 * With inq <= copybuf_len the kernel copies everything and maps
		 * nothing (receive_fallback_to_copy()).  Keep copybuf_len below
		 * what is queued so that it maps what it can and copies only
		 * the rest; under a page nothing can be mapped: copy it all.
		 */
		zc.copybuf_len = rem >= pg ? rem - 1 : rem;
		if (getsockopt(rx, IPPROTO_TCP, TCP_ZEROCOPY_RECEIVE, &zc, &zlen)) {
			/*
			 * vm_insert_pages() refusing a page, with nothing mapped
			 * or copied before it in the call, comes back as EINVAL.
			 * Once the control showed that this program's calls are
			 * right, read the rest as copies, like an application.
			 */
			if (errno != EINVAL || !zc_works)
				die("getsockopt(TCP_ZEROCOPY_RECEIVE)");
			printf("zc-recv: %s: getsockopt(TCP_ZEROCOPY_RECEIVE): %s after %zu bytes;"
			       " the rest by recv()\n", what, strerror(errno), r->received);
			zc.length = 0;
			zc.copybuf_len = 0;
		} else {
			if (zc.err) {
				errno = zc.err < 0 ? -zc.err : zc.err;
				die("TCP_ZEROCOPY_RECEIVE: socket error");
			}
			if (zc.copybuf_len < 0) {
				errno = -zc.copybuf_len;
				die("TCP_ZEROCOPY_RECEIVE: copy to copybuf");
			}
			if (zc.length > rem || (size_t)zc.copybuf_len > rem - zc.length) {
				errno = EOVERFLOW;
				fprintf(stderr, "zc-recv: %s: TCP_ZEROCOPY_RECEIVE gave %u mapped +"
					" %d copied bytes with %zu left\n", what, zc.length,
					zc.copybuf_len, rem);
				exit(2);
			}
		}
		if (zc.length) {
			/* read through the new mapping: what the user sees */
			memcpy(got + r->received, map + mapoff, zc.length);
			mapoff += zc.length;
			r->mapped += zc.length;
			r->received += zc.length;
		}
		if (zc.copybuf_len > 0) {
			memcpy(got + r->received, copybuf, zc.copybuf_len);
			r->copied += zc.copybuf_len;
			r->received += zc.copybuf_len;
		}
		if (zc.length || zc.copybuf_len > 0)
			continue;
		/* nothing mapped nor copied: the last resort */
		n = recv(rx, got + r->received, rem, MSG_DONTWAIT);
		if (n > 0) {
			r->recvd += n;
			r->copied += n;
			r->received += n;
			continue;
		}
		if (n == 0) {
			printf("zc-recv: %s: end of stream after %zu bytes\n", what, r->received);
			break;
		}
		if (errno != EAGAIN && errno != EINTR)
			die("recv");
		if (now() > end) {
			printf("zc-recv: %s: no progress for %d s at %zu bytes\n",
			       what, WAIT_SECONDS, r->received);
			break;
		}
		usleep(1000);
	}
	if (munmap(map, len))
		die("munmap of the receive mapping");
compare:
	for (i = 0; i < r->received; i++) {
		if (got[i] == want[i])
			continue;
		if (!r->mismatches)
			printf("zc-recv: %s: first mismatch at byte %zu (page %zu): %#x, sent %#x\n",
			       what, i, i / pg, got[i], want[i]);
		r->mismatches++;
	}
	if (r->recvd)
		printf("zc-recv: %s: %zu of the copied bytes came by plain recv()\n",
		       what, r->recvd);
}

/*
 * Control: pages written to a pipe (whole pages, no ->mapping) and spliced
 * to the socket are what TCP_ZEROCOPY_RECEIVE maps.  If it maps none of
 * them, "mapped 0" on the file pages would prove nothing.
 */
static void control(int tx, int rx)
{
	unsigned char *buf = malloc(len);
	struct result r;
	int p[2];
	size_t i, done;

	if (!buf)
		die("malloc");
	for (i = 0; i < len; i++)
		buf[i] = (unsigned char)(i * 7 + i / pg + 1);
	if (pipe(p))
		die("pipe");
	if (fcntl(p[1], F_SETPIPE_SZ, (int)len) < 0)
		die("fcntl(F_SETPIPE_SZ)");
	for (i = 0; i < NPAGES; i++)	/* one page per pipe buffer */
		if (write(p[1], buf + i * pg, pg) != (ssize_t)pg)
			die("write to the pipe");
	for (done = 0; done < len; ) {
		ssize_t n = splice(p[0], NULL, tx, NULL, len - done, 0);

		if (n <= 0) {
			if (!n)
				errno = EPIPE;
			die("splice from the pipe to the socket");
		}
		done += n;
	}
	close(p[0]);
	close(p[1]);
	zc_receive(rx, buf, &r, "control");
	printf("zc-recv: control (pipe pages): mapped %zu bytes, copied %zu bytes,"
	       " received %zu bytes, mismatches %zu\n",
	       r.mapped, r.copied, r.received, r.mismatches);
	if (r.received != len || r.mismatches) {
		fprintf(stderr, "zc-recv: the control exchange went wrong\n");
		exit(2);
	}
	if (!r.mapped) {
		fprintf(stderr, "zc-recv: TCP_ZEROCOPY_RECEIVE mapped none of the pipe pages:"
			" this kernel or program cannot test mapping file pages\n");
		exit(2);
	}
	zc_works = 1;
	free(buf);
}

int main(int argc, char **argv)
{
	unsigned char *orig, *buf, *back;
	size_t chunk = 1 << 20, total = 0, k, bad = 0;
	int fd, tx, rx, status;
	struct result r;
	off_t off;
	ssize_t n;

	if (argc != 2) {
		fprintf(stderr, "usage: zc-recv FILE   (at least 16 pages; it is written to)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);	/* in order with stderr */
	pg = sysconf(_SC_PAGESIZE);
	len = NPAGES * pg;
	orig = malloc(len);
	back = malloc(len);
	buf = malloc(chunk);
	if (!orig || !back || !buf)
		die("malloc");
	fd = open(argv[1], O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "zc-recv: open %s: %s\n", argv[1], strerror(errno));
		return 2;
	}

	/* 1. read it all: installs the aliases */
	while ((n = read(fd, buf, chunk)) > 0) {
		if (total < len)
			memcpy(orig + total, buf, (size_t)n < len - total ? (size_t)n : len - total);
		total += n;
	}
	if (n < 0)
		die("read");
	if (total < len) {
		fprintf(stderr, "zc-recv: %s: %zu bytes, needs at least %zu\n", argv[1], total, len);
		return 2;
	}

	/* 2. the pair, and a control exchange */
	run_on(0);
	tcp_pair(&tx, &rx);
	control(tx, rx);

	/* 3. the first 16 pages to the socket: page-aligned whole pages */
	for (off = 0; (size_t)off < len; ) {
		n = sendfile(tx, fd, &off, len - off);
		if (n <= 0) {
			if (!n)
				errno = ENODATA;
			die("sendfile");
		}
	}

	/* 4. a changed byte in each page: detaches the aliases the skb holds */
	for (k = 0; k < NPAGES; k++) {
		unsigned char b = orig[k * pg] ^ 0xff;

		if (pwrite(fd, &b, 1, k * pg) != 1)
			die("pwrite");
	}
	if (fsync(fd))
		die("fsync");
	n = pread(fd, back, len, 0);
	if (n != (ssize_t)len) {
		if (n >= 0)
			errno = ENODATA;
		die("pread after the pwrites");
	}
	for (k = 0; k < len; k++)
		if (back[k] != (k % pg ? orig[k] : (unsigned char)(orig[k] ^ 0xff)))
			bad++;
	if (bad)
		printf("zc-recv: the file reads wrong after the pwrites: %zu bytes differ\n", bad);

	/* 5. receive, compare with what was sent, munmap */
	run_on(1);
	zc_receive(rx, orig, &r, "file pages");
	printf("zc-recv: mapped %zu bytes, copied %zu bytes, received %zu bytes, mismatches %zu\n",
	       r.mapped, r.copied, r.received, r.mismatches);
	status = r.received == len && !r.mismatches && !bad ? 0 : 1;
	if (close(rx) || close(tx) || close(fd))
		die("close");
	return status;
}
