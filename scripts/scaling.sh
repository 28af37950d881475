#!/usr/bin/env bash
# How ordo scales with the cores of one machine, against its peers, in one prepared run that
# writes one key=value file (docs/scaling.md, "Scaling with the cores", lists the keys).
# It runs the existing benchmark drivers (ordo-bench-tasks, ordo-bench-stencil,
# ordo-bench-scale) and the apps under ordorun at 1 to 16 workers, and skips, with a note on
# stderr and a skipped.* key, every count larger than the machine's cores. The full run is sized
# for at most 8 minutes on 16 cores; --quick for a test on 2 cores in well under 3.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
me=scaling.sh

usage() {
  cat <<'EOF'
usage: scripts/scaling.sh [options]
  --out FILE         key=value results (default: scaling-<host>.txt here); the benchmarks'
                     own outputs go to FILE.logs/
  --build-dir DIR    release build folder to build into or reuse (default: build-scaling)
  --no-build         use the binaries in --build-dir as they are
  --quick            small sizes and one repetition (a test on 2 cores)
  --counts LIST      worker / rank counts (default 1,2,4,8,16; each at most the cores)
  --sections LIST    any of topology,metg,tasks,stencil,ranks,scale,numa (default: all)
  --numa MODE        auto (NUMA placement off/on where there are 2+ NUMA nodes), always, never
  --reps N           repetitions per measurement (default 3, --quick 1)
  --timeout S        seconds one benchmark command may take (default 300)
  -h, --help         this text
EOF
}

die_usage() {
  echo "$me: $1" >&2
  echo "$me: run scripts/scaling.sh --help for the options" >&2
  exit 2
}

out="scaling-$(hostname -s 2>/dev/null || echo host).txt"
build_dir="$top/build-scaling"
build=1
quick=0
counts_text="1,2,4,8,16"
sections_text="topology,metg,tasks,stencil,ranks,scale,numa"
numa_mode=auto
reps=""
timeout_s=300

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die_usage "$1 needs a value"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out) need_value "$@"; out=$2; shift 2 ;;
    --build-dir) need_value "$@"; build_dir=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --quick) quick=1; shift ;;
    --counts) need_value "$@"; counts_text=$2; shift 2 ;;
    --sections) need_value "$@"; sections_text=$2; shift 2 ;;
    --numa) need_value "$@"; numa_mode=$2; shift 2 ;;
    --reps) need_value "$@"; reps=$2; shift 2 ;;
    --timeout) need_value "$@"; timeout_s=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die_usage "unknown option '$1'" ;;
  esac
done

is_count() { [[ $1 =~ ^[1-9][0-9]{0,3}$ ]]; }
IFS=, read -r -a counts <<<"$counts_text"
[ ${#counts[@]} -gt 0 ] || die_usage "--counts '$counts_text': give counts such as 1,2,4"
for c in "${counts[@]}"; do
  is_count "$c" || die_usage "--counts '$counts_text': '$c' is not a count from 1 to 9999"
done
IFS=, read -r -a sections <<<"$sections_text"
for s in "${sections[@]}"; do
  case "$s" in
    topology|metg|tasks|stencil|ranks|scale|numa) ;;
    *) die_usage "--sections: unknown section '$s' (topology,metg,tasks,stencil,ranks,scale,numa)" ;;
  esac
done
case "$numa_mode" in auto|always|never) ;; *) die_usage "--numa '$numa_mode': give auto, always or never" ;; esac
[ -z "$reps" ] || is_count "$reps" || die_usage "--reps '$reps': give a count from 1 to 9999"
[ -n "$reps" ] || reps=$([ $quick = 1 ] && echo 1 || echo 3)
is_count "$timeout_s" || die_usage "--timeout '$timeout_s': give seconds from 1 to 9999"
if [ -e "$out" ] && [ ! -f "$out" ]; then
  die_usage "--out '$out' exists and is not a regular file; give a file name"
fi
out_dir=$(dirname "$out")
[ -d "$out_dir" ] && [ -w "$out_dir" ] || die_usage "--out '$out': cannot write in '$out_dir'"

wants() { [[ ",$sections_text," == *",$1,"* ]]; }

# --- Build ---------------------------------------------------------------------------------
targets=(ordo-bench-tasks ordo-bench-metg-mpi ordo-bench-stencil ordo-bench-scale ordorun
         ordo-heat2d ordo-heat3d ordo-omp-heat2d ordo-omp-heat3d ordo-mpi-heat2d ordo-mpi-heat3d)
if [ $build = 1 ]; then
  if [ -f "$build_dir/build.ninja" ]; then
    buildtype=$(meson introspect --buildoptions "$build_dir" |
      python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))')
    [ "$buildtype" = release ] ||
      die_usage "--build-dir '$build_dir' is a $buildtype build; give a release one, or a new folder"
  else
    meson setup "$build_dir" "$top" --buildtype=release >/dev/null
  fi
  meson compile -C "$build_dir" "${targets[@]}" >/dev/null
fi
bin_of() {  # the built binary named $1, or nothing
  find "$build_dir/apps" "$build_dir/tools" -maxdepth 3 -type f -name "$1" -perm -u+x 2>/dev/null | head -n 1
}
for t in ordo-bench-tasks ordo-bench-stencil ordo-bench-scale ordorun ordo-heat2d ordo-heat3d; do
  [ -n "$(bin_of "$t")" ] || die_usage "$t is not built in '$build_dir' (run without --no-build)"
done
bench_tasks=$(bin_of ordo-bench-tasks)
bench_stencil=$(bin_of ordo-bench-stencil)
bench_scale=$(bin_of ordo-bench-scale)
ordorun=$(bin_of ordorun)
heat2d=$(bin_of ordo-heat2d)

# --- Results -------------------------------------------------------------------------------
logs="$out.logs"
rm -rf "$logs"
mkdir -p "$logs"
tmp_out="$out.tmp.$$"
: >"$tmp_out"
trap 'rm -f "$tmp_out"' EXIT
put() { printf '%s=%s\n' "$1" "$2" >>"$tmp_out"; }
note() { echo "$me: $*" >&2; }
skip() {  # key, reason: recorded and said
  put "skipped.$1" "$2"
  note "skipped $1: $2"
}
# Runs a benchmark command with a time limit, its output into logs/$1; the status is returned.
run_logged() {
  local name=$1
  shift
  echo "+ $*" >"$logs/$name"
  local rc=0
  timeout --kill-after=10 "$timeout_s" "$@" >>"$logs/$name" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    note "$name: exit $rc; the last lines of $logs/$name:"
    tail -n 5 "$logs/$name" >&2
  fi
  return $rc
}
# The value of key $2 on the first line of log $1 that has every field given after it
# ("bench=tasks", "system=ordo", ...), or nothing.
field() {
  local log=$1 key=$2
  shift 2
  awk -v key="$key" -v want="$*" '
    BEGIN { n = split(want, w, " ") }
    /^#/ { next }
    {
      for (i = 1; i <= n; ++i) if (index(" " $0 " ", " " w[i] " ") == 0) next
      for (i = 1; i <= NF; ++i) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit }
    }' "$logs/$log"
}
ratio() {  # a / b with 3 decimals, or nan
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a == "" || b == "" || a !~ /^[0-9.e+-]+$/ || b !~ /^[0-9.e+-]+$/ || b + 0 <= 0 || a + 0 <= 0)
      print "nan"; else printf "%.3f\n", a / b }'
}

cores=$(hwloc-calc --number-of core machine:0 2>/dev/null || nproc)
pus=$(hwloc-calc --number-of pu machine:0 2>/dev/null || nproc)
numa_nodes=$(hwloc-calc --number-of numanode machine:0 2>/dev/null || echo 1)
start=$(date +%s)
put run.mode "$([ $quick = 1 ] && echo quick || echo full)"
put run.date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
put run.commit "$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)"
put run.reps "$reps"
put host.name "$(hostname -s 2>/dev/null || echo unknown)"
put host.cores "$cores"
put host.pus "$pus"
put host.numa_nodes "$numa_nodes"
put host.load_at_start "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)"

# The counts this machine can run without sharing a core; the others are skipped, said so.
usable=()
for c in "${counts[@]}"; do
  if [ "$c" -le "$cores" ]; then usable+=("$c"); else skip "count.$c" "more than the $cores core(s) of this machine"; fi
done
[ ${#usable[@]} -gt 0 ] || die_usage "--counts '$counts_text': none fits the $cores core(s) here"
largest=${usable[-1]}
for c in "${usable[@]}"; do [ "$c" -le "$largest" ] || largest=$c; done

# Same footing for the peers: ordo binds its workers one per core, spread over the machine
# (docs/scheduler.md); OpenMP and Open MPI are asked to do the same unless the caller chose.
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-cores}
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-core}
put env.OMP_PROC_BIND "$OMP_PROC_BIND"
put env.OMP_PLACES "$OMP_PLACES"
put env.OMPI_MCA_hwloc_base_binding_policy "$OMPI_MCA_hwloc_base_binding_policy"

# Sizes: the full run's are the issue's (heat2d 8192^2, heat3d 512^3); --quick shrinks them.
if [ $quick = 1 ]; then
  metg_flags=(--metg-steps 100)
  tasks_flags=(--quick --budget 2)
  heat2d_size=1024x1024 heat3d_size=96x96x96 stencil_iters=8
  ranks_size=1024x1024 ranks_iters=10
  scale_iters=500
else
  metg_flags=(--metg-steps 500)  # of 2^16 down to 1 iterations per task
  # --quick sizes (10^5 independent tasks, 10^4 chained, 64 x 100 stencil1d): at the default
  # sizes libgomp's dependence tracking takes about a minute per stencil1d run.
  tasks_flags=(--quick --budget 4)
  heat2d_size=8192x8192 heat3d_size=512x512x512 stencil_iters=16
  ranks_size=8192x8192 ranks_iters=16
  scale_iters=200
fi

# --- Topology ------------------------------------------------------------------------------
if wants topology; then
  lstopo-no-graphics --of console --no-io >"$logs/topology" 2>&1 || true
  put topology.lstopo "$(sed 's/^ *//' "$logs/topology" | paste -sd'|' -)"
  put topology.l3_per_package "$(hwloc-calc --number-of l3cache machine:0 2>/dev/null || echo unknown)"
fi

# --- METG: ordo against non-blocking MPI and OpenMP tasks at 2, 4, 8, 16 workers -----------
if wants metg; then
  for w in "${usable[@]}"; do
    [ "$w" -ge 2 ] || continue
    log=metg.w$w
    run_logged $log "$bench_tasks" --metg --metg-width "$w" "${metg_flags[@]}" --reps "$reps" ||
      true
    for s in ordo mpi omp; do
      v=$(field $log metg_us bench=metg system=$s)
      put "metg.w$w.${s}_us" "${v:-nan}"
    done
    put "metg.w$w.ordo_vs_mpi" "$(field $log ordo_vs_mpi bench=metg)"
    put "metg.w$w.ordo_vs_omp" "$(field $log ordo_vs_omp bench=metg)"
    put "metg.w$w.peak_gflops" "$(sed -n 's/^# peak: .*: \([0-9.]*\) GFLOP\/s$/\1/p' "$logs/$log" | head -n 1)"
  done
fi

# --- Task overhead: chain, stencil1d, independent against oneTBB, StarPU, OpenMP -----------
if wants tasks; then
  log=tasks
  run_logged $log "$bench_tasks" "${tasks_flags[@]}" --reps "$reps" \
    --threads "$(IFS=,; echo "${usable[*]}")" --systems ordo,omp,tbb,starpu || true
  for p in independent chain stencil1d; do
    for t in "${usable[@]}"; do
      own=$(field $log ns_per_task bench=tasks system=ordo pattern=$p threads=$t)
      put "tasks.$p.t$t.ordo_ns" "${own:-nan}"
      for s in omp tbb starpu; do
        v=$(field $log ns_per_task bench=tasks system=$s pattern=$p threads=$t)
        put "tasks.$p.t$t.${s}_ns" "${v:-nan}"
        put "tasks.$p.t$t.ordo_vs_$s" "$(ratio "$own" "$v")"
      done
    done
    put "tasks.$p.ordo_vs_best_peer" "$(field $log ordo_vs_best_peer bench=tasks pattern=$p)"
  done
fi

# --- Stencils: heat2d and heat3d, depth 1 and --tb 8, against OpenMP, MPI and STREAM --------
if wants stencil; then
  for app in heat2d heat3d; do
    size=$([ $app = heat2d ] && echo $heat2d_size || echo $heat3d_size)
    one=""
    for w in "${usable[@]}"; do
      log=stencil.$app.w$w
      run_logged $log "$bench_stencil" --app $app --size "$size" --iters "$stencil_iters" \
        --workers "$w" --tb 8 --reps "$reps" --timeout "$timeout_s" || true
      k=stencil.$app.w$w
      for s in ordo openmp mpi; do
        v=$(field $log gstencils bench=stencil app=$app system=$s)
        put "$k.${s}_gst" "${v:-nan}"
      done
      tb=$(field $log gstencils bench=stencil app=$app system=ordo-tb)
      put "$k.ordo_tb8_gst" "${tb:-nan}"
      put "$k.triad_gbs" "$(field $log gbytes_per_s bench=stencil app=$app system=triad)"
      bound=$(field $log bound_gstencils bench=stencil app=$app system=triad)
      put "$k.bound_gst" "${bound:-nan}"
      put "$k.ordo_fraction_of_stream" "$(field $log bandwidth_fraction bench=stencil app=$app)"
      put "$k.ordo_tb8_fraction_of_stream" "$(ratio "$tb" "$bound")"
      own=$(field $log gstencils bench=stencil app=$app system=ordo)
      for s in openmp mpi; do
        v=$(field $log gstencils bench=stencil app=$app system=$s)
        put "$k.ordo_vs_$s" "$(ratio "$own" "$v")"
        put "$k.ordo_tb8_vs_$s" "$(ratio "$tb" "$v")"
      done
      [ "$w" != 1 ] || one=$own
      [ -z "$one" ] || put "$k.ordo_speedup" "$(ratio "$own" "$one")"
    done
  done
fi

# --- Ranks against threads: heat2d as P x 1, sqrt(P) x sqrt(P), 1 x P (ordorun gives the
# ranks of one host disjoint shares of its cores) ------------------------------------------
if wants ranks; then
  p=1
  while [ $((p * 2)) -le "$largest" ] && [ $((p * 2)) -le 16 ]; do p=$((p * 2)); done
  [ "$p" = 16 ] || note "ranks against threads at $p cores (16x1, 4x4, 1x16 need 16 cores)"
  layouts="${p}x1"
  q=1
  while [ $((q * q)) -lt "$p" ]; do q=$((q + 1)); done
  [ $((q * q)) != "$p" ] || [ "$q" = 1 ] || [ "$q" = "$p" ] || layouts="$layouts ${q}x${q}"
  [ "$p" = 1 ] || layouts="$layouts 1x${p}"
  put ranks.cores "$p"
  put ranks.layouts "$(echo "$layouts" | tr ' ' ,)"
  for rep in $(seq "$reps"); do
    for l in $layouts; do
      r=${l%x*} w=${l#*x}
      log=ranks.r${r}x$w.$rep
      run_logged $log "$ordorun" --timeout "$timeout_s" -n "$r" "$heat2d" --size "$ranks_size" \
        --blocks "${p}x2" --iters "$ranks_iters" --workers "$w" || true
    done
  done
  declare -A layout_gst=()
  for l in $layouts; do
    r=${l%x*} w=${l#*x}
    best=$(for rep in $(seq "$reps"); do field ranks.r${r}x$w.$rep gstencils app=heat2d; done |
      sort -g | tail -n 1)
    put "ranks.heat2d.r${r}x$w.gst" "${best:-nan}"
    layout_gst[$l]=${best:-}
  done
  if [ "$p" -gt 1 ]; then
    put "ranks.heat2d.r${p}x1_vs_r1x$p" "$(ratio "${layout_gst[${p}x1]}" "${layout_gst[1x$p]}")"
  fi
fi

# --- ordo-bench-scale: tiny heat2d blocks, 2..16 ranks, one core each, against MPI ---------
if wants scale; then
  scale_counts=()
  for c in "${usable[@]}"; do [ "$c" -lt 2 ] || scale_counts+=("$c"); done
  if [ ${#scale_counts[@]} = 0 ]; then
    skip scale "needs at least 2 cores"
  else
    log=scale
    run_logged $log "$bench_scale" --ranks "$(IFS=,; echo "${scale_counts[*]}")" \
      --reps "$reps" --iters "$scale_iters" --timeout "$timeout_s" || true
    for n in "${scale_counts[@]}"; do
      for k in run_seconds mpi_run_seconds ordo_vs_mpi startup_seconds control_messages_per_rank_per_run; do
        v=$(field $log $k ranks=$n)
        put "scale.r$n.$k" "${v:-nan}"
      done
    done
  fi
fi

# --- NUMA placement off and on (ORDO_NUMA_PLACEMENT), heat2d and heat3d on every core -------
if wants numa; then
  if [ "$numa_mode" = never ] || { [ "$numa_mode" = auto ] && [ "$numa_nodes" -lt 2 ]; }; then
    skip numa "$([ "$numa_mode" = never ] && echo "--numa never" || echo "one NUMA node here")"
  else
    for app in heat2d heat3d; do
      size=$([ $app = heat2d ] && echo $heat2d_size || echo $heat3d_size)
      exe=$(bin_of ordo-$app)
      for rep in $(seq "$reps"); do
        for mode in off on; do  # alternated, so that a drifting load favours neither
          run_logged numa.$app.$mode.$rep env ORDO_NUMA_PLACEMENT=$mode "$exe" --size "$size" \
            --iters "$stencil_iters" --workers "$largest" || true
        done
      done
      declare -A numa_gst=()
      for mode in off on; do
        best=$(for rep in $(seq "$reps"); do field numa.$app.$mode.$rep gstencils app=$app; done |
          sort -g | tail -n 1)
        put "numa.$app.placement_${mode}_gst" "${best:-nan}"
        numa_gst[$mode]=${best:-}
      done
      put "numa.$app.on_vs_off" "$(ratio "${numa_gst[on]}" "${numa_gst[off]}")"
      put "numa.$app.workers" "$largest"
    done
  fi
fi

put host.load_at_end "$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)"
put run.seconds "$(($(date +%s) - start))"
mv -f "$tmp_out" "$out"
trap - EXIT
note "wrote $out ($(wc -l <"$out") keys; the benchmarks' outputs in $logs/)"
