/* gw_competitor: a CPU burner that injects contention. It spins (a busy loop of real arithmetic)
 * on --cpu N, pinned there with sched_setaffinity, for --duration seconds, under the process
 * name --comm. Several instances, or --threads > 1, load several CPUs. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop = 0;

static void OnStopSignal(int sig) {
  (void)sig;
  g_stop = 1;
}

static double NowS(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void Usage(FILE* out) {
  fprintf(out,
          "usage: gw_competitor [--duration SEC] [--cpu N] [--threads T] [--comm NAME]\n"
          "Burns CPU to inject contention.\n"
          "  --duration SEC  how long to spin (default 10; 0: until SIGTERM/SIGINT)\n"
          "  --cpu N         pin to CPU N (sched_setaffinity); with --threads T, CPUs N..N+T-1\n"
          "                  (default: not pinned)\n"
          "  --threads T     spinning threads (default 1)\n"
          "  --comm NAME     process name (prctl PR_SET_NAME, default gw_competitor)\n"
          "  --help          this text\n");
}

struct Spinner {
  int cpu; /* -1: not pinned */
  double deadline;
  uint64_t iterations;
};

static void* Spin(void* arg) {
  struct Spinner* s = arg;
  if (s->cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      fprintf(stderr, "gw_competitor: sched_setaffinity cpu %d: %s\n", s->cpu, strerror(errno));
    }
  }
  uint64_t x = 88172645463325252ull;
  uint64_t n = 0;
  while (!g_stop) {
    for (int i = 0; i < 100000; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
    n += 100000;
    if (s->deadline > 0 && NowS() >= s->deadline) break;
  }
  s->iterations = n + (x & 1);
  return NULL;
}

int main(int argc, char** argv) {
  double duration = 10;
  int cpu = -1;
  int threads = 1;
  const char* comm = "gw_competitor";
  static const struct option kLong[] = {
      {"duration", required_argument, NULL, 'd'}, {"cpu", required_argument, NULL, 'c'},
      {"threads", required_argument, NULL, 't'},  {"comm", required_argument, NULL, 'n'},
      {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "h", kLong, NULL)) != -1) {
    char* end = NULL;
    switch (c) {
      case 'd':
        duration = strtod(optarg, &end);
        if (end == optarg || *end != '\0' || duration < 0) {
          fprintf(stderr, "gw_competitor: bad --duration '%s'\n", optarg);
          return 1;
        }
        break;
      case 'c':
        cpu = (int)strtol(optarg, &end, 10);
        if (end == optarg || *end != '\0' || cpu < 0) {
          fprintf(stderr, "gw_competitor: bad --cpu '%s'\n", optarg);
          return 1;
        }
        break;
      case 't':
        threads = (int)strtol(optarg, &end, 10);
        if (end == optarg || *end != '\0' || threads < 1 || threads > 1024) {
          fprintf(stderr, "gw_competitor: bad --threads '%s'\n", optarg);
          return 1;
        }
        break;
      case 'n':
        comm = optarg;
        break;
      case 'h':
        Usage(stdout);
        return 0;
      default:
        Usage(stderr);
        return 1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gw_competitor: unexpected argument '%s'\n", argv[optind]);
    return 1;
  }
  prctl(PR_SET_NAME, comm, 0, 0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);

  double deadline = duration > 0 ? NowS() + duration : 0;
  struct Spinner* spinners = calloc((size_t)threads, sizeof(*spinners));
  pthread_t* ids = calloc((size_t)threads, sizeof(*ids));
  if (spinners == NULL || ids == NULL) return 1;
  for (int i = 0; i < threads; ++i) {
    spinners[i].cpu = cpu < 0 ? -1 : cpu + i;
    spinners[i].deadline = deadline;
  }
  for (int i = 1; i < threads; ++i) {
    if (pthread_create(&ids[i], NULL, Spin, &spinners[i]) != 0) {
      fprintf(stderr, "gw_competitor: pthread_create failed\n");
      return 1;
    }
  }
  Spin(&spinners[0]);
  uint64_t total = spinners[0].iterations;
  for (int i = 1; i < threads; ++i) {
    pthread_join(ids[i], NULL);
    total += spinners[i].iterations;
  }
  printf("gw_competitor: iterations=%llu\n", (unsigned long long)total);
  free(spinners);
  free(ids);
  return 0;
}
