"""docs/python.md and the package stay in step: the options it lists for
pto.Chip and pto.Node are the package's, the names the package exports are
the ones it documents, and chip.config shows what the chip runs with."""
import inspect
import os
import re

import pto
from pto import _node

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "python.md")


def doc_text() -> str:
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def listed(call: str) -> list:
    """The parameter names of the first `call(...)` signature in the doc."""
    m = re.search(r"`" + re.escape(call) + r"\(([^`]*)\)`", doc_text())
    assert m, f"docs/python.md has no `{call}(...)` signature"
    names = [p.strip().split("=")[0].strip() for p in m.group(1).replace("\n", " ").split(",")]
    return [n for n in names if n and n != "*"]


def test_chip_options_are_documented():
    want = list(inspect.signature(pto.Chip).parameters)
    assert listed("pto.Chip") == want, (listed("pto.Chip"), want)


def test_node_options_are_documented():
    sig = [p for p in inspect.signature(pto.Node).parameters if p != "options"]
    assert listed("pto.Node")[:len(sig)] == sig, (listed("pto.Node"), sig)
    text = " ".join(doc_text().split())
    m = re.search(r"the node options of `pto_node_config` \(([^)]*)\)", text)
    assert m, "docs/python.md does not list the node options"
    assert [o.strip() for o in m.group(1).split(",")] == list(_node._NODE_OPTIONS)


def test_exports_are_the_documented_api():
    public = {n for n in dir(pto) if not n.startswith("_")}
    # no helper or typing name leaks into the package's namespace
    assert public == set(pto.__all__), sorted(public ^ set(pto.__all__))
    text = doc_text()
    missing = [n for n in pto.__all__
               if not n.endswith("Error") and n not in ("ERRORS",) and n not in text]
    assert not missing, f"docs/python.md does not mention {missing}"


def test_task_output_is_documented():
    assert "Task" in pto.__all__ and hasattr(pto.Task, "output")
    assert "`output`" in doc_text()


def test_config_shows_the_effective_schedulers():
    with pto.Chip(clusters=5) as c:
        assert c.config["schedulers"] == 3, c.config
    with pto.Chip(clusters=2) as c:
        assert c.config["schedulers"] == 2, c.config
