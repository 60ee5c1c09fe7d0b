/* The host's speed, as a fixed piece of work: a walk of dependent loads over a shuffled
 * 512 KiB array (within this machine's 2 MiB L2), timed. bench/lab_split.py runs it on the
 * server's core just before and just after each measured run: a whole core that is slower
 * for a while (a shared host) shows here as more ns per step, pronghorn or not.
 *   host_speed [KIB] [STEPS]   prints "ns_per_step <float>" */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    size_t kib = argc > 1 ? strtoul(argv[1], NULL, 10) : 512;
    size_t steps = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000000;
    size_t n = kib * 1024 / sizeof(size_t);
    size_t *next = malloc(n * sizeof(size_t));
    if (!next || n < 2) return 1;
    /* One cycle through every slot (Sattolo's shuffle), so the walk never settles in a corner. */
    for (size_t i = 0; i < n; i++) next[i] = i;
    srand(1);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rand() % i, t = next[i];
        next[i] = next[j];
        next[j] = t;
    }
    struct timespec t0, t1;
    size_t at = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t s = 0; s < steps; s++) at = next[at];
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("ns_per_step %.3f\n", ns / steps);
    return at == (size_t)-1; /* uses the walk's result, so the loop stays */
}
