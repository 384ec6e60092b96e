# GPU checks, fourth call (issue 43 item 4): your own training on CUDA, `tracer profile -- COMMAND`, with the
# examples' PyTorch and JAX character-level GPTs; the PyTorch one also under nsys. Same carry as checks_1.sh.
. benchmarks/gpu/env.sh
OUT=${OUT:-/tmp/out}; R=/tmp/runs4; mkdir -p $OUT $R; L=$OUT/log4.txt
PY_TORCH=${PY_TORCH:-$(command -v python3)}; PY_JAX=${PY_JAX:-$TRACER_CACHE/envs/jax/bin/python}
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $L 2>&1
c() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 100 $T profile --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
c gpt-pytorch -- $PY_TORCH examples/gpt_pytorch.py --epochs 3 --samples ${SAMPLES:-4096}
c gpt-jax -- $PY_JAX examples/gpt_jax.py --epochs 3 --samples ${SAMPLES:-4096}
c gpt-pytorch-nsys --trace nsys -- $PY_TORCH examples/gpt_pytorch.py --epochs 2 --samples ${SAMPLES:-4096}
echo "=== compare" >> $L; timeout 60 $T compare $R/gpt-pytorch/* $R/gpt-jax/* >> $L 2>&1
echo "=== diagnose" >> $L; timeout 60 $T diagnose $R/gpt-pytorch/* >> $L 2>&1
echo "=== analyze nsys" >> $L; timeout 60 $T analyze $R/gpt-pytorch-nsys/* >> $L 2>&1
find $R -path '*/raw/*' \( -name '*.nsys-rep' -o -name '*.qdstrm' -o -name 'trace.arrow' -o -name '*.sqlite' \) -delete
tar czf $OUT/runs_own.tar.gz -C $R . ; grep -E "^===|steady|status|step" $L | cut -c1-160 | head -80
