# GPU checks, sixth call (issue 43), about 5 minutes, after checks_5.sh (same carry): the GPU-only tests; Lightning's
# and transformers' Trainer loops on CUDA under `tracer profile --` (the examples: every epoch and trained batch
# seen, NVML per process); grain's loader beside PyTorch's at 15 workers, a failed cell's stderr kept.
# Dry run on the development machine: LOCAL=1 LIMIT=200 SAMPLES=128 bash benchmarks/gpu/checks_6.sh
. benchmarks/gpu/env.sh
if [ -z "${LOCAL:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/grain-*.whl .whl/array_record-*.whl \
    .whl/portpicker-*.whl .whl/importlib_resources-*.whl > /dev/null 2>&1 || echo "grain did not install"
fi
OUT=${OUT:-/tmp/out}; R=/tmp/runs6; mkdir -p $OUT $R; L=$OUT/log6.txt
PY_TORCH=${PY_TORCH:-$(command -v python3)}; [ -n "${LOCAL:-}" ] && PY_TORCH=$HOME/.cache/dl-tracer/envs/pytorch/bin/python
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader 2>&1; uptime; } > $L 2>&1
timeout 200 $T data make big > /tmp/data_make6.txt 2>&1
[ -z "${LOCAL:-}" ] && timeout 200 ${T% -m tracer} -m pytest -q -m gpu -p no:cacheprovider tests > $OUT/pytest_gpu6.txt 2>&1
c() { n=$1; shift; echo "=== $n: $*" >> $L; timeout 120 $T profile --out $R/$n "$@" >> $L 2>&1; echo "=== $n rc=$?" >> $L; }
c lightning -- $PY_TORCH examples/gpt_lightning.py --epochs 3 --samples ${SAMPLES:-4096} --workers 2
c hf-trainer -- $PY_TORCH examples/gpt_hf_trainer.py --epochs 3 --samples ${SAMPLES:-4096} --workers 2
echo "=== epochs (images each)" >> $L
for d in $R/*/*/; do echo "epochs $(basename $d): $(grep -h '"epoch_end"' $d/events.jsonl | grep -o '"epoch": [0-9]*, "images": [0-9]*' | tr '\n' ' ')" >> $L; done
timeout 150 ${T% -m tracer} benchmarks/loader_sweep.py --frameworks jax pytorch --workers 15 --dataset big \
  --limit ${LIMIT:-2000} --epochs 2 --json $OUT/loader_sweep6.json > $OUT/loader_sweep6.txt 2>&1
tar czf $OUT/runs6.tar.gz -C $R .
grep -E "^===|steady\)|status |GPU|^epochs " $L | cut -c1-160 | tail -40; tail -6 $OUT/loader_sweep6.txt
[ -f $OUT/pytest_gpu6.txt ] && tail -4 $OUT/pytest_gpu6.txt
