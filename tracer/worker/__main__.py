import sys

from tracer.worker.main import main

sys.exit(main())
