/* gw_wake_pingpong: two processes pass one byte back and forth over two pipes, ROUNDS times,
 * so each round trip is two blocking reads, two wake-ups and four context switches. Prints
 *   wake_pingpong: rounds=N ns_per_round_trip=X
 * The load behind the host-probe cost benchmark (host_probe_cost.py): what sched_switch,
 * sched_waking and the interrupt-context counters cost per wake-up. Both processes are named
 * gw_pingpong, so `gpuwhy trace --comm gw_pingpong` tracks them from their first switch. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char** argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 200000;
  if (rounds <= 0) {
    fprintf(stderr, "usage: gw_wake_pingpong [ROUNDS]\n");
    return 2;
  }
  prctl(PR_SET_NAME, "gw_pingpong", 0, 0, 0);
  /* Both on one CPU: every hand-over is a wake-up and a switch, never two CPUs spinning. */
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  sched_setaffinity(0, sizeof(one), &one);
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
    perror("pipe");
    return 1;
  }
  char b = 'x';
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    return 1;
  }
  if (child == 0) {
    for (long i = 0; i < rounds; ++i) {
      if (read(to_child[0], &b, 1) != 1 || write(to_parent[1], &b, 1) != 1) _exit(1);
    }
    _exit(0);
  }
  double t0 = NowNs();
  for (long i = 0; i < rounds; ++i) {
    if (write(to_child[1], &b, 1) != 1 || read(to_parent[0], &b, 1) != 1) {
      perror("ping-pong");
      return 1;
    }
  }
  double t1 = NowNs();
  int status = 0;
  waitpid(child, &status, 0);
  printf("wake_pingpong: rounds=%ld ns_per_round_trip=%.1f\n", rounds, (t1 - t0) / rounds);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
