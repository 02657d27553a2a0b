#!/usr/bin/env bash
# Make the data-directory fixture of a release: build that release's
# ramqp-brokerd from the commit it was cut from, have it write a data
# directory (tests/interop/release_data.py: four quorum queues, paged
# bodies in rolled segment files, snapshots, settled and failed
# deliveries), stop it with SIGTERM, pack the directory and its manifest
# into tests/fixtures/data-dir-<version>.tar.gz, and check the fixture with
# the release's own binary (tests/interop/test_release_data.py).
#
#   scripts/make-data-dir-fixture.sh VERSION COMMIT
#   scripts/make-data-dir-fixture.sh 0.1.0 262ef65
#
# Runs from the current checkout's writer and test (they read only the
# manifest, so any later commit makes an equivalent fixture). The release
# is built in a temporary git worktree of COMMIT, into
# $RAMQP_FIXTURE_TARGET_DIR (default: target/release-fixtures/, apart from
# the target directory the tests use, so the release's binary never
# replaces this commit's). RAMQP_FIXTURE_BROKERD=PATH skips the build and
# uses that binary (it must be the release's).
#
# Needs: git, cargo, Debian's /usr/bin/python3 with python3-qpid-proton and
# python3-pytest (scripts/test-deps.sh), tar, gzip.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 VERSION COMMIT   (e.g. $0 0.1.0 262ef65)" >&2
    exit 2
fi
version="$1"
commit="$(git rev-parse --verify "$2^{commit}")"
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
python=/usr/bin/python3
fixture="tests/fixtures/data-dir-$version.tar.gz"

work="$(mktemp -d "${TMPDIR:-/tmp}/ramqp-fixture-$version.XXXXXX")"
worktree=""
cleanup() {
    if [[ -n "$worktree" ]]; then
        git worktree remove --force "$worktree" || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

brokerd="${RAMQP_FIXTURE_BROKERD:-}"
if [[ -z "$brokerd" ]]; then
    target_dir="${RAMQP_FIXTURE_TARGET_DIR:-$repo_root/target/release-fixtures}"
    worktree="$work/src"
    git worktree add --detach "$worktree" "$commit"
    echo "==> cargo build -p ramqp-brokerd at $commit (into $target_dir)"
    (cd "$worktree" && CARGO_TARGET_DIR="$target_dir" cargo build -p ramqp-brokerd)
    brokerd="$target_dir/debug/ramqp-brokerd"
fi
reported="$("$brokerd" --version)"
if [[ "$reported" != "ramqp-brokerd $version" ]]; then
    echo "$0: $brokerd says '$reported', not 'ramqp-brokerd $version'" >&2
    exit 1
fi

echo "==> writing a data directory with $brokerd"
(cd tests/interop && RAMQP_BROKERD="$brokerd" "$python" release_data.py \
    --release "$version" --commit "$commit" --out "$work/data-dir-$version")

echo "==> packing $fixture"
mkdir -p tests/fixtures
# Sorted, with fixed owners and times, so the archive depends only on the
# files' contents.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -C "$work" -cf - "data-dir-$version" | gzip -9n >"$fixture"
ls -l "$fixture"

echo "==> checking $fixture with the release's own binary"
RAMQP_BROKERD="$brokerd" "$python" -m pytest -q \
    "tests/interop/test_release_data.py::test_reads_the_data_dir_of_a_release[$version]"
