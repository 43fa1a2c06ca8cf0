"""``python -m tests.chaos --seconds 600 --seed N``: one fault campaign, its report, exit 1 on violations."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from .campaign import CampaignConfig, run_campaign
from .faults import AIMED


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the fault phase")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--calm", type=float, default=10.0, help="fault-free end phase (s)")
    parser.add_argument("--participants", type=int, default=4)
    parser.add_argument("--session-timeout", type=float, default=3.0)
    parser.add_argument("--roles", default=None, help="comma-separated (default: all available)")
    parser.add_argument(
        "--aimed", type=float, default=AIMED, help="share of participant faults aimed at holders"
    )
    parser.add_argument("--aims", default=None, help="aim only at these holders (comma-separated)")
    parser.add_argument("--kinds", default=None, help="participant fault kinds (comma-separated)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the logs")
    parser.add_argument("--keep", action="store_true", help="keep the logs even on success")
    parser.add_argument(
        "--no-java", action="store_true", help="without the Curator participants (tests.chaos.java)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the report")
    args = parser.parse_args(argv)
    cfg = CampaignConfig(
        seed=args.seed,
        seconds=args.seconds,
        calm=args.calm,
        participants=args.participants,
        session_timeout=args.session_timeout,
        directory=args.dir,
        keep=args.keep,
        aimed=args.aimed,
        aims=tuple(args.aims.split(",")) if args.aims else None,
        kinds=tuple(args.kinds.split(",")) if args.kinds else None,
        echo=(lambda _: None) if args.quiet else print,
        java=not args.no_java,
    )
    if args.roles:
        cfg.roles = args.roles
    signal.signal(signal.SIGTERM, _interrupt)  # clean up (participants, ensemble) on SIGTERM
    result = run_campaign(cfg)
    print(result.report.format())
    return 0 if result.report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
