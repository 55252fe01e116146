#!/usr/bin/env bash
# bench_link.sh: the data-parallel cost model against a real, shaped link
# (`make bench-link`; docs/SCALING.md, "Checking the all-reduce model on a
# shaped link"). Root only.
#
# Two network namespaces joined by a veth pair, each end shaped by `tc`
# (tbf for the rate; netem for an added one-way delay, when the kernel has
# it), one rank in each namespace, pinned to its own CPU; the ranks talk TCP
# over the veth pair only. A kernel without netem gets the delay from
# build/delay_line instead (bench/link/delay_line.c): a second link, a pair
# of TUN devices (MTU 65000, each end's egress shaped by the same tbf) whose
# packets a real-time process forwards from one namespace to the other after
# the delay; rows on it are marked `:line`, and it is measured with no added
# delay too, so that its own cost shows apart from the delay's. For every
# link of the grid, every config and every repetition (alternating: the
# whole grid once per repetition):
#
#   1. build/link_allreduce (bench/link/link_allreduce.c, compiled here with
#      mpicc): ITERS timed MPI_Allreduce calls of the config's fp32 gradient
#      (the exact call of dist_grads_sum), each after a barrier, the slowest
#      rank's time, median; plus the small-message one-way latency and the
#      one-way bandwidth of one message of the gradient's size;
#   2. (TRAIN=1) `mpirun -np 2 ./train` itself, TRAIN_STEPS steps, 1 thread
#      per rank, the config's global batch: its own summary line "gradient
#      all-reduce X ms per step" (mean of the steps after the first 2; it
#      includes waiting for the slower rank's backward).
#
# The link's byte counters are read before and after each run: a run whose
# bytes did not cross it stops the script. Then a Markdown
# table (bench/link/bench_link_report.py): measured ms per all-reduce
# (median of the repetitions' medians) against scripts/report/scaling_estimate.py
# for N = 2 at the same rate and the measured one-way latency.
#
# How the two ranks land in two namespaces: mpirun runs inside namespace A
# and takes a hostfile of the two veth addresses; A's address is local to
# it, so rank 0 starts there. For B's address mpirun would ssh; instead
# `--mca plm_rsh_agent` names a small script (written into the work dir)
# that runs the orted command in namespace B (`ip netns exec B taskset -c
# CPU1 sh -c ...`). The orted connects back to mpirun over the veth pair
# (oob_tcp_if_include) and starts rank 1 in B; each rank talks to its own
# local daemon over loopback, which a namespace has of its own. (One mpirun
# starting both ranks through a wrapper `ip netns exec ns$OMPI_COMM_WORLD_RANK`
# does not work: PMIx connects each rank to its daemon over TCP loopback,
# which does not cross namespaces: "OPAL ERROR: Unreachable" in MPI_Init.)
#
# Environment:
#   GRID="1:0 1:0.1 10:0 10:0.1"   links as GBIT:ADDED_DELAY_MS (on each end: one way), and
#                                  GBIT:ADDED_DELAY_MS:line for the delay line; without netem the
#                                  default is "1:0 1:0:line 1:0.1:line 10:0 10:0:line 10:0.1:line"
#   CONFIGS="S M"                  gradient sizes of `make bench`'s configs S and M
#   REPS=3 ITERS=10 WARMUP=2       repetitions of the grid; timed/untimed all-reduces per run
#   TRAIN=1 TRAIN_STEPS=8          also ./train's own figure (TRAIN=0: the all-reduce program only)
#   CPUS="0 1"                     the CPUs of rank 0 and rank 1
#   ALG=                           force Open MPI's tuned allreduce algorithm (coll_tuned_allreduce_algorithm)
#   BURST=128kb TBF_LATENCY=50ms   tbf's bucket and queue (queue = rate x TBF_LATENCY)
#   CC=                            TCP congestion control in the namespaces (default: the kernel's, printed)
#   OUT=FILE                       also write the raw lines and the table to FILE
# A short trial: GRID="1:0" REPS=2 CONFIGS=M TRAIN_STEPS=5.
set -euo pipefail
cd "$(dirname "$0")/../.."   # the repository root: this file is bench/link/NAME.sh

die() { echo "bench_link: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces and tc): sudo make bench-link"
for c in ip tc; do
    command -v $c >/dev/null || die "'$c' is missing: apt-get install -y iproute2"
done
command -v taskset >/dev/null || die "'taskset' is missing: apt-get install -y util-linux"
for c in mpirun mpicc; do
    command -v $c >/dev/null || die "'$c' is missing: apt-get install -y openmpi-bin libopenmpi-dev"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
command -v "$PY" >/dev/null || die "python3 is missing"

CONFIGS=${CONFIGS:-"S M"}
REPS=${REPS:-3}
ITERS=${ITERS:-10}
WARMUP=${WARMUP:-2}
TRAIN=${TRAIN:-1}
TRAIN_STEPS=${TRAIN_STEPS:-8}
read -r CPU0 CPU1 <<<"${CPUS:-0 1}"
BURST=${BURST:-128kb}
TBF_LATENCY=${TBF_LATENCY:-50ms}
[ "$TRAIN_STEPS" -ge 4 ] || die "TRAIN_STEPS must be at least 4 (./train times the steps after the first 2)"

# Gradient sizes: gpt_num_params of configs S and M (bench/util_bench.h, block
# gpt2, tied head, no position table for rope: 12 L C^2 + 13 L C + V C + 2 C),
# as ./train prints them ("1055488 parameters" for S).
declare -A PARAMS=([S]=1055488 [M]=5787648)
declare -A KEYS=(
    [S]="--n_layer=4 --d_model=128 --n_head=4 --block_size=128 --batch_size=16"
    [M]="--n_layer=6 --d_model=256 --n_head=8 --block_size=256 --batch_size=4"
)   # batch per rank: the config's global batch (S 32, M 8) over 2 ranks
declare -A VOCAB=([S]=2048 [M]=4096)
for cfg in $CONFIGS; do [ -n "${PARAMS[$cfg]:-}" ] || die "unknown config '$cfg' (S or M)"; done

# ---- the programs
mkdir -p build
prog=build/link_allreduce
if [ ! -x $prog ] || [ bench/link/link_allreduce.c -nt $prog ]; then
    mpicc -O2 -std=c11 -Wall -Wextra -o $prog bench/link/link_allreduce.c || die "mpicc failed on bench/link/link_allreduce.c"
fi
if [ "$TRAIN" = 1 ]; then
    [ -x ./train ] || die "./train is not built (make train), or run with TRAIN=0"
    [ -f data/kjv.txt ] || bash scripts/run/get_data.sh
    for cfg in $CONFIGS; do
        d=build/bench_mpi/v${VOCAB[$cfg]}
        if [ ! -f $d/train.bin ]; then
            mkdir -p $d
            ./prepare --vocab-size ${VOCAB[$cfg]} --out-dir $d data/kjv.txt >/dev/null
        fi
    done
fi

# ---- the namespaces (names carry this process's id: several runs cannot collide)
NSA=rlink$$a NSB=rlink$$b DEVA=rl$$a DEVB=rl$$b
IPA=10.78.0.1 IPB=10.78.0.2 NET=10.78.0.0/24
TUNA=rl$$ta TUNB=rl$$tb LIPA=10.79.0.1 LIPB=10.79.0.2 LNET=10.79.0.0/24 LINE_MTU=${LINE_MTU:-65000}   # the delay line
work=$(mktemp -d)
line_pid=
cleanup() {
    [ -n "$line_pid" ] && kill "$line_pid" 2>/dev/null || true
    ip netns del $NSA 2>/dev/null || true   # deleting a namespace deletes its end of the veth pair, and the pair
    ip netns del $NSB 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add $NSA && ip netns add $NSB || die "ip netns add failed (no network namespaces in this kernel or container?)"
ip link add $DEVA type veth peer name $DEVB || die "ip link add ... type veth failed (no veth in this kernel?)"
ip link set $DEVA netns $NSA
ip link set $DEVB netns $NSB
ip -n $NSA addr add $IPA/24 dev $DEVA
ip -n $NSB addr add $IPB/24 dev $DEVB
for ns in $NSA $NSB; do ip -n $ns link set lo up; done
if [ -n "${CC:-}" ]; then
    for ns in $NSA $NSB; do
        ip netns exec $ns sysctl -qw net.ipv4.tcp_congestion_control="$CC" ||
            die "TCP congestion control '$CC' is not available (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
    done
fi
CC_USED=$(ip netns exec $NSA cat /proc/sys/net/ipv4/tcp_congestion_control)
ip -n $NSA link set $DEVA up
ip -n $NSB link set $DEVB up

have_netem=1
if ! ip netns exec $NSA tc qdisc replace dev $DEVA root netem delay 0.1ms 2>/dev/null; then have_netem=0; fi
ip netns exec $NSA tc qdisc del dev $DEVA root 2>/dev/null || true
if [ $have_netem = 1 ]; then GRID=${GRID:-"1:0 1:0.1 10:0 10:0.1"}
else GRID=${GRID:-"1:0 1:0:line 1:0.1:line 10:0 10:0:line 10:0.1:line"}; fi
if [[ " $GRID" == *:line* ]]; then
    command -v chrt >/dev/null || die "'chrt' is missing: apt-get install -y util-linux"
    line_prog=build/delay_line
    if [ ! -x $line_prog ] || [ bench/link/delay_line.c -nt $line_prog ]; then
        ${CC_PROG:-cc} -O2 -std=c11 -Wall -Wextra -o $line_prog bench/link/delay_line.c ||
            die "cc failed on bench/link/delay_line.c"
    fi
fi

# line_up DELAY_MS / line_down: the delay line's TUN pair, TUNA in A and TUNB in B (each
# a point-to-point address on LNET), forwarded by build/delay_line at real-time priority
# on rank 1's CPU (it must preempt the spinning rank to keep its delay).
line_up() {
    local us
    us=$(awk -v d="$1" 'BEGIN{printf "%.3f", d * 1000}')
    coproc LINE { exec taskset -c ${LINE_CPU:-$CPU1} chrt -f 50 build/delay_line $NSA $TUNA $NSB $TUNB "$us" 2>"$work/line.err"; }
    line_pid=$LINE_PID
    local ready=
    read -r -t 5 ready <&"${LINE[0]}" || true
    [ "$ready" = ready ] || { cat "$work/line.err" >&2; die "build/delay_line did not start (output above)"; }
    ip -n $NSA addr add $LIPA peer $LIPB dev $TUNA
    ip -n $NSB addr add $LIPB peer $LIPA dev $TUNB
    ip -n $NSA link set $TUNA mtu $LINE_MTU up
    ip -n $NSB link set $TUNB mtu $LINE_MTU up
}
line_down() {
    [ -n "$line_pid" ] || return 0
    kill "$line_pid" 2>/dev/null || true
    wait "$line_pid" 2>/dev/null || true
    line_pid=
    sed 's/^/  /' "$work/line.err"
}

# shape GBIT DELAY_MS KIND: the same qdisc on both ends (each direction is shaped
# once, by its sender): tbf at the rate; with a delay on veth, netem at the root and
# the tbf under it (netem holds each packet DELAY_MS, then tbf paces it); on the
# line, the tbf alone (the delay line holds each packet after it).
shape() {
    local g=$1 d=$2 kind=$3 ns dev
    for pair in "$NSA $(dev_a $kind)" "$NSB $(dev_b $kind)"; do
        read -r ns dev <<<"$pair"
        ip netns exec $ns tc qdisc del dev $dev root 2>/dev/null || true
        if [ $kind = veth ] && awk -v d="$d" 'BEGIN{exit !(d > 0)}'; then
            ip netns exec $ns tc qdisc add dev $dev root handle 1: netem delay ${d}ms limit 100000
            ip netns exec $ns tc qdisc add dev $dev parent 1:1 handle 10: tbf rate ${g}gbit burst $BURST latency $TBF_LATENCY
        else
            ip netns exec $ns tc qdisc add dev $dev root handle 10: tbf rate ${g}gbit burst $BURST latency $TBF_LATENCY
        fi
    done
}
dev_a() { [ "$1" = line ] && echo $TUNA || echo $DEVA; }
dev_b() { [ "$1" = line ] && echo $TUNB || echo $DEVB; }
# counters KIND: "TX_A TX_B DROPS RETRANS" (bytes sent by each end; packets dropped by the qdiscs of
# both ends; TCP segments retransmitted in both namespaces)
counters() {
    local a b drops re da db
    da=$(dev_a $1) db=$(dev_b $1)
    a=$(ip netns exec $NSA cat /sys/class/net/$da/statistics/tx_bytes)
    b=$(ip netns exec $NSB cat /sys/class/net/$db/statistics/tx_bytes)
    drops=$( (ip netns exec $NSA tc -s qdisc show dev $da; ip netns exec $NSB tc -s qdisc show dev $db) |
             sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')
    re=$( (ip netns exec $NSA cat /proc/net/snmp; ip netns exec $NSB cat /proc/net/snmp) |
          awk '$1 == "Tcp:" && $2 != "RtoAlgorithm" {s += $13} END {print s + 0}')
    echo "$a $b $drops $re"
}

# The rsh agent: "AGENT HOST COMMAND...": the orted of HOST in HOST's namespace, on rank 1's CPU.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
    $IPB|$LIPB) exec ip netns exec $NSB taskset -c $CPU1 sh -c "\$*" ;;
    $IPA|$LIPA) exec ip netns exec $NSA taskset -c $CPU0 sh -c "\$*" ;;
esac
echo "bench_link agent: unknown host \$host" >&2; exit 1
EOF
chmod +x "$work/agent"
printf '%s slots=1\n%s slots=1\n' $IPA $IPB >"$work/hosts"
printf '%s slots=1\n%s slots=1\n' $LIPA $LIPB >"$work/hosts.line"
# mpirun_for KIND: MPIRUN, the mpirun command whose ranks talk over that link (veth or line)
mpirun_for() {
    local hosts=$work/hosts net=$NET
    [ "$1" = line ] && hosts=$work/hosts.line net=$LNET
    MPIRUN=(ip netns exec $NSA taskset -c $CPU0 mpirun --allow-run-as-root -np 2 --bind-to none
            --hostfile "$hosts" --mca plm_rsh_agent "$work/agent"
            --mca btl tcp,self --mca btl_tcp_if_include $net --mca oob_tcp_if_include $net)
    [ -n "${ALG:-}" ] && MPIRUN+=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm "$ALG")
    return 0
}
mpirun_for veth

# Check once, unshaped: rank 0 in A, rank 1 in B, each on its CPU.
where=$("${MPIRUN[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK: $(ip -br -4 addr | awk "/10\.78/ {print \$1, \$3}"), cpus $(taskset -pc $$ | sed "s/.*: //")"' 2>"$work/err" | sort) ||
    { cat "$work/err" >&2; die "mpirun across the two namespaces failed (output above)"; }
[ "$(grep -c 10.78.0 <<<"$where")" = 2 ] && ! grep -q "$IPA" <<<"$(grep 'rank 1' <<<"$where")" ||
    die "the ranks did not land in the two namespaces: $where"

raw=$work/raw
echo "# ropelab all-reduce over a shaped veth pair ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo "$(mpirun --version | head -1); btl tcp over veth ($NET), rank 0 on CPU $CPU0, rank 1 on CPU $CPU1 (taskset, --bind-to none), TCP $CC_USED${ALG:+; allreduce algorithm forced to $ALG}"
echo "$where" | sed 's/^/  /'
echo "shaping: tbf rate R burst $BURST latency $TBF_LATENCY on each end's egress; added delay: $([ $have_netem = 1 ] && echo "netem (root, tbf under it)" || echo "netem is NOT in this kernel: veth rows with a delay are skipped")"
[[ " $GRID" == *:line* ]] && echo "delay line (':line' rows): TUN pair $LNET, MTU $LINE_MTU, tbf as above on each end, build/delay_line (bench/link/delay_line.c) at SCHED_FIFO 50 on CPU $CPU1 holds each packet the added delay"
echo "measured: build/link_allreduce, $ITERS timed MPI_Allreduce of the fp32 gradient after $WARMUP untimed, each after a barrier,"
echo "  slowest rank; median per run, then median of $REPS repetitions$([ "$TRAIN" = 1 ] && echo "; and ./train's own 'gradient all-reduce ms per step' ($TRAIN_STEPS steps, 1 thread per rank)")"
echo

for rep in $(seq "$REPS"); do
    for link in $GRID; do
        IFS=: read -r g d kind extra <<<"$link"
        kind=${kind:-veth}
        [ -n "$g" ] && [ -n "$d" ] && [ -z "$extra" ] && { [ $kind = veth ] || [ $kind = line ]; } ||
            die "GRID entry '$link' is not GBIT:DELAY_MS or GBIT:DELAY_MS:line"
        if [ $kind = veth ] && awk -v d="$d" 'BEGIN{exit !(d > 0)}' && [ $have_netem = 0 ]; then
            [ "$rep" = 1 ] && echo "skipped: $g Gbit/s + $d ms on veth (netem is not in this kernel: CONFIG_NET_SCH_NETEM; the ':line' rows add the delay)"
            continue
        fi
        [ $kind = line ] && line_up "$d"
        mpirun_for $kind
        shape "$g" "$d" $kind
        for cfg in $CONFIGS; do
            p=${PARAMS[$cfg]}
            read -r a0 b0 x0 r0 <<<"$(counters $kind)"
            line=$("${MPIRUN[@]}" $prog --floats "$p" --iters "$ITERS" --warmup "$WARMUP" 2>"$work/err") ||
                { cat "$work/err" >&2; die "the all-reduce run failed at $g Gbit/s, $d ms ($kind), config $cfg"; }
            read -r a1 b1 x1 r1 <<<"$(counters $kind)"
            # each rank sends at least the gradient per all-reduce (any algorithm, 2 ranks), rank 0 four more for the one-way test
            need=$(( (ITERS + WARMUP) * p * 4 ))
            [ $((a1 - a0)) -ge $need ] && [ $((b1 - b0)) -ge $need ] ||
                die "the bytes did not cross the $kind link ($((a1 - a0)) and $((b1 - b0)) sent, >= $need each expected)"
            out="rep=$rep config=$cfg gbit=$g delay_ms=$d link=$kind params=$p ${line#link_allreduce } link_mb=$(( (a1 - a0 + b1 - b0) / 1000000 )) drops=$((x1 - x0)) retrans=$((r1 - r0))"
            if [ "$TRAIN" = 1 ]; then
                dv=build/bench_mpi/v${VOCAB[$cfg]}
                read -r a0 b0 x0 r0 <<<"$(counters $kind)"
                "${MPIRUN[@]}" ./train configs/small.ini ${KEYS[$cfg]} --threads=1 --grad_accum=1 \
                    --tokenizer=$dv/tokenizer.bin --train_file=$dv/train.bin --val_file=$dv/val.bin \
                    --steps="$TRAIN_STEPS" --eval_every=0 --eval_batches=1 --save_every=0 \
                    --out_dir="$work/run" --overwrite >/dev/null 2>"$work/err" ||
                    { cat "$work/err" >&2; die "mpirun ./train failed at $g Gbit/s, $d ms, config $cfg"; }
                read -r a1 b1 x1 r1 <<<"$(counters $kind)"
                s=$(grep '^mpi: .*gradient all-reduce' "$work/err" || true)
                [ -n "$s" ] || { cat "$work/err" >&2; die "no 'gradient all-reduce' line from ./train"; }
                [ $((a1 - a0)) -ge $((TRAIN_STEPS * p * 4)) ] || die "./train's bytes did not cross the $kind link"
                out="$out train_allreduce_ms=$(sed -n 's/.*all-reduce \([0-9.]*\) ms per step.*/\1/p' <<<"$s") train_step_ms=$(sed -n 's/.*of the step (\([0-9.]*\) ms.*/\1/p' <<<"$s") train_drops=$((x1 - x0)) train_retrans=$((r1 - r0))"
            fi
            echo "$out" | tee -a "$raw"
        done
        [ $kind = line ] && line_down
    done
done
[ -s "$raw" ] || die "nothing was measured (every row skipped?)"
echo
echo "load $(cut -d' ' -f1-3 /proc/loadavg) at end"
echo
"$PY" bench/link/bench_link_report.py "$raw"
if [ -n "${OUT:-}" ]; then
    { cat "$raw"; echo; "$PY" bench/link/bench_link_report.py "$raw"; } >"$OUT"
fi
