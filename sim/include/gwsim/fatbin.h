// The simulated fat binary: what workloads hand to __cudaRegisterFatBinary.
//
// nvcc emits a wrapper {magic 0x466243b1, version, data, filename_or_fatbins} per translation
// unit and passes its address to __cudaRegisterFatBinary. The simulator keeps that wrapper and
// defines its own payload for `data`: the 8 bytes "GWSIMFB1" followed by NUL-terminated kernel
// (device) names and an empty name as terminator. cuModuleLoadData / cuLibraryLoadData accept
// either the wrapper or the payload; a payload lists the kernels the module contains, and any
// other image is accepted as "contains every kernel name" (the simulator cannot parse real
// cubins).
#ifndef GWSIM_FATBIN_H_
#define GWSIM_FATBIN_H_

#ifdef __cplusplus
extern "C" {
#endif

#define GWSIM_FATBIN_WRAPPER_MAGIC 0x466243b1
#define GWSIM_FATBIN_PAYLOAD_MAGIC "GWSIMFB1"

typedef struct GwsimFatbinWrapper {
  int magic;
  int version;
  const void* data;
  void* filename_or_fatbins;
} GwsimFatbinWrapper;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // GWSIM_FATBIN_H_
