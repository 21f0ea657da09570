"""``python -m tests.support.localhub [--port 8765] [--cache DIR] [--all] [--log FILE]``: build the
repos (TEST SCAFFOLDING: tiny random weights, synthetic rows under real ids) and serve them on
127.0.0.1 until interrupted. Prints the environment lines a client shell needs."""

import argparse
import os
import tempfile
import time

from .repos import HEADLINE_MODELS, add_all, manifest
from .server import ACCEPTED, LocalHubServer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.localhub", description=__doc__)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "localhub-cache"),
                        help="where the built repos are kept (reused by the next start)")
    parser.add_argument("--smoke-cache", help="the tiny checkpoints' cache root (default: the smoke preset's)")
    parser.add_argument("--all", action="store_true", help="every model id, not only the headline command's")
    parser.add_argument("--log", help="append one line per request to this file")
    args = parser.parse_args()
    hub = LocalHubServer(args.port, log=args.log)
    add_all(hub, args.cache, models=None if args.all else HEADLINE_MODELS, smoke_cache=args.smoke_cache)
    print(manifest(hub))
    hub.start()
    print("TEST SCAFFOLDING: tiny random weights and synthetic rows under real ids.")
    print(f"export HF_ENDPOINT={hub.url} HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 TRANSFORMERS_OFFLINE=0 "
          f"HF_TOKEN={ACCEPTED} HF_HOME=$(mktemp -d)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":
    main()
