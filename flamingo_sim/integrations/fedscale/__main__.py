"""``python -m flamingo_sim.integrations.fedscale executor ...``: one FedScale executor process."""

from flamingo_sim.integrations.fedscale.distributed import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
