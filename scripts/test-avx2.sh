#!/usr/bin/env bash
# INT8 accuracy does not depend on the CPU: runs the INT8 tests with ONNX Runtime on the
# x86 kernel path of CPUs with AVX2 but no VNNI, under qemu-user's emulation of such a CPU
# (default EPYC-Rome; Haswell works too), whatever CPU this machine has.
#
# ONNX Runtime's MLAS picks its integer kernels by CPUID. Without VNNI its u8 x s8 kernels
# add pairs of products in a saturating int16 (vpmaddubsw): full 8-bit weights overflow it
# and the same INT8 file answers differently than on a VNNI CPU. The platform's INT8 files
# use 7-bit weights, exact on both paths. This script proves it:
#
#   1. the INT8 tests of infaas-onnx (onnx/tests/rewrites.rs, the `quantize` ones) with
#      their ONNX Runtime side (Python, tests/check_ort.py) under the emulated CPU: the
#      same error bounds as natively;
#   2. the zoo's CNN (static QDQ) and text encoder (dynamic) INT8 files, built here and run
#      here, then run under the emulated CPU (executors/tests/int8_avx2.rs): the same
#      answers; and their 8-bit contrast files must differ there (else the emulated CPU
#      did not take the saturating path and nothing was proved).
#
# Idempotent: installs qemu-user with apt when missing (and ONNX Runtime, Python's onnx,
# onnxruntime and numpy like scripts/setup.sh and scripts/test.sh), builds two test
# binaries into the shared target dir. About 2 minutes on the project's 2-core machine
# once built (emulation runs ONNX Runtime 200 times slower).
#
# Usage: scripts/test-avx2.sh [--cpu MODEL]     (MODEL from `qemu-x86_64 -cpu help`)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

cpu="${INFAAS_AVX2_CPU:-EPYC-Rome}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu)
      [[ $# -ge 2 ]] || die "--cpu needs a CPU model"
      cpu="$2"
      shift 2
      ;;
    -h | --help)
      awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) die "unknown argument: $1 (try --help)" ;;
  esac
done

started=$SECONDS
command -v qemu-x86_64 >/dev/null 2>&1 || apt_ensure qemu-user
grep -qE "^x86 +$cpu( |$)" <<<"$(qemu-x86_64 -cpu help)" ||
  die "qemu-x86_64 has no CPU model '$cpu' (see qemu-x86_64 -cpu help)"

"$INFAAS_ROOT/scripts/setup.sh" >/dev/null
export ORT_DYLIB_PATH="$ORT_LIB"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$INFAAS_CACHE/target}"

py_check="import onnx, numpy, onnxruntime
assert onnxruntime.__version__ == '$ORT_VERSION', onnxruntime.__version__"
if ! python3 -c "$py_check" >/dev/null 2>&1; then
  mkdir -p "$INFAAS_LOGS"
  log "installing Python packages: onnx numpy onnxruntime==$ORT_VERSION (log: $INFAAS_LOGS/pip-avx2.log)"
  python3 -m pip install -q onnx numpy "onnxruntime==$ORT_VERSION" >"$INFAAS_LOGS/pip-avx2.log" 2>&1 || {
    show_log_tail "$INFAAS_LOGS/pip-avx2.log"
    die "pip install failed"
  }
fi
# The interpreter itself (qemu runs ELF files, not pyenv's shell shims).
python_exe="$(python3 -c 'import sys; print(sys.executable)')"

# test_binary PACKAGE TEST: builds the integration test TEST of PACKAGE, prints its path.
test_binary() {
  cargo test -q -p "$1" --test "$2" --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])
' "$2"
}
log "building the test binaries (cargo test --no-run)"
cargo test -q -p infaas-onnx --test rewrites --no-run
cargo test -q -p infaas-executors --test int8_avx2 --no-run
rewrites="$(test_binary infaas-onnx rewrites)"
int8_avx2="$(test_binary infaas-executors int8_avx2)"
[[ -x "$rewrites" && -x "$int8_avx2" ]] || die "cannot find the test binaries"

work="$(mktemp -d "${TMPDIR:-/tmp}/infaas-avx2.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT
mkdir -p "$work/bin"
# qemu-user warns about every CPUID bit of the model it cannot emulate: noise.
cat >"$work/bin/python3" <<EOF
#!/usr/bin/env bash
exec 2> >(grep -v "TCG doesn't support requested feature" >&2)
exec qemu-x86_64 -cpu $cpu "$python_exe" "\$@"
EOF
chmod +x "$work/bin/python3"
emulated() {
  qemu-x86_64 -cpu "$cpu" "$@" 2> >(grep -v "TCG doesn't support requested feature" >&2)
}

log "== 1/2 infaas-onnx INT8 tests, ONNX Runtime on an emulated $cpu"
(cd "$INFAAS_ROOT/onnx" && CI=true PATH="$work/bin:$PATH" "$rewrites" quantize)

log "== 2/2 zoo INT8 files: built and run here, then run on an emulated $cpu"
INFAAS_AVX2_DIR="$work/files" CI=true "$int8_avx2" --ignored --exact prepare --nocapture
# The emulated run differs from the native one only when this host takes the VNNI path. On a
# host without VNNI (an AVX2-only AMD EPYC, say) the files were already built and run on the
# saturating AVX2 path, so only agreement is checked.
expect=0
if grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo; then
  expect=1
else
  log "this host has no VNNI: its own run already took the AVX2 path; checking agreement only"
fi
INFAAS_AVX2_DIR="$work/files" INFAAS_AVX2_EXPECT_SATURATION=$expect CI=true \
  emulated "$int8_avx2" --ignored --exact check --nocapture

log "INT8 on an emulated $cpu: passed ($((SECONDS - started)) s)"
