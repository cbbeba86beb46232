# libbpf, libelf, zlib and SQLite are linked statically so the gpuwhy binary runs on any x86-64
# Linux with glibc (the GPU machine included) by copying one file.
find_library(GW_LIBBPF_A NAMES libbpf.a REQUIRED)
find_library(GW_LIBELF_A NAMES libelf.a REQUIRED)
find_library(GW_LIBZ_A NAMES libz.a REQUIRED)
find_library(GW_LIBSQLITE_A NAMES libsqlite3.a REQUIRED)

add_library(gw_static_bpf INTERFACE)
target_link_libraries(gw_static_bpf INTERFACE ${GW_LIBBPF_A} ${GW_LIBELF_A} ${GW_LIBZ_A})

add_library(gw_static_sqlite INTERFACE)
target_link_libraries(gw_static_sqlite INTERFACE ${GW_LIBSQLITE_A} m dl Threads::Threads)

add_library(gw_static_z INTERFACE)
target_link_libraries(gw_static_z INTERFACE ${GW_LIBZ_A})
