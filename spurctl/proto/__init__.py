"""Generated protobuf/gRPC code for Spur's `slurm` API subset (see slurm.proto)."""
