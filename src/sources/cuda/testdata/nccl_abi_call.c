/* Calls NCCL entry points of the library named in argv[1] (dlopen) with arguments NCCL rejects
 * before touching a GPU: a NULL communicator, a rank outside the communicator. Each call still
 * enters and returns, so gpuwhy's probes see how its arguments arrive on a real libnccl:
 * 7th/8th arguments on the stack, the 128-byte ncclUniqueId passed by value. nccl_e2e traces it
 * against the simulated library and, where one is installed, a real libnccl.so.2.
 * Usage: nccl_abi_call LIBNCCL [SLEEP_S] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  char internal[128];
} ncclUniqueId;
typedef int (*AllReduceFn)(const void*, void*, size_t, int, int, void*, void*);
typedef int (*ReduceFn)(const void*, void*, size_t, int, int, int, void*, void*);
typedef int (*InitFn)(void**, int, ncclUniqueId, int);
typedef int (*VersionFn)(int*);

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  VersionFn version_fn = (VersionFn)dlsym(lib, "ncclGetVersion");
  AllReduceFn all_reduce = (AllReduceFn)dlsym(lib, "ncclAllReduce");
  ReduceFn reduce = (ReduceFn)dlsym(lib, "ncclReduce");
  InitFn init = (InitFn)dlsym(lib, "ncclCommInitRank");
  if (!version_fn || !all_reduce || !reduce || !init) return 1;
  int version = 0;
  version_fn(&version);
  if (argc > 2) sleep((unsigned)atoi(argv[2]));
  /* 1000 float32 (4000 bytes) on stream 0xabcd; 250 bfloat16 (500 bytes), root 1, on 0xbeef. */
  int r1 = all_reduce((void*)0x1000, (void*)0x2000, 1000, 7, 0, NULL, (void*)0xabcd);
  int r2 = reduce((void*)0x1000, (void*)0x2000, 250, 9, 0, 1, NULL, (void*)0xbeef);
  ncclUniqueId id;
  memset(&id, 0x5a, sizeof id);
  void* comm = NULL;
  int r3 = init(&comm, 2, id, 5); /* rank 5 of 2 */
  printf("nccl_abi_call: version %d allreduce %d reduce %d init %d\n", version, r1, r2, r3);
  return 0;
}
