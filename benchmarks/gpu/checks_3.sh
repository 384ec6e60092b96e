# GPU checks, third call: JAX on CUDA (files and synthetic) and its GPU-only test, with the venv-based environments.
. benchmarks/gpu/env.sh
OUT=${OUT:-/tmp/out}; R=/tmp/runs; mkdir -p $OUT $R; L=$OUT/log3.txt; DEV=${DEV:-gpu}
$TRACER_CACHE/envs/jax/bin/python -c 'import jax, grain; print(jax.devices())' > $L 2>&1
( timeout 150 $T data make big > /dev/null 2>&1 ) &
timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/tracer/worker/test_decode_capacity.py -k jax > $OUT/pytest_jax.txt 2>&1
wait
p() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 90 $T profile --device $DEV --workers 8 --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
p jax-SimpleBig-files --framework jax --case SimpleBig --batch 100 --limit 3000 --epochs 2
p jax-SimpleBig-synthetic --framework jax --case SimpleBig --batch 100 --limit 3000 --epochs 2 --data synthetic
tar czf $OUT/runs_jax.tar.gz -C $R $(cd $R && ls -d jax-*)
tail -3 $OUT/pytest_jax.txt; grep -E "^===|steady|status " $L | cut -c1-150
