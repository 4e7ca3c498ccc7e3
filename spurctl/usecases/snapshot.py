"""`spurctl snapshot`: the controller's view, as a document an offline audit reads."""

from __future__ import annotations

from spurctl.model import ControllerView, Watermark, WatermarkSource
from spurctl.sources.settings import Connection


def take_snapshot(conn: Connection) -> tuple[ControllerView, str]:
    """The controller's whole view and its spurctl.snapshot/v1 document (with the
    estimated watermark), for later audits."""
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.documents import dump_json
    from spurctl.sources.snapshot_document import snapshot_to_dict

    with ControllerClient(conn) as client:
        view = client.view(everything=True)  # an offline audit cannot ask for held ids
    watermark = Watermark(view.estimated_watermark(), WatermarkSource.ESTIMATED)
    return view, dump_json(snapshot_to_dict(view, watermark)) + "\n"
