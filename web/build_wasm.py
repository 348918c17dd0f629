"""Compile web/linear.wat (the WebAssembly kernel of engine.js's `linear`) and write it into engine.js, in base64, as
the line `const LINEAR_WASM = "...";`, so the engine stays one file that works from file:// with no build step.

    python web/build_wasm.py            # after editing linear.wat; test_node.py checks engine.js holds its compilation
"""
import base64
import re
from pathlib import Path

from wasmtime import wat2wasm

HERE = Path(__file__).resolve().parent
LINE = re.compile(r'^(  const LINEAR_WASM = ")[A-Za-z0-9+/=]*(";.*)$', re.M)


def compiled() -> str:
    "linear.wat compiled to WebAssembly's binary format, in base64."
    return base64.b64encode(wat2wasm((HERE / "linear.wat").read_text())).decode()


def embedded(engine: str) -> str:
    "The base64 text engine.js holds."
    match = LINE.search(engine)
    if match is None:
        raise ValueError("engine.js has no line `const LINEAR_WASM = \"...\";`")
    return engine[match.end(1):match.start(2)]


if __name__ == "__main__":
    path = HERE / "engine.js"
    engine = path.read_text()
    embedded(engine)                                               # the line is there
    path.write_text(LINE.sub(lambda m: m.group(1) + compiled() + m.group(2), engine))
    print(f"engine.js: LINEAR_WASM = {len(compiled())} base64 characters from linear.wat")
