"""A profile that starts from another (``extends:``) and changes some of it (``patch:``), read
into the one mapping parsim.hardware.cluster.load_profile checks.  The rule (cluster.py's
docstring): each top-level key given replaces the base's whole key; ``patch`` merges a mapping
into the base's, key by key; the base may extend another, MAX_EXTENDS profiles in all."""

from __future__ import annotations

from pathlib import Path

from parsim.inputs import Fields, load_file

MAX_EXTENDS = 4          # profiles in one chain of ``extends`` (gb200-nvl576 -> gb200-nvl72 -> dgx-b200: 3)


def extended(raw: dict, path: str, load_profile, chain: tuple[str, ...] = ()) -> dict:
    """``raw`` over the profile it ``extends`` (itself resolved and validated first by
    ``load_profile``, so its own errors name its file), then its ``patch`` merged in (_patched)."""
    r = Fields(raw, path)
    name = r.get("extends", str)
    base = Path(path).parent / f"{name}.yaml"
    if not base.is_file():
        others = sorted(p.stem for p in Path(path).parent.glob("*.yaml") if p.stem != Path(path).stem)
        raise r.fail("extends", f"no profile {name}.yaml beside this file; name one of {', '.join(others) or 'none'}")
    if not r.has("name"):
        raise r.fail("name", "missing; a profile that extends another names itself")
    chain = chain + (Path(path).stem,)
    if name in chain or len(chain) >= MAX_EXTENDS:
        raise r.fail("extends", f"{' -> '.join(chain + (name,))}: extends goes round in a circle or deeper than "
                                f"{MAX_EXTENDS} profiles; extend a profile that extends none")
    base_raw = load_file(base, "a hardware profile YAML")
    if isinstance(base_raw, dict) and "extends" in base_raw:
        base_raw = extended(base_raw, str(base), load_profile, chain)
    else:
        load_profile(base)
    merged = {**base_raw, **{k: v for k, v in raw.items() if k not in ("extends", "patch")}}
    if "patch" in raw:
        patch = r.get("patch", dict)
        for key in patch:
            if not isinstance(merged.get(key), dict):
                raise r.fail("patch", f"{key}: the profile has no section {key} to patch; patch changes fields of "
                                      f"its sections ({', '.join(k for k, v in merged.items() if isinstance(v, dict))})")
        merged = _patched(merged, patch)
    return merged


def _patched(base: dict, patch: dict) -> dict:
    """``base`` with ``patch`` merged in key by key: a mapping into a mapping recursively, any
    other value replacing the base's (``patch: {device: {memory: 141GB}}`` changes the memory
    alone, where a top-level ``device:`` would replace the whole section)."""
    out = dict(base)
    for key, value in patch.items():
        out[key] = _patched(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
