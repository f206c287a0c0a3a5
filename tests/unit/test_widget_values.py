"""A widget's value is set in one of two ways: url_keys.hold (or seed, which calls it) before the widget is
drawn, on every run, or a callback, which runs before the script. A plain `st.session_state[key] = value`
elsewhere is how a value set once crept in: the browser is sent it on that run only, and a browser that
missed it shows the widget's default and sends that back (webapp.url_keys.hold says more). This test reads
the app's source and finds such writes."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted([*(ROOT / "webapp").rglob("*.py"), ROOT / "app.py"])
CALLBACKS = ("on_change", "on_click", "on_select")


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a string (KEY = "presenter"; VERSE, REFERENCE = "...", "...")."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs = (zip(target.elts, node.value.elts) if isinstance(target, ast.Tuple)
                     and isinstance(node.value, ast.Tuple) else [(target, node.value)])
            for name, value in pairs:
                if isinstance(name, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found[name.id] = value.value
    return found


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def widget_keys(trees: dict[Path, ast.Module]) -> set[str]:
    """Every key a widget is drawn with (a string, or a module's string constant), app-wide."""
    keys = set()
    for tree in trees.values():
        constants = _constants(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(k.arg in CALLBACKS for k in node.keywords) or (
                    isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                for keyword in node.keywords:
                    if keyword.arg == "key" and (text := _text(keyword.value, constants)) is not None:
                        keys.add(text)
    return keys


def callbacks(trees: dict[Path, ast.Module]) -> set[str]:
    """Names of the functions a widget calls back (on_change=f, on_click=lambda: f(...), on_click=make(...)
    whose inner function is the callback), app-wide."""
    names = set()
    for node in (n for tree in trees.values() for n in ast.walk(tree)):
        if isinstance(node, ast.keyword) and node.arg in CALLBACKS:
            for inner in ast.walk(node.value):
                if isinstance(inner, ast.Name):
                    names.add(inner.id)
                elif isinstance(inner, ast.Attribute):
                    names.add(inner.attr)
    return names


def _session_key(target: ast.AST) -> ast.AST | None:
    """X of a `st.session_state[X]` target, else None."""
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute) \
            and target.value.attr == "session_state":
        return target.slice
    return None


def direct_writes(path: Path, tree: ast.Module, keys: set[str], called_back: set[str]) -> list[str]:
    """`file:line key` of each plain write to a widget's key outside a callback (a function named in
    `called_back`, or one inside it). Keys seen: a string, or a module's string constant; a key built at run
    time (a parameter, "example_pick:" + path) is not followed."""
    constants, found = _constants(tree), []

    def visit(node: ast.AST, in_callback: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_callback = in_callback or node.name in called_back
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets
                       for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            for target in targets:
                key = _session_key(target)
                text = _text(key, constants) if key is not None else None
                if text in keys and not in_callback:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {text}")
        for child in ast.iter_child_nodes(node):
            visit(child, in_callback)

    visit(tree, False)
    return found


def test_widget_values_are_set_through_hold_or_a_callback():
    trees = {path: ast.parse(path.read_text(), str(path)) for path in SOURCES}
    keys, called_back = widget_keys(trees), callbacks(trees)
    assert {"beam_verse", "ckpt_pick", "presenter", "dec_beam", "attn_reference"} <= keys      # the scan finds the app's widgets
    found = [w for path, tree in trees.items() if path.name != "url_keys.py"
             for w in direct_writes(path, tree, keys, called_back)]
    assert not found, "widget values set outside url_keys.hold and callbacks:\n" + "\n".join(found)


def test_the_scan_finds_a_value_set_once():
    source = ('import streamlit as st\nKEY = "box"\n'
              'def draw():\n    if "box" not in st.session_state:\n        st.session_state[KEY] = "x"\n'
              '    st.text_input("Box", key=KEY)\n'
              'def reset():\n    st.session_state["box"] = ""\n'
              'st.button("Clear", on_click=reset)\n')
    tree = ast.parse(source)
    trees = {ROOT / "probe.py": tree}
    keys = widget_keys(trees)
    assert keys == {"box"}
    assert direct_writes(ROOT / "probe.py", tree, keys, callbacks(trees)) == ["probe.py:5 box"]    # the callback's write is fine
