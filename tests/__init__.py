import os

# Commands run in the test process (tests/cli.py run_cli) leave gRPC channels and
# threads here, and gRPC's fork handlers then abort a child forked to exec another
# program (every Popen with a preexec_fn). The test process never forks to run gRPC
# itself, so the handlers are off here, set before anything imports grpc; spurctl's
# own child processes get an environment without this (tests/cli.py clean_env).
os.environ["GRPC_ENABLE_FORK_SUPPORT"] = "false"
