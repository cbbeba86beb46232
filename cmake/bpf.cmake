# BPF build machinery: vmlinux.h from the running kernel's BTF, clang -target bpf, and
# `bpftool gen skeleton` into ${CMAKE_BINARY_DIR}/generated/<name>.skel.h. The skeleton embeds
# the BPF object, so the gpuwhy binary carries every program it loads.
find_program(GW_CLANG NAMES clang clang-14 REQUIRED)
find_program(GW_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)

set(GW_GENERATED_DIR ${CMAKE_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${GW_GENERATED_DIR})
set(GW_VMLINUX_H ${GW_GENERATED_DIR}/vmlinux.h)

# Generated once at configure time from the build machine's kernel; CO-RE relocates the
# programs to whatever kernel runs them.
if(NOT EXISTS ${GW_VMLINUX_H})
  execute_process(
    COMMAND ${GW_BPFTOOL} btf dump file /sys/kernel/btf/vmlinux format c
    OUTPUT_FILE ${GW_VMLINUX_H}.tmp
    RESULT_VARIABLE gw_btf_result)
  if(NOT gw_btf_result EQUAL 0)
    message(FATAL_ERROR "bpftool could not dump /sys/kernel/btf/vmlinux: the build needs a "
                        "kernel with BTF (CONFIG_DEBUG_INFO_BTF)")
  endif()
  file(RENAME ${GW_VMLINUX_H}.tmp ${GW_VMLINUX_H})
endif()

# gw_bpf_skeleton(<name> <source.bpf.c> [HEADERS h...]) defines target gw_skel_<name> whose
# output is generated/<name>.skel.h.
function(gw_bpf_skeleton name source)
  cmake_parse_arguments(ARG "" "" "HEADERS" ${ARGN})
  set(obj ${GW_GENERATED_DIR}/${name}.bpf.o)
  set(skel ${GW_GENERATED_DIR}/${name}.skel.h)
  get_filename_component(src_abs ${source} ABSOLUTE)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${GW_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Wno-unused-function
            -I${GW_GENERATED_DIR} -I${CMAKE_SOURCE_DIR}/src -c ${src_abs} -o ${obj}
    DEPENDS ${src_abs} ${ARG_HEADERS} ${GW_VMLINUX_H}
    COMMENT "BPF ${name}.bpf.c"
    VERBATIM)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${GW_BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${skel}.tmp ${skel}
    DEPENDS ${obj}
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(gw_skel_${name} DEPENDS ${skel})
endfunction()
