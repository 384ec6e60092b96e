# GPU checks, second call: JAX (grain installed into the machine's own Python, which the worker runs
# directly), the loaders alone at 8 and 15 workers, a third CUPTI batch-1 pair. Same carry as checks_1.sh.
. benchmarks/gpu/env.sh
python3 -m pip install -q --no-index --no-deps --no-compile .whl/grain-*.whl .whl/array_record-*.whl .whl/portpicker-*.whl \
  .whl/importlib_resources-*.whl > /dev/null 2>&1 || echo "grain did not install"
OUT=${OUT:-/tmp/out}; R=/tmp/runs; mkdir -p $OUT $R; L=$OUT/log2.txt; DEV=${DEV:-gpu}; E=${EPOCHS:-2}
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; uptime; } > $L 2>&1
timeout 200 $T data make big >> $L 2>&1
p() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 100 $T profile --device $DEV --workers 8 --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
p jax-SimpleBig-files --framework jax --case SimpleBig --batch 100 --limit ${LIMIT:-3000} --epochs 3
p jax-SimpleBig-synthetic --framework jax --case SimpleBig --batch 100 --limit ${LIMIT:-3000} --epochs 3 --data synthetic
p b1-none-3 --framework pytorch --case SimpleBig --batch 1 --limit ${LIMIT1:-1500} --epochs $E
p b1-cupti-3 --framework pytorch --case SimpleBig --batch 1 --limit ${LIMIT1:-1500} --epochs $E --trace cupti
timeout 100 ${T% -m tracer} benchmarks/loader_sweep.py --frameworks pytorch jax --workers 8 15 --dataset big --limit ${LIMIT:-2000} \
  --epochs 2 --json $OUT/loader_sweep.json > $OUT/loader_sweep.txt 2>&1
find $R -path '*/raw/*' \( -name '*.nsys-rep' -o -name '*.qdstrm' -o -name 'trace.arrow' -o -name '*.sqlite' -o -name 'buf-*.bin' \) -delete
tar czf $OUT/runs_jax.tar.gz -C $R $(cd $R && ls -d jax-*)
grep -E "^===|steady\)|status " $L | cut -c1-150; tail -8 $OUT/loader_sweep.txt
