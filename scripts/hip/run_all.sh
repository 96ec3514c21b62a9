#!/bin/bash
# Reproduce everything in FINDINGS.md. Run from scripts/hip/ (outputs go to out/, not tracked). Needs root for apt.
set -u
cd "$(dirname "$0")"
# apt-get update && apt-get install -y libamdhip64-dev libamdhip64-5 libhiprtc-builtins5 libamd-comgr2 libamd-comgr-dev rocm-device-libs rocminfo
g++ -std=c++17 -O1 -Wall -Wextra -o try_hiprtc try_hiprtc.cpp -ldl
gcc -O1 -o comgr_isas comgr_isas.c -lamd_comgr          # needs libamd-comgr-dev
mkdir -p out && rm -f out/*.co
./comgr_isas > out/comgr_isas.txt
# 1) all kernels x comgr-supported targets, no hipInit at all
/usr/bin/time -f "process: wall=%es user=%Us sys=%Ss maxrss=%MKB" ./try_hiprtc --arch gfx90a,gfx908,gfx1030 > out/run_all_supported.txt 2>&1
# 2) each requested/likely target in its own process (unsupported ones abort the process)
for a in gfx90a gfx908 gfx1030 gfx906 gfx900 gfx1010 gfx940 gfx941 gfx942 gfx1100 gfx1101 gfx9999; do
  echo "##### $a"; ./try_hiprtc --kernel k --arch $a 2>&1 | sed -n '/=== kernel/,$p'; echo "exit=${PIPESTATUS[0]}"
done > out/run_archs_k.txt 2>&1
# 3) hipInit before / after / never, and no --offload-arch
for args in "--kernel k --arch gfx90a --init before" "--kernel k --arch gfx90a --init after" "--kernel k --arch none" "--kernel k --arch none --init before"; do
  echo "##### $args"; ./try_hiprtc $args 2>&1; echo "exit=$?"
done > out/run_init.txt 2>&1
AMD_LOG_LEVEL=3 ./try_hiprtc --kernel k --arch none --init before > out/amd_log_level3.txt 2>&1
# 4) options: wave64 on RDNA, xnack/sramecc target-id suffixes, -std=c++17
for args in "--kernel ws64 --arch gfx1030 --opt -mwavefrontsize64" "--kernel k --arch gfx90a:xnack- --opt -std=c++17" "--kernel k --arch gfx90a:sramecc+:xnack+" "--kernel k --arch gfx908:xnack-"; do
  echo "##### $args"; ./try_hiprtc $args 2>&1 | sed -n '/=== kernel/,$p'; echo "exit=${PIPESTATUS[0]}"
done > out/run_options.txt 2>&1
# 5) comgr's real clang -cc1 command line (include paths, defaults)
AMD_COMGR_EMIT_VERBOSE_LOGS=1 AMD_COMGR_REDIRECT_LOGS=stderr ./try_hiprtc --kernel k --arch gfx90a > out/comgr_verbose_k.txt 2>&1
AMD_COMGR_EMIT_VERBOSE_LOGS=1 AMD_COMGR_REDIRECT_LOGS=stderr ./try_hiprtc --kernel k --arch gfx942 > out/comgr_verbose_gfx942.txt 2>&1
# 6) timing: repeated compiles in one process
./try_hiprtc --kernel k,k6 --arch gfx90a,gfx90a,gfx90a,gfx1030,gfx908 > out/run_timing.txt 2>&1
# 7) cross-check with LLVM tools + offload-bundle round trip
./try_hiprtc --kernel k --arch gfx90a,gfx1030 > /dev/null 2>&1
for f in out/k_gfx90a.co out/k_gfx1030.co; do llvm-readelf-16 -h -s --notes $f; done > out/readelf.txt 2>&1
: > out/empty_host.o
clang-offload-bundler-14 --type=o --targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx90a \
  --inputs=out/empty_host.o,out/k_gfx90a.co --outputs=out/k_gfx90a.bundle
./try_hiprtc --inspect out/k_gfx90a.bundle > out/inspect_bundle.txt
clang-offload-bundler-14 --unbundle --type=o --targets=hipv4-amdgcn-amd-amdhsa--gfx90a \
  --inputs=out/k_gfx90a.bundle --outputs=out/k_gfx90a.unbundled.co && cmp out/k_gfx90a.co out/k_gfx90a.unbundled.co && echo "unbundle round trip identical" >> out/inspect_bundle.txt
# embedded hipRTC header (what is pre-included)
objcopy -O binary --only-section=.hipRTC_header /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 out/hipRTC_header.bin
python3 -c "import struct; d=open('out/hipRTC_header.bin','rb').read(); n=struct.unpack('<I',d[-4:])[0]; open('out/hipRTC_header.h','wb').write(d[:n])" && rm out/hipRTC_header.bin
echo done
