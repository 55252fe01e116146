// delay_line.c: a point-to-point IP link between two network namespaces
// that holds every packet for a fixed one-way delay, for bench_link.sh on a
// kernel without netem (docs/SCALING.md). Root only.
//
//   delay_line NS_A DEV_A NS_B DEV_B DELAY_US
//
// Creates a TUN device DEV_A inside network namespace NS_A and DEV_B inside
// NS_B (setns into /var/run/netns/NAME, then /dev/net/tun), prints "ready"
// on stdout, then forwards every IP packet the stack of A sends out of DEV_A
// into B's DEV_B (as if received there), and B's back into A, each DELAY_US
// microseconds after it was read. The script gives the devices addresses and
// shapes their egress with tbf, which the kernel runs before a packet
// reaches this program: rate in the kernel, delay here.
//
// Each direction is a FIFO of packets with their due times (the delay is the
// same for all, so due times come in order): read whatever is ready on both
// devices, write whatever is due, sleep in ppoll until the next due time or
// the next packet. Timer slack is set to 1 ns so that the sleep ends when
// asked; run it at a real-time priority (chrt) so it is not queued behind
// the ranks, which spin while they wait. It runs until SIGTERM or SIGINT,
// then prints what it forwarded on stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

enum { SLOTS = 1024, MAX_PACKET = 65536 };

typedef struct {
    unsigned char *data;   // SLOTS x MAX_PACKET
    int len[SLOTS];
    int64_t due[SLOTS];    // ns, CLOCK_MONOTONIC
    int head, count;       // oldest slot, packets held
    long forwarded, dropped;
    long long bytes;
} Fifo;

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "delay_line: %s: %s\n", what, strerror(errno));
    exit(1);
}

// A TUN device named dev inside namespace ns, non-blocking, raw IP packets (no header).
static int tun_in(const char *ns, const char *dev) {
    char path[256], what[320];
    snprintf(path, sizeof path, "/var/run/netns/%s", ns);
    int nsfd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(what, sizeof what, "namespace %s", path);
    if (nsfd < 0) die(what);
    if (setns(nsfd, CLONE_NEWNET) != 0) die(what);
    close(nsfd);
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) die("/dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    if (strlen(dev) >= IFNAMSIZ) { errno = ENAMETOOLONG; die(dev); }
    memcpy(ifr.ifr_name, dev, strlen(dev) + 1);
    snprintf(what, sizeof what, "TUNSETIFF %s in %s", dev, ns);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) die(what);
    return fd;
}

// Reads every packet ready on fd into f, due delay_ns from now. A full FIFO drops the packet.
static void take(int fd, Fifo *f, int64_t delay_ns) {
    for (;;) {
        unsigned char scratch[1];
        int slot = (f->head + f->count) % SLOTS;
        unsigned char *buf = f->count < SLOTS ? f->data + (size_t)slot * MAX_PACKET : scratch;
        ssize_t n = read(fd, buf, f->count < SLOTS ? MAX_PACKET : sizeof scratch);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) return;
            die("read");
        }
        if (f->count == SLOTS) { f->dropped++; continue; }
        f->len[slot] = (int)n;
        f->due[slot] = now_ns() + delay_ns;
        f->count++;
    }
}

// Writes to fd every packet of f that is due; returns the next due time (INT64_MAX: none held).
static int64_t give(int fd, Fifo *f) {
    int64_t t = now_ns();
    while (f->count > 0 && f->due[f->head] <= t) {
        ssize_t n = write(fd, f->data + (size_t)f->head * MAX_PACKET, f->len[f->head]);
        if (n < 0 && errno != EAGAIN && errno != EINTR && errno != EIO) die("write");
        if (n < 0) f->dropped++;
        else { f->forwarded++; f->bytes += n; }
        f->head = (f->head + 1) % SLOTS;
        f->count--;
    }
    return f->count > 0 ? f->due[f->head] : INT64_MAX;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: delay_line NS_A DEV_A NS_B DEV_B DELAY_US\n");
        return 2;
    }
    char *end;
    double delay_us = strtod(argv[5], &end);
    if (*end || !(delay_us >= 0 && delay_us <= 1e6)) {
        fprintf(stderr, "delay_line: DELAY_US '%s' is not a number of microseconds in 0..1e6\n", argv[5]);
        return 2;
    }
    int64_t delay_ns = (int64_t)(delay_us * 1000 + 0.5);
    int fd[2] = {tun_in(argv[1], argv[2]), tun_in(argv[3], argv[4])};
    Fifo fifo[2];   // [0]: A -> B, [1]: B -> A
    for (int i = 0; i < 2; i++) {
        memset(&fifo[i], 0, sizeof fifo[i]);
        fifo[i].data = malloc((size_t)SLOTS * MAX_PACKET);
        if (!fifo[i].data) die("malloc");
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    printf("ready\n");
    fflush(stdout);
    while (!stop) {
        take(fd[0], &fifo[0], delay_ns);
        take(fd[1], &fifo[1], delay_ns);
        int64_t next = give(fd[1], &fifo[0]), next_b = give(fd[0], &fifo[1]);
        if (next_b < next) next = next_b;
        struct pollfd p[2] = {{.fd = fd[0], .events = POLLIN}, {.fd = fd[1], .events = POLLIN}};
        struct timespec ts, *timeout = NULL;
        if (next != INT64_MAX) {
            int64_t wait = next - now_ns();
            if (wait < 0) wait = 0;
            ts.tv_sec = wait / 1000000000;
            ts.tv_nsec = wait % 1000000000;
            timeout = &ts;
        }
        if (ppoll(p, 2, timeout, NULL) < 0 && errno != EINTR) die("ppoll");
    }
    fprintf(stderr, "delay_line: A->B %ld packets (%lld bytes), %ld dropped; B->A %ld packets (%lld bytes), %ld dropped\n",
            fifo[0].forwarded, fifo[0].bytes, fifo[0].dropped, fifo[1].forwarded, fifo[1].bytes, fifo[1].dropped);
    return 0;
}
