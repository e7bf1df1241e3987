"""The shared facts (tinygpt/facts.json), loaded once for Python code."""
import json
from pathlib import Path

PATH = Path(__file__).with_name("facts.json")
FACTS = json.loads(PATH.read_text())


def preset(preset_id: str) -> dict:
    for p in FACTS["presets"]:
        if p["id"] == preset_id:
            return p
    raise KeyError(f"unknown preset {preset_id!r}; known: {[p['id'] for p in FACTS['presets']]}")
