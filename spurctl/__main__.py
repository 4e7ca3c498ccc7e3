"""`python -m spurctl` and the console script: `run`."""

import gc


def run() -> None:
    """spurctl's command line. Its start-up imports build only objects that live as long
    as the process (modules, classes, functions): the cyclic collector, paused meanwhile,
    would only rescan them (~30 collections before any command runs). Once imported they
    move straight to the oldest generation, as heap.gc_paused ends a pause, and the
    collector is back on for the command (which pauses it again around bulk work)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        from spurctl.cli import entry
    finally:
        if gc.get_freeze_count() == 0:  # freeze then unfreeze: no scan (see spurctl.heap)
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()
    entry()


if __name__ == "__main__":
    run()
