/* What one fork costs a process that listens on a TCP socket: fork, the child's _exit (or,
 * with "touch", a socket() and close() first: a child that uses the runtime), and the
 * parent's waitpid, N times. Run by bench/fork_cost.py plain, with libpronghorn.so preloaded
 * and under `pronghorn run` (the NIC open), so the differences are pronghorn's.
 *   fork_cost ADDR PORT N [touch]    prints "us_per_fork <float>"                            */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: fork_cost ADDR PORT N [touch]\n");
        return 2;
    }
    int n = atoi(argv[3]);
    int touch = argc > 4 && strcmp(argv[4], "touch") == 0;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(atoi(argv[2]));
    if (s < 0 || inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || bind(s, (void *)&a, sizeof a) || listen(s, 16)) {
        perror("fork_cost: socket/bind/listen");
        return 1;
    }
    /* A non-blocking accept that finds nobody: the first call that waits on the socket, which
     * opens the NIC under pronghorn where listen() alone does not (runtime.share off). */
    int flags = fcntl(s, F_GETFL);
    fcntl(s, F_SETFL, flags | O_NONBLOCK);
    if (accept(s, NULL, NULL) >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        perror("fork_cost: accept (expected EAGAIN)");
        return 1;
    }
    double t0 = now();
    for (int i = 0; i < n; i++) {
        pid_t p = fork();
        if (p < 0) {
            perror("fork_cost: fork");
            return 1;
        }
        if (p == 0) {
            if (touch) {
                int c = socket(AF_INET, SOCK_STREAM, 0);
                close(c);
            }
            _exit(0);
        }
        int st;
        if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "fork_cost: child %d ended with status %#x\n", p, st);
            return 1;
        }
    }
    printf("us_per_fork %.1f\n", (now() - t0) / n * 1e6);
    close(s);
    return 0;
}
