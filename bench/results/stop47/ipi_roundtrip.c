// What one interprocessor interrupt costs here, from user space: membarrier(PRIVATE_EXPEDITED)
// interrupts every other CPU that is running a thread of this process and waits until each has
// run the handler. With a thread of ours spinning on the other core, a call is one IPI round
// trip (the sender's write, the delivery, the handler, the acknowledgement) plus the system
// call; without it, the system call alone. Pinned: the caller on core 1, the spinner on core 0.
//   cc -O2 -pthread -o ipi_roundtrip ipi_roundtrip.c && ./ipi_roundtrip
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *spin(void *arg) {
    (void)arg;
    pin(0);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    }
    return NULL;
}

static double ns_per_call(int n) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}

int main(void) {
    pin(1);
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0)) {
        perror("membarrier register");
        return 1;
    }
    const int n = 20000;
    for (int round = 0; round < 3; round++) {
        double alone = ns_per_call(n);
        pthread_t t;
        atomic_store(&stop, 0);
        pthread_create(&t, NULL, spin, NULL);
        usleep(100000);  // let the spinner reach core 0
        double with_ipi = ns_per_call(n);
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
        printf("round %d: no other core runs us %.2f us per call; with an IPI to core 0 %.2f us (the IPI's round trip %.2f us)\n",
               round + 1, alone / 1e3, with_ipi / 1e3, (with_ipi - alone) / 1e3);
    }
    return 0;
}
