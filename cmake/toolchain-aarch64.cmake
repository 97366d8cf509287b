# Cross build for aarch64 (arm64-v8a) with Debian's cross compiler
# (g++-aarch64-linux-gnu) and multiarch arm64 libraries (libssl-dev:arm64;
# scripts/setup.sh installs them). scripts/build.sh uses it to build only
# dfarm-agent and dfarm-runner into $BUILD/arm64; the binaries run under
# qemu-user (`qemu-aarch64 -L /usr/aarch64-linux-gnu`), the qemu-arm64 device.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(DFARM_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${DFARM_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${DFARM_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${DFARM_CROSS_TRIPLE})

# Libraries and headers come from the cross sysroot and the arm64 multiarch
# folders (/usr/lib/aarch64-linux-gnu, /usr/include/aarch64-linux-gnu);
# header-only and arch-independent packages (FlatBuffers headers,
# nlohmann-json, CLI11, Eigen) and host programs (flatc) from the host.
# XNNPACK, pthreadpool and cpuinfo for arm64 are unpacked by scripts/setup.sh
# into .cache/arm64-sysroot: their :arm64 packages would remove the host's.
get_filename_component(DFARM_ARM64_SYSROOT ${CMAKE_CURRENT_LIST_DIR}/../.cache/arm64-sysroot ABSOLUTE)
set(CMAKE_FIND_ROOT_PATH /usr/${DFARM_CROSS_TRIPLE} ${DFARM_ARM64_SYSROOT} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(OPENSSL_ROOT_DIR /usr)
set(OPENSSL_USE_STATIC_LIBS TRUE)
set(OPENSSL_CRYPTO_LIBRARY /usr/lib/${DFARM_CROSS_TRIPLE}/libcrypto.a)
set(OPENSSL_SSL_LIBRARY /usr/lib/${DFARM_CROSS_TRIPLE}/libssl.a)

# dfarm-agent is linked statically (the top-level CMakeLists.txt): under
# qemu-user 7.2 here a fork()ed child of a dynamically linked aarch64 program
# spun forever in the guest, so the agent could not start a runner; static
# programs fork and exec normally. The runners (which do not fork) and the
# plugins are dynamic, so they can load XNNPACK and dlopen() plugins; a
# runner travels to a device as a bundle with its libraries and loader
# (harness/run/bundle_maker.h), so it needs nothing of the device's libc.
set(CMAKE_EXE_LINKER_FLAGS_INIT
    "-Wl,-rpath-link,${DFARM_ARM64_SYSROOT}/usr/lib/${DFARM_CROSS_TRIPLE}")
set(OPENSSL_INCLUDE_DIR /usr/include)

# Tests run built programs on the host: under qemu when they are arm64.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/${DFARM_CROSS_TRIPLE})
