#!/usr/bin/env bash
# Runs every Holdfast test group, each under its own named permission set from deno.json, and
# ends with the totals on a line of their own: "N passed, N failed".
#
#   bash scripts/test.sh          everything: gates (fmt, lint, types), build, unit, redis,
#                                 bpf, netns, e2e, bench, kube, k8s, hygiene
#   bash scripts/test.sh --ok     the quick gate: fmt, lint, types, unit tests
#   bash scripts/test.sh GROUP…   only the named groups (unit redis bpf netns e2e bench kube k8s hygiene)
#
# The bench group runs every bench:* task of deno.json with --quick (seconds each): a check
# passes when the task exits 0 and its last stdout line is one JSON object.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export NO_COLOR=1
# Marks every process of this run (tests/hygiene/clean_test.ts tells its leftovers by it).
export HF_TEST_RUN="${HF_TEST_RUN:-$$-$(date +%s)}"

passed=0
failed=0
report=()

# Adds a gate (a command that is one check) to the totals.
gate() {
  local name=$1
  shift
  echo "== gate: $name"
  if timeout 900 "$@"; then
    passed=$((passed + 1)); report+=("gate $name: ok")
  else
    failed=$((failed + 1)); report+=("gate $name: FAILED")
  fi
}

# Runs one test group: the *_test.ts files found under the given paths, with permission set $2.
group() {
  local name=$1 perm=$2
  shift 2
  local files
  mapfile -t files < <(find "$@" -name '*_test.ts' -not -path '*/node_modules/*' 2>/dev/null | sort)
  if [[ ${#files[@]} -eq 0 ]]; then
    echo "== group $name: no test files under $*"
    report+=("group $name: no tests")
    return
  fi
  echo "== group $name (${#files[@]} files, -P=$perm)"
  local log rc p f
  log=$(mktemp)
  # The unit group also type-checks and runs the JSDoc examples of every module it covers.
  local targets=("${files[@]}") extra=()
  if [[ $name == unit ]]; then targets=("$@"); extra=(--doc); fi
  timeout 1800 "$DENO" test -P="$perm" --no-prompt "${extra[@]}" "${targets[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local summary
  summary=$(grep -E '^(ok|FAILED) \| [0-9]+ passed' "$log" | tail -1)
  if [[ $summary =~ ([0-9]+)\ passed.*\|\ ([0-9]+)\ failed ]]; then
    p=${BASH_REMATCH[1]}; f=${BASH_REMATCH[2]}
  else
    p=0; f=0
  fi
  # A non-zero exit with no failed test counted (compile error, crash, timeout) is a failure.
  if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
  passed=$((passed + p)); failed=$((failed + f))
  report+=("group $name: $p passed, $f failed")
  rm -f "$log"
}

# Runs every deno.json bench:* task in quick mode; each one is a check in the totals.
bench_group() {
  local tasks
  mapfile -t tasks < <(sed -n 's/^ *"\(bench:[a-z0-9-]*\)": .*/\1/p' deno.json)
  echo "== group bench (${#tasks[@]} tasks, --quick)"
  if [[ $(id -u) -ne 0 && ${CI:-} != true ]]; then
    echo "ignoring group bench: the datapath benchmarks need root (set CI=true to make this a failure)"
    report+=("group bench: ignored (not root)")
    return
  fi
  local t out last p=0 f=0
  for t in "${tasks[@]}"; do
    echo "== bench: $t --quick"
    out=$(mktemp)
    if timeout 300 "$DENO" task -q "$t" --quick | tee "$out" &&
      last=$(grep -v '^[[:space:]]*$' "$out" | tail -1) &&
      "$DENO" eval 'const v = JSON.parse(Deno.args[0]);
        if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not an object");' \
        "$last"; then
      p=$((p + 1)); report+=("bench $t: ok")
    else
      f=$((f + 1)); report+=("bench $t: FAILED (exit non-zero or last stdout line not a JSON object)")
    fi
    rm -f "$out"
  done
  passed=$((passed + p)); failed=$((failed + f))
  report+=("group bench: $p passed, $f failed")
}

run_gates() {
  gate fmt "$DENO" fmt --check
  gate lint "$DENO" lint
  gate types "$DENO" check --quiet .
}

want() { [[ ${#selected[@]} -eq 0 ]] || [[ " ${selected[*]} " == *" $1 "* ]]; }

selected=()
ok_only=0
for arg in "$@"; do
  case "$arg" in
    --ok) ok_only=1 ;;
    -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    -*) echo "Cannot parse test.sh arguments: Unknown option \"$arg\" (see \"./hf test --help\")" >&2; exit 2 ;;
    unit | redis | bpf | netns | e2e | kube | k8s | hygiene | bench) selected+=("$arg") ;;
    *) echo "Cannot parse test.sh arguments: Unknown group \"$arg\" (see \"./hf test --help\")" >&2; exit 2 ;;
  esac
done

if [[ $(id -u) -eq 0 ]]; then "$DENO" run -P=netns lab/sweep.ts || true; fi

if [[ $ok_only -eq 1 ]]; then
  gate build "$DENO" task -q build
  run_gates
  group unit unit lib controller policy-as node k8s bench
else
  if [[ ${#selected[@]} -eq 0 ]]; then run_gates; fi
  gate build "$DENO" task -q build
  want unit && group unit unit lib controller policy-as node k8s bench
  want redis && group redis redis tests/redis
  want bpf && group bpf bpf tests/bpf
  want netns && group netns netns tests/netns
  want e2e && group e2e netns tests/e2e
  want bench && bench_group
  want kube && group kube kube tests/kube
  want k8s && group k8s k8s tests/k8s_manifests # k8s/ manifests; the image build needs root
  want hygiene && group hygiene netns tests/hygiene # last: checks nothing was left behind
fi

echo
printf '%s\n' "${report[@]}"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
