#!/usr/bin/env bash
# Make the data-directory fixtures of a release: build that release's
# ramqp-brokerd from the commit it was cut from, have one node and then a
# 3-node cluster of it write data directories (tests/interop/release_data.py:
# quorum queues with paged bodies in rolled segment files, snapshots,
# settled and failed deliveries), stop them with SIGTERM, pack each with its
# manifest into tests/fixtures/data-dir-<version>.tar.gz and
# data-dir-<version>-cluster3.tar.gz, and check both with the release's own
# binary (tests/interop/test_release_data.py).
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
# uses that binary (it must be the release's, with its ramqp-ctl beside it).
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
    git worktree add --quiet --detach "$worktree" "$commit"
    echo "==> cargo build -p ramqp-brokerd at $commit (into $target_dir)"
    (cd "$worktree" && CARGO_TARGET_DIR="$target_dir" cargo build -p ramqp-brokerd)
    brokerd="$target_dir/debug/ramqp-brokerd"
fi
reported="$("$brokerd" --version)"
if [[ "$reported" != "ramqp-brokerd $version" ]]; then
    echo "$0: $brokerd says '$reported', not 'ramqp-brokerd $version'" >&2
    exit 1
fi

mkdir -p tests/fixtures
for layout in single cluster3; do
    if [[ $layout == single ]]; then name="$version" nodes=1; else name="$version-$layout" nodes=3; fi
    echo "==> writing data-dir-$name with $brokerd ($nodes node(s))"
    (cd tests/interop && RAMQP_BROKERD="$brokerd" "$python" release_data.py \
        --release "$version" --commit "$commit" --nodes "$nodes" --out "$work/data-dir-$name")
    fixture="tests/fixtures/data-dir-$name.tar.gz"
    echo "==> packing $fixture"
    # Sorted, with fixed owners and times, so the archive depends only on
    # the files' contents.
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
        -C "$work" -cf - "data-dir-$name" | gzip -9n >"$fixture"
    ls -l "$fixture"
done

echo "==> checking the fixtures with the release's own binary"
RAMQP_BROKERD="$brokerd" "$python" -m pytest -q \
    "tests/interop/test_release_data.py::test_reads_the_data_dir_of_a_release[$version]" \
    "tests/interop/test_release_data.py::test_reads_the_data_dir_of_a_release[$version-cluster3]"
