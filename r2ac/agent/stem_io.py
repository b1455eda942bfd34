"""Export and load a pretrained vision stem (Irie et al. 2024, Sec. 4: pretrain with TBPTT, then load and freeze).

A stem file is a safetensors file: the stem's tensors plus string metadata — the architecture
(``kind``, ``observation_shape``, ``channels``, ``fc``, what ``make_stem`` needs) and provenance (env id,
training steps, final score, config hash, r2ac version). safetensors holds no code, so loading runs none.
"""

from __future__ import annotations

import json
import os
from typing import Dict, Tuple

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from r2ac.agent.stems import stem_metadata
from r2ac.fileio import atomic_write

ARCH_KEYS = ("kind", "observation_shape", "channels", "fc")


class StemFileError(ValueError):
    pass


def export_stem(stem: torch.nn.Module, path: str, **provenance) -> str:
    """Write ``stem``'s weights and metadata to ``path`` atomically; returns the path."""
    meta = {k: json.dumps(v) for k, v in stem_metadata(stem).items()}
    meta.update({k: json.dumps(v) for k, v in provenance.items()})
    meta["format"] = json.dumps("r2ac-stem-v1")
    tensors = {k: v.detach().cpu().contiguous() for k, v in stem.state_dict().items()}
    from safetensors.torch import save

    blob = save(tensors, metadata=meta)
    return atomic_write(path, lambda fh: fh.write(blob))


def read_stem_file(path: str) -> Tuple[Dict[str, torch.Tensor], Dict]:
    """Tensors and decoded metadata of a stem file; a clear error for a missing or foreign file."""
    if not os.path.isfile(path):
        raise StemFileError(f"stem.path={path!r}: no such file; make one with `r2ac pretrain CONFIG` "
                            f"(it writes <run_dir>/stem.safetensors)")
    try:
        tensors = load_file(path)
        from safetensors import safe_open

        with safe_open(path, framework="pt") as f:
            raw = f.metadata() or {}
    except (SafetensorError, OSError, ValueError) as e:
        raise StemFileError(f"stem.path={path!r} is not a readable safetensors stem file: {e}") from e
    meta = {k: json.loads(v) for k, v in raw.items()}
    if meta.get("format") != "r2ac-stem-v1":
        raise StemFileError(f"stem.path={path!r} has no r2ac stem metadata (format {meta.get('format')!r}); "
                            "export stems with `r2ac pretrain`")
    return tensors, meta


def load_pretrained_stem(stem: torch.nn.Module, path: str) -> Dict:
    """Load a stem file into ``stem`` after checking that architecture and observation shape match.
    Returns the file's metadata."""
    tensors, meta = read_stem_file(path)
    want = stem_metadata(stem)
    for k in ARCH_KEYS:
        have, need = meta.get(k), want.get(k)
        if k == "channels":
            have, need = list(have or []), list(need or [])
        if k == "observation_shape":
            have, need = list(have or []), list(need or [])
        if have != need:
            raise StemFileError(
                f"stem.path={path!r} was trained with {k}={have}, but this run needs {k}={need} "
                f"(env {meta.get('env_id', '?')!r}); use a stem pretrained on the same observation shape and "
                f"stem architecture (model.stem, model.stem_channels, model.stem_fc)")
    missing = set(stem.state_dict()) ^ set(tensors)
    if missing:
        raise StemFileError(f"stem.path={path!r}: tensor names differ from this stem's: {sorted(missing)}")
    stem.load_state_dict(tensors)
    return meta
