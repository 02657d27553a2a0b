#!/bin/bash
# usage: run.sh TAG  -> callgrind + dhat at N1=2000,N2=12000 on tmpfs
set -e
TAG=$1; shift; B=${B:-/work/target-bench/release/examples/commit_cost}; O=/work/cc-out/$TAG; mkdir -p $O
for n in 2000 12000; do
  valgrind --tool=callgrind --callgrind-out-file=$O/cg.$n $B --appends $n --dir /dev/shm/cc "$@" > $O/cg.$n.stdout 2> $O/cg.$n.stderr &
  valgrind --tool=dhat --dhat-out-file=$O/dhat.$n $B --appends $n --dir /dev/shm/cc "$@" > $O/dhat.$n.stdout 2> $O/dhat.$n.stderr &
done
wait
i1=$(grep -m1 '^summary:\|^totals:' $O/cg.2000 | awk '{print $2}'); i2=$(grep -m1 '^summary:\|^totals:' $O/cg.12000 | awk '{print $2}')
b1=$(grep 'Total:' $O/dhat.2000.stderr | head -1); b2=$(grep 'Total:' $O/dhat.12000.stderr | head -1)
echo "instr: $i1 $i2 per-commit $(( (i2-i1)/10000 ))"
ab() { grep 'Total:' $1 | head -1 | sed 's/,//g' | awk '{print $3, $6}'; }
read by1 bl1 < <(ab $O/dhat.2000.stderr); read by2 bl2 < <(ab $O/dhat.12000.stderr)
echo "allocs per commit $(( (bl2-bl1)/10000 )) bytes per commit $(( (by2-by1)/10000 ))"
