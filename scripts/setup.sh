#!/usr/bin/env bash
# Set-up from nothing, reusing the cache when present: the tool's virtual environment and the
# framework environments, under ${TRACER_CACHE:-~/.cache/dl-tracer} (outside the clone, so CI and
# later clones reuse them).
#   bash scripts/setup.sh                 # the tool + PyTorch
#   bash scripts/setup.sh all            # the tool + every framework that installs here (+ Nsight Systems,
#                                        # + Slurm, munge and Chromium from apt when root, for the Slurm
#                                        #   tests and the report-page test);
#                                        # SINGA needs a CPython 3.6 (on PATH or in pyenv's versions folder)
#   bash scripts/setup.sh pytorch mxnet  # the tool + the named frameworks
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${TRACER_CACHE:-$HOME/.cache/dl-tracer}
venv=$cache/venv
python=${PYTHON:-python3}
frameworks=("$@")
[ ${#frameworks[@]} -eq 0 ] && frameworks=(pytorch)
with_nsys=0
every=0
if [ "${frameworks[0]}" = all ]; then every=1; with_nsys=1; fi

mkdir -p "$cache"
if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating the tool environment in $venv"
  "$python" -m venv "$venv"
fi
stamp=$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.tracer-stamp" 2>/dev/null)" != "$stamp" ]; then
  echo "setup: installing the tool and its dependencies"
  "$venv/bin/pip" install -q --disable-pip-version-check -e "$root[viewer,dev,ray]"
  echo "$stamp" > "$venv/.tracer-stamp"
else
  # the cached environment may point at another clone: re-point it here (fast, no downloads)
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e "$root"
fi

if [ "$every" = 1 ]; then  # every framework declared in tracer/core/frameworks.py, in its order
  read -r -a frameworks <<< "$("$venv/bin/python" -c 'from tracer.core.frameworks import FRAMEWORKS; print(*FRAMEWORKS)')"
fi
for fw in "${frameworks[@]}"; do
  if "$venv/bin/python" -c "import sys; from tracer.measure.environments import recipe_current, status; sys.exit(0 if status('$fw').installed and recipe_current('$fw') else 1)"; then
    echo "setup: $fw environment ready"
  elif [ -x "$cache/envs/$fw/bin/python" ]; then  # made before its recipe changed: completed in place
    echo "setup: completing the $fw environment (its recipe changed)"
    "$venv/bin/tracer" env create "$fw"
  else
    echo "setup: creating the $fw environment (once; cached in $cache/envs/$fw)"
    "$venv/bin/tracer" env create "$fw"
  fi
done

if [ "$with_nsys" = 1 ]; then
  bash "$root/scripts/install_nsys.sh"
  bash "$root/scripts/install_slurm.sh"
  bash "$root/scripts/install_chromium.sh"
fi
echo "setup: done. The tool is $venv/bin/tracer"
