"""The outside world turned into the model, once: controller, snapshots, inventories, nodes.

Nothing past this package sees a protobuf message, raw JSON, /proc or ssh output.
"""
