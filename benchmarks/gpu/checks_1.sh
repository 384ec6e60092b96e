# GPU checks in one call (issue 43): `bash benchmarks/gpu/checks_1.sh` on the lent machine, carrying .whl and
# .deb (see env.sh). Each stage writes under $OUT as it ends, so a call cut short keeps what it measured.
. benchmarks/gpu/env.sh
OUT=${OUT:-/tmp/out}; R=/tmp/runs; mkdir -p $OUT $R
DEV=${DEV:-gpu}; E=${EPOCHS:-2}
L=$OUT/log.txt  # at most 8 files come back: one log, the pytest and CUPTI outputs, two tarballs of run folders
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; uptime; } > $L 2>&1
# In parallel first (none of them is timed against another): the big set, the GPU-only tests, CUPTI buffers.
( timeout 200 $T data make big > /tmp/data_make.txt 2>&1 ) &
( timeout 200 ${T% -m tracer} -m pytest -q -m gpu -p no:cacheprovider tests/tracer/measure/tracing/test_cupti.py \
  tests/tracer/measure/tracing/test_nsys.py tests/tracer/measure/tracing/test_torch_profiler.py tests/tracer/worker/test_decode_capacity.py \
  tests/tracer/measure/tracing/test_cupti_decode.py > $OUT/pytest_gpu.txt 2>&1 ) &
timeout 170 ${T% -m tracer} scripts/cupti_record.py /tmp/cupti > $OUT/cupti_record.txt 2>&1
tar czf $OUT/cupti.tar.gz -C /tmp cupti
wait; tail -4 $OUT/pytest_gpu.txt; tail -2 /tmp/data_make.txt >> $L; tail -15 $OUT/cupti_record.txt
# Then one run at a time. p NAME ARGS: a run whose summary goes to $OUT/NAME.txt
p() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 120 $T profile --device $DEV --workers 8 --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
# CUPTI at batch 1 (AlexNet, 1,500 images), untraced and traced alternating
for i in 1 2; do
  p b1-none-$i --framework pytorch --case SimpleBig --batch 1 --limit ${LIMIT1:-1500} --epochs $E
  p b1-cupti-$i --framework pytorch --case SimpleBig --batch 1 --limit ${LIMIT1:-1500} --epochs $E --trace cupti
done
# Table 2 at batch 100 and the data modes beside the compute ceilings; CUPTI at batch 100
for case in SimpleBig ComplexSmall; do for mode in files synthetic; do
  p b100-$case-$mode --framework pytorch --case $case --batch 100 --limit ${LIMIT:-3000} --epochs $E --data $mode
done; done
p b100-SimpleBig-cupti --framework pytorch --case SimpleBig --batch 100 --limit ${LIMIT:-3000} --epochs $E --trace cupti
p jax-SimpleBig-files --framework jax --case SimpleBig --batch 100 --limit ${LIMIT:-3000} --epochs $E
for d in $R/*; do $T runs $d >> $L 2>&1; done
find $R -path '*/raw/*' \( -name '*.nsys-rep' -o -name '*.qdstrm' -o -name 'trace.arrow' -o -name '*.sqlite' -o -name 'buf-*.bin' \) -delete
tar czf $OUT/runs_b1.tar.gz -C $R $(cd $R && ls -d b1-*); tar czf $OUT/runs_b100.tar.gz -C $R $(cd $R && ls -d b100-* jax-*)
ls -la $OUT; grep -E "^===|steady|images/s|status" $L | cut -c1-150 | tail -60
