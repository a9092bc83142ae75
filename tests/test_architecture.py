"""The layering of docs/architecture.md, checked: each layer imports only itself and the layers below.

Layers, lowest first: a module may import from its own layer and the layers before it,
never from one after it. No layer holds more than a quarter of the package's lines.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["core", "tools", "prompts", "engines", "nodes", "graph", "stores", "service", "app"]
MAX_LAYER_SHARE = 0.25


def _modules() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py"))


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_its_layer_and_the_layers_below(module: Path) -> None:
    layer = LAYERS.index(module.relative_to(ROOT).parts[0])
    above = set(LAYERS[layer + 1 :])
    wrong = _imported(ast.parse(module.read_text(encoding="utf-8"))) & above
    assert not wrong, f"{module.relative_to(ROOT)} imports from a higher layer: {sorted(wrong)}"


def test_no_layer_holds_more_than_a_quarter_of_the_code() -> None:
    lines = {
        layer: sum(len(p.read_text().splitlines()) for p in (ROOT / layer).rglob("*.py"))
        for layer in LAYERS
    }
    total = sum(lines.values())
    crowded = {
        layer: f"{n / total:.0%}" for layer, n in lines.items() if n > MAX_LAYER_SHARE * total
    }
    assert not crowded, f"layers over a quarter of {total} lines: {crowded}"
