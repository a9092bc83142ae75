"""The layout rules of docs/architecture.md, checked: rooms import downward, nothing grows too big.

Rooms, lowest first: a module may import from its own room and the rooms before it,
never from one after it. No module over 400 lines, no function over 60, no room over a
quarter of the package's lines.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ["core", "tools", "prompts", "engines", "nodes", "graph", "stores", "service", "app"]
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_ROOM_SHARE = 0.25


def _modules() -> list[Path]:
    return sorted(p for room in ROOMS for p in (ROOT / room).rglob("*.py"))


def _imported(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found


@pytest.mark.parametrize("module", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_its_room_and_the_rooms_below(module: Path) -> None:
    room = ROOMS.index(module.relative_to(ROOT).parts[0])
    above = set(ROOMS[room + 1 :])
    wrong = _imported(ast.parse(module.read_text(encoding="utf-8"))) & above
    assert not wrong, f"{module.relative_to(ROOT)} imports from a higher room: {sorted(wrong)}"


def test_no_module_and_no_function_is_too_long() -> None:
    too_long: list[str] = []
    for module in _modules():
        source = module.read_text(encoding="utf-8")
        name = module.relative_to(ROOT)
        if (lines := len(source.splitlines())) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}(): {length} lines")
    assert not too_long, "split these:\n" + "\n".join(too_long)


def test_no_room_holds_more_than_a_quarter_of_the_code() -> None:
    lines = {
        room: sum(len(p.read_text().splitlines()) for p in (ROOT / room).rglob("*.py"))
        for room in ROOMS
    }
    total = sum(lines.values())
    crowded = {room: f"{n / total:.0%}" for room, n in lines.items() if n > MAX_ROOM_SHARE * total}
    assert not crowded, f"rooms over a quarter of {total} lines: {crowded}"
