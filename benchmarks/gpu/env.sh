# Sourced at the start of every command on the lent GPU machine (see ../shared/device/README.md):
# the tool's packages from carried cp312 wheels (.whl/), nsys's two missing libraries (.deb/), and
# framework "environments" that are the machine's own Python (torch and jax are installed there).
set -u
export PYTHONUNBUFFERED=1 QT_QPA_PLATFORM=offscreen
if [ -n "${LOCAL:-}" ]; then  # a dry run on the development machine: its own environments
  export PYTHONPATH=$PWD; T="$HOME/.cache/dl-tracer/venv/bin/python -m tracer"; return 0 2>/dev/null
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "gpu env: the carried wheels did not install"; exit 3; }
export PYTHONPATH=$PWD:/tmp/site
mkdir -p /tmp/dw; for f in .deb/*.deb; do dpkg -x "$f" /tmp/dw; done
export LD_LIBRARY_PATH=/tmp/dw/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64:$PATH
export TRACER_CACHE=/tmp/tc
# A framework environment is a venv of the machine's Python whose .pth adds the machine's site-packages (torch,
# jax) and the carried wheels: the worker runs the interpreter `tracer env` resolves, so a wrapper script is not enough.
for fw in pytorch jax; do
  [ -f $TRACER_CACHE/envs/$fw/pyvenv.cfg ] && continue
  rm -rf $TRACER_CACHE/envs/$fw
  python3 -m venv --without-pip $TRACER_CACHE/envs/$fw
  sp=$($TRACER_CACHE/envs/$fw/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '/tmp/site\n%s\n' "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" > $sp/gpu-machine.pth
done
T="python3 -m tracer"
