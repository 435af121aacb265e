"""The findings view names each finding's source line (the node's stack frame) and shows the lines
around it on `o` when the file is on this machine."""

from __future__ import annotations

from graphtrain_inspect.tui.app import InspectApp
from tests.tui_support import _graphs, settle

MODEL = """\
def forward(self, x, rank):
    z = self.mm(x).relu()
    s = z[rank]  # baked: this rank's row
    return s.sum()
"""


def _capture(tmp_path, model_file):
    from tests.small_captures import CaptureWriter, mesh_rank_table

    w = CaptureWriter(tmp_path / "cap", world_size=2)
    for r in range(2):
        rw = w.rank(r, rank_table=mesh_rank_table(r, (2,), ("dp",)), own_device="cpu")
        g0, g1, g2 = _graphs(r)
        for n in g2.graph.nodes:
            if n.name == "select":
                n.meta["stack_trace"] = (
                    f'  File "{model_file}", line 3, in forward\n    s = z[rank]  # baked: this rank\'s row\n'
                )
        rw.apply("remove_dead_code", g0, g1)
        rw.apply("shard_rows", g1, g2)
        rw.end()
    return w.finish()


async def test_finding_detail_names_the_source_line_and_o_shows_the_file(tmp_path):
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    app = InspectApp(_capture(tmp_path, model))
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        fv = app.findings_view
        fv.table.focus()
        fv.table.move_cursor(row=0)
        await settle(pilot)
        f = fv.current
        assert f.kind == "rank-baked-constant" and f.source["file"] == str(model) and f.source["line"] == 3
        detail = str(fv.query_one("#finding-detail").render())
        assert f"source: {model}:3  s = z[rank]" in detail and "o: lines around it" in detail
        await pilot.press("o")
        await settle(pilot)
        detail = str(fv.query_one("#finding-detail").render())
        assert ">3     s = z[rank]  # baked: this rank's row" in detail
        assert " 1 def forward(self, x, rank):" in detail and " 4     return s.sum()" in detail
        # the file gone: said so, nothing else breaks
        model.unlink()
        await pilot.press("o")
        await settle(pilot)
        assert "(the file is not on this machine)" in str(fv.query_one("#finding-detail").render())
