#!/usr/bin/env bash
# Keeps the shared cargo target dir (default ~/.cache/infaas/target) from
# filling the disk. Every build of a changed crate leaves its previous artifacts
# behind under a new hash; a day of edits and test runs left 75 GB on the
# project's machine. When the dir is larger than INFAAS_TARGET_MAX_GB
# (default 30), this removes:
#   - incremental state (debug/incremental, release/incremental);
#   - in each profile's deps/, all but the newest KEEP_EXE (default 1) builds of
#     each test binary and all but the newest KEEP_LIB (default 4) builds of each
#     library (rlib/rmeta/so/d files of one hash go together).
# Cargo rebuilds anything it needs that was removed, so this never breaks a
# build; it only costs time when a removed build is needed again.
# Usage: bash scripts/prune-target.sh [target-dir]
set -euo pipefail

INFAAS_CACHE="${INFAAS_CACHE:-$HOME/.cache/infaas}"
dir="${1:-${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}}"
max_gb="${INFAAS_TARGET_MAX_GB:-30}"
keep_exe="${KEEP_EXE:-1}"
keep_lib="${KEEP_LIB:-4}"

[[ -d "$dir" ]] || exit 0
size_gb=$(($(du -sk "$dir" | cut -f1) / 1024 / 1024))
if ((size_gb <= max_gb)); then
  echo "prune-target: $dir is ${size_gb} GB (limit ${max_gb} GB); nothing to do"
  exit 0
fi
echo "prune-target: $dir is ${size_gb} GB (limit ${max_gb} GB); pruning"

# One line per file on stdin: "<mtime> <name>". A build is the files of one
# hash; every build past the newest KEEP of its stem is removed with its files.
prune_py=$(cat <<'PY'
import os, re, sys
deps, keep_exe, keep_lib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
name = re.compile(r"^(lib)?(.+)-([0-9a-f]{16})(\..+)?$")
builds = {}  # stem -> {hash: [newest mtime, files, kinds]}
for line in sys.stdin:
    mtime, f = line.rstrip("\n").split(" ", 1)
    m = name.match(f)
    if not m:
        continue
    lib, stem, h, ext = m.groups()
    kind = "lib" if lib or ext in (".rlib", ".rmeta", ".so") else "exe"
    if ext == ".d":
        kind = None  # decided by its siblings below
    entry = builds.setdefault(stem, {}).setdefault(h, [0.0, [], set()])
    entry[0] = max(entry[0], float(mtime))
    entry[1].append(f)
    if kind:
        entry[2].add(kind)
removed = 0
for stem, hashes in builds.items():
    for kind, keep in (("exe", keep_exe), ("lib", keep_lib)):
        mine = sorted(
            (e for e in hashes.values() if kind in e[2] or (not e[2] and kind == "lib")),
            key=lambda e: -e[0],
        )
        for _, files, _ in mine[keep:]:
            for f in files:
                try:
                    removed += os.path.getsize(os.path.join(deps, f))
                    os.remove(os.path.join(deps, f))
                except FileNotFoundError:
                    pass
print(f"prune-target: {deps}: removed {removed / 1e9:.1f} GB")
PY
)

for profile in debug release; do
  rm -rf "${dir:?}/$profile/incremental"
  deps="$dir/$profile/deps"
  [[ -d "$deps" ]] || continue
  find "$deps" -maxdepth 1 -type f -printf '%T@ %f\n' |
    python3 -c "$prune_py" "$deps" "$keep_exe" "$keep_lib"
done
echo "prune-target: now $(du -sh "$dir" | cut -f1)"
