# GPU checks, fifth call (issue 43: what checks_1-4 left open), about 5 minutes on the lent machine:
#   bash benchmarks/gpu/prepare.sh   # here, once; then on the GPU machine, carrying .whl and .deb:
#   bash benchmarks/gpu/checks_5.sh; bash benchmarks/gpu/checks_6.sh   # (two calls, each under 10 minutes)
# Timed runs only, one at a time, nothing beside them: the CUPTI collector's cost at batch 1, three alternating
# pairs (goal: median steady-epoch ratio <= 1.15), and at batch 100 (<= 1.03); CUPTI's CUDA API shares beside an
# nsys run of the same settings (goal: within 1 point for every call above 1 %).
# Dry run on the development machine: LOCAL=1 DEV=cpu LIMIT=200 LIMIT1=30 bash benchmarks/gpu/checks_5.sh
. benchmarks/gpu/env.sh
OUT=${OUT:-/tmp/out}; R=/tmp/runs5; mkdir -p $OUT $R; L=$OUT/log5.txt; DEV=${DEV:-gpu}; E=${EPOCHS:-2}
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1; nproc; uptime; } > $L 2>&1
timeout 200 $T data make big > /tmp/data_make5.txt 2>&1
p() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 120 $T profile --device $DEV --workers 8 --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
B1="--framework pytorch --case SimpleBig --batch 1 --limit ${LIMIT1:-1500} --epochs $E"
B100="--framework pytorch --case SimpleBig --batch 100 --limit ${LIMIT:-3000} --epochs $E"
for i in 1 2 3; do p b1-none-$i $B1; p b1-cupti-$i $B1 --trace cupti; done
p b100-none $B100; p b100-cupti $B100 --trace cupti; p b100-nsys $B100 --trace nsys
echo "=== api shares, steady (nsys, cupti)" >> $L
timeout 60 ${T% -m tracer} benchmarks/gpu/api_shares.py $R/b100-nsys/* $R/b100-cupti/* >> $L 2>&1
find $R -path '*/raw/*' \( -name '*.nsys-rep' -o -name '*.qdstrm' -o -name 'trace.arrow' -o -name '*.sqlite' -o -name 'buf-*.bin' \) -delete
tar czf $OUT/runs5.tar.gz -C $R .
grep -E "^===|steady\)|status |largest|^\| cu|records" $L | cut -c1-160 | tail -70
