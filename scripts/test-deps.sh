#!/usr/bin/env bash
# Installs, from Debian's packages, what the test command needs beyond the
# Rust toolchain: python3-qpid-proton, python3-pytest, python3-pytest-xdist
# and python3-yaml (the interop and nemesis suites), chromium (the status page's test), strace, e2fsprogs and mount (the disk-fault tests),
# iproute2, nftables and faketime (the nemesis's partitions and clocks).
# Does nothing when all are there. Needs root or sudo to install; without
# them it says what to install and fails if the Python packages are
# missing (the fault tools only make their tests skip). Called by
# scripts/test.sh and .ci/run.
set -euo pipefail

# Run apt as root directly, or through sudo when CI runs as a plain user.
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        echo "scripts/test-deps.sh: need root (or sudo) to run: $*" >&2
        return 1
    fi
}

# The suites run under Debian's interpreter (see scripts/test.sh).
# Its disk-fault tests (tests/interop/test_disk_faults.py) inject I/O
# errors with strace and loop-mount a small ext4 (mkfs.ext4 from
# e2fsprogs, mount from the mount package); they skip, saying so, when run
# without root or without these.
required=()
if ! /usr/bin/python3 -c 'import proton, pytest' 2>/dev/null; then
    required+=(python3-qpid-proton python3-pytest)
fi
# The deploy-asset checks (tests/interop/test_deploy_assets.py) parse the
# compose and Kubernetes YAML.
/usr/bin/python3 -c 'import yaml' 2>/dev/null || required+=(python3-yaml)
# The interop suite runs its files on two workers (pytest-xdist), to keep
# the whole test command inside CI's 30 minutes on 2 cores.
/usr/bin/python3 -c 'import xdist' 2>/dev/null || required+=(python3-pytest-xdist)
# The TLS tests (tests/interop/test_tls.py) make their certificates with
# the openssl command.
command -v openssl >/dev/null 2>&1 || required+=(openssl)
# The status page's test (tests/interop/test_web_page.py) loads it in a
# real headless browser.
command -v chromium >/dev/null 2>&1 || required+=(chromium)
fault_tools=()
command -v strace >/dev/null 2>&1 || fault_tools+=(strace)
command -v mkfs.ext4 >/dev/null 2>&1 || [[ -x /usr/sbin/mkfs.ext4 ]] || [[ -x /sbin/mkfs.ext4 ]] || fault_tools+=(e2fsprogs)
command -v mount >/dev/null 2>&1 || fault_tools+=(mount)
# The nemesis's partitions (network namespaces, a bridge, nft rules) and
# clock faults (libfaketime).
command -v ip >/dev/null 2>&1 || [[ -x /usr/sbin/ip ]] || [[ -x /sbin/ip ]] || fault_tools+=(iproute2)
command -v nft >/dev/null 2>&1 || [[ -x /usr/sbin/nft ]] || fault_tools+=(nftables)
[[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]] || fault_tools+=(faketime)
packages=("${required[@]}" "${fault_tools[@]}")
if [[ ${#packages[@]} -eq 0 ]]; then
    echo "==> python3-qpid-proton, python3-pytest, python3-pytest-xdist, python3-yaml, openssl, chromium, strace, e2fsprogs, mount, iproute2, nftables and faketime already installed"
elif [[ ${#required[@]} -eq 0 ]] && [[ "$(id -u)" -ne 0 ]] && ! command -v sudo >/dev/null 2>&1; then
    # Only the fault tests' tools are missing and they could not run here
    # anyway (they need root): they skip and say so.
    echo "==> not root: not installing ${fault_tools[*]}; the disk-fault tests will skip"
else
    echo "==> installing ${packages[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
fi

