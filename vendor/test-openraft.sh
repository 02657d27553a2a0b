#!/usr/bin/env bash
# Runs openraft's own unit tests (its `src/**` tests, 619 of them) on the
# vendored, patched tree. The vendored Cargo.toml leaves out upstream's
# dev-dependencies (vendor/README.md), so this copies the tree to a scratch
# directory, puts them back there and runs `cargo test --lib` outside our
# workspace. Not part of scripts/test.sh: run it after changing
# vendor/openraft. Usage: vendor/test-openraft.sh [test-name-filter]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$here/openraft" "$scratch/openraft"
cp "$here/../Cargo.lock" "$scratch/openraft/" 2>/dev/null || true
cat >> "$scratch/openraft/Cargo.toml" <<'TOML'

# Upstream's dev-dependencies (test-openraft.sh only).
[dev-dependencies.anyhow]
version = "1.0.63"

[dev-dependencies.bincode]
version = "1.3"

[dev-dependencies.openraft-rt-tokio]
version = "0.10.0-alpha.37"

[dev-dependencies.pretty_assertions]
version = "1.0.0"

[dev-dependencies.serde_json]
version = "1.0.57"

[workspace]
TOML
cd "$scratch/openraft"
CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/../target}/openraft-tests" cargo test --lib "$@"
