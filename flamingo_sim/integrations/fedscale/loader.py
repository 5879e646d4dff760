"""FedScale's import guard: whether it is installed, and importing it once with its traps defused.

- :func:`fedscale_available` / :class:`FedScaleUnavailable` / :data:`INSTALL_HINT`: whether
  FedScale and the runtime dependencies of its PyTorch path are installed, and what to run if not;
- TensorFlow and wandb, which FedScale imports at module level but its PyTorch path never uses,
  get a placeholder module when not installed, whose every use raises an error naming the package;
- :func:`load_fedscale` imports torchvision first (with real TensorFlow the other order can
  segfault), hides the host's ``sys.argv`` from ``fedscale.cloud.config_parser`` (it parses it
  at import), and returns FedScale's pieces by name;
- :func:`quiet_root_logging` keeps FedScale's ``logging.basicConfig`` off the host's root logger.

This is the one place that imports FedScale; everything else gets it from :func:`load_fedscale`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import sys
import threading
import types
from typing import Any, Iterator

from flamingo_sim.errors import FlamingoError

INSTALL_HINT = "pip install 'flamingo-sim[fedscale]'"
#: Modules FedScale's PyTorch path really needs (import name -> pip package).
REQUIRED = {"grpc": "grpcio", "google.protobuf": "protobuf", "overrides": "overrides", "tensorboard": "tensorboard"}
#: Modules FedScale imports at module level but whose use we never reach: placeholders if absent.
PLACEHOLDERS = {"tensorflow": "tensorflow-cpu", "wandb": "wandb"}


class FedScaleUnavailable(FlamingoError):
    """FedScale or one of its runtime dependencies is not installed."""


def _missing_modules() -> list[str]:
    missing = []
    if importlib.util.find_spec("fedscale") is None:
        missing.append("fedscale")
    for mod, pkg in REQUIRED.items():
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:  # a parent package is absent
            found = False
        if not found:
            missing.append(pkg)
    return missing


def fedscale_available() -> bool:
    """Whether :func:`load_fedscale` can succeed (FedScale and its runtime dependencies present)."""
    return not _missing_modules()


# -- placeholders for modules FedScale imports but its PyTorch path never uses --------------------
class _Absent(type):
    """A stand-in class: any attribute is another stand-in (so it can be subclassed or named in
    annotations at import time); calling one raises an error naming the missing package."""

    _package = "?"

    def __getattr__(cls, attr: str) -> "_Absent":
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{cls.__name__}.{attr}", (), {"_package": cls._package})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        raise ModuleNotFoundError(
            f"{cls.__name__} needs the package {cls._package!r}, which is not installed; "
            f"flamingo-sim's FedScale path does not use it (pip install {cls._package} to use it anyway)"
        )


def _placeholder_module(name: str, package: str) -> types.ModuleType:
    mod = types.ModuleType(name, f"flamingo-sim placeholder: {package} is not installed")
    mod.__dict__["__flamingo_placeholder__"] = True

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Absent(f"{name}.{attr}", (), {"_package": package})

    mod.__dict__["__getattr__"] = __getattr__
    return mod


def _install_placeholders() -> list[str]:
    installed = []
    for name, package in PLACEHOLDERS.items():
        if name in sys.modules:
            continue
        if importlib.util.find_spec(name) is None:
            if name == "tensorflow":
                # TensorBoard uses real TensorFlow when `import tensorflow` works, else its own
                # stub: make it settle on the stub before the placeholder exists.
                from tensorboard.compat import tf as tensorboard_tf

                _ = tensorboard_tf.io  # reading the attribute makes TensorBoard pick its stub
            sys.modules[name] = _placeholder_module(name, package)
            installed.append(name)
    return installed


_FS: types.SimpleNamespace | None = None
_LOCK = threading.Lock()


def load_fedscale() -> types.SimpleNamespace:
    """Import FedScale's runtime once, with every trap guarded; returns its pieces by name.

    Raises :class:`FedScaleUnavailable` (with the install command) when something is missing.
    """
    global _FS
    with _LOCK:
        if _FS is not None:
            return _FS
        missing = _missing_modules()
        if missing:
            raise FedScaleUnavailable(
                f"the FedScale engine needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                f"not installed: {INSTALL_HINT}"
            )
        import torchvision  # noqa: F401  before FedScale: with real TensorFlow the other order can segfault

        placeholders = _install_placeholders()
        saved_argv = sys.argv
        sys.argv = sys.argv[:1]  # config_parser parses sys.argv at import
        try:
            with quiet_root_logging():
                parser = importlib.import_module("fedscale.cloud.config_parser")
                commons = importlib.import_module("fedscale.cloud.commons")
                agg_mod = importlib.import_module("fedscale.cloud.aggregation.aggregator")
                exe_mod = importlib.import_module("fedscale.cloud.execution.executor")
                torch_client = importlib.import_module("fedscale.cloud.execution.torch_client")
                adapter = importlib.import_module("fedscale.cloud.internal.torch_model_adapter")
                pb2 = importlib.import_module("fedscale.cloud.channels.job_api_pb2")
                agg_logger = importlib.import_module("fedscale.cloud.logger.aggregator_logging")
        except ImportError as exc:
            raise FedScaleUnavailable(f"FedScale could not be imported ({exc}): {INSTALL_HINT}") from exc
        finally:
            sys.argv = saved_argv
        _FS = types.SimpleNamespace(
            parser=parser,
            commons=commons,
            Aggregator=agg_mod.Aggregator,
            Executor=exe_mod.Executor,
            TorchClient=torch_client.TorchClient,
            TorchModelAdapter=adapter.TorchModelAdapter,
            pb2=pb2,
            agg_logger=agg_logger,
            placeholders=tuple(placeholders),
        )
        return _FS


@contextlib.contextmanager
def quiet_root_logging() -> Iterator[None]:
    """Keep FedScale's ``logging.basicConfig`` from taking over the host's root logger.

    FedScale configures the root logger (a log file and stderr at INFO) when its aggregator or
    executor is built. With a handler already present ``basicConfig`` does nothing; ours is
    removed afterwards, so FedScale's INFO chatter falls below the root's default level.
    """
    root = logging.getLogger()
    handler = logging.NullHandler()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
