# On the development machine, before a lent GPU session (issue 43): what env.sh installs there and nothing
# can download there. .whl/: cp312 wheels of the tool's packages the GPU machine's Python lacks (its torch,
# jax, numpy, psutil, pyarrow, pandas, nvidia-ml-py, lightning and transformers are its own; matplotlib
# too), plus grain for the JAX checks; .deb/: the two libraries its nsys importer lacks (libdw1, libelf1).
# Both are ignored by git: name them in the device tool's carry (about 50 MiB of its 64 MiB).
#   bash benchmarks/gpu/prepare.sh && (run with carry [".whl", ".deb"]) bash benchmarks/gpu/checks_5.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .whl .deb
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl duckdb==1.5.5 duckdb-extension-sqlite-scanner==1.5.5 rich markdown-it-py mdurl pygments msgspec \
  pydantic pydantic-core typing-inspection annotated-types typing-extensions cxxfilt py-spy pytest pytest-timeout \
  pluggy iniconfig grain==0.2.18 array_record portpicker importlib_resources
(cd .deb && { apt-get download libdw1 libelf1 2>/dev/null || { apt-get update -qq && apt-get download libdw1 libelf1; }; })
du -sh .whl .deb
