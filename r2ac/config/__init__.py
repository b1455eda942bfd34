"""One typed configuration for r2ac runs: the schema (``schema.py``: the dataclasses, their defaults,
help and bounds, validation) and loading (``loading.py``: YAML files with ``base:`` inheritance,
``key=value`` overrides, packaged configs, saving and hashing). Import from here::

    from r2ac.config import Config, ConfigError, load_config
    cfg = load_config("configs/quickstart.yaml", ["learner.unroll_length=50", "model.learning=tbptt"])

(The YAML files shipped with r2ac are in ``r2ac/configs``, a different place.)
"""

from r2ac.config.loading import (PACKAGED_CONFIGS, apply_overrides, config_hash, load_config, packaged_configs,
                                 resolve_config_path, save_config, upgrade_resolved)
from r2ac.config.schema import (CheckpointConfig, Config, ConfigError, EnvConfig, EvalConfig, LearnerConfig,
                                LoggerConfig, ModelConfig, PipelineConfig, PPOConfig, RuntimeConfig, StemConfig,
                                StopConfig,
                                config_from_dict, config_keys, config_to_dict)

__all__ = [
    "upgrade_resolved",
    "ConfigError",
    "Config",
    "EnvConfig",
    "ModelConfig",
    "StemConfig",
    "LearnerConfig",
    "PPOConfig",
    "RuntimeConfig",
    "LoggerConfig",
    "CheckpointConfig",
    "EvalConfig",
    "StopConfig",
    "PipelineConfig",
    "PACKAGED_CONFIGS",
    "load_config",
    "config_from_dict",
    "config_to_dict",
    "save_config",
    "apply_overrides",
    "config_hash",
    "config_keys",
    "packaged_configs",
    "resolve_config_path",
]
