"""Where the CPU kernels are pinned, each in a fresh subprocess (this pytest process has long run
torch kernels): the warning when pinning comes too late, the real-data branch of ``auto`` (the
CPU's own kernels), the Flower client's pin, and no test module running a torch kernel at import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli_runs import EXP, ROOT, cli_argv, cli_env

TINY_REAL = ["data.image_size=32", "fl.rounds=1", "fl.participants_per_round=2", "fl.local_steps=1", "fl.eval_every=1", "policies=[baseline]"]


def _python(code: str, **env: str) -> str:
    """``code``'s output in a fresh interpreter, started without MKL_CBWR (an in-process run of this session may have set it) unless given."""
    base = {k: v for k, v in cli_env().items() if k != "MKL_CBWR"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env}, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def native() -> str:
    """The CPU's own (widest) ATen capability, as a fresh process picks it."""
    cap = _python("import torch; print(torch.backends.cpu.get_cpu_capability())")
    if cap.lower() == "default":
        pytest.skip("this CPU offers ATen only its portable kernels: pinned and native are the same here")
    return cap


def test_pinning_before_any_kernel_takes_and_after_one_warns(native):
    code = ("from flamingo_sim.fl.training.device import pin_cpu_kernels; import json, torch; {before}"
            "print(json.dumps(pin_cpu_kernels(True)))")
    assert json.loads(_python(code.format(before=""))) == ["DEFAULT", None]
    used, warning = json.loads(_python(code.format(before="torch.ones(3).sum(); ")))
    assert used == native
    assert warning == (f"cpu kernels: portable asked for, but torch already runs {native} kernels in this process (set "
                       "ATEN_CPU_CAPABILITY=default before torch runs anything); results may differ on other CPUs")
    # native asked for: the CPU's own, no warning, pinned or not before
    assert json.loads(_python(code.format(before="").replace("True", "False"))) == [native, None]


def test_mkl_is_pinned_to_its_vendor_neutral_branch_before_its_first_product_and_warns_after():
    """MKL's matrix products choose their code path by the CPU's maker (an AMD EPYC and an Intel Xeon
    gave the main job different accuracies): pinned, MKL runs its COMPATIBLE branch (mkl_cbwr_get 3),
    whatever MKL_CBWR the process started with; a product run before the pin leaves it unpinned and says so."""
    code = ("import json, torch; from flamingo_sim.fl.training.device import pin_cpu_kernels, mkl_branch; {before}"
            "print(json.dumps([pin_cpu_kernels(True), mkl_branch()]))")
    assert json.loads(_python(code.format(before=""))) == [["DEFAULT", None], 3]
    # a product before the pin (torch.empty runs no ATen kernel, so only MKL has chosen): CNR off, and the line
    (used, warning), branch = json.loads(_python(code.format(before="torch.empty(4, 4) @ torch.empty(4, 4); ")))
    assert (used, branch) == ("DEFAULT", 1)
    assert warning == ("cpu kernels: portable asked for, but MKL already chose its code path in this process (set "
                       "MKL_CBWR=COMPATIBLE before torch runs anything); results may differ on other CPUs")
    # the branch the pin sets is the process's, not the environment's it was started with
    assert json.loads(_python(code.format(before=""), MKL_CBWR="AVX2")) == [["DEFAULT", None], 3]


def test_the_pinned_product_differs_from_the_cpus_own():
    """The pin changes MKL's bits on this machine (so the test above could fail): the same product's
    SHA-256 with and without it, each in a fresh process."""
    code = ("import hashlib, torch; {pin}g = torch.Generator().manual_seed(0); "
            "a, b = torch.randn(257, 513, generator=g), torch.randn(513, 129, generator=g); "
            "print(hashlib.sha256((a @ b).numpy().tobytes()).hexdigest())")
    pinned = _python(code.format(pin="from flamingo_sim.fl.training.device import pin_cpu_kernels; pin_cpu_kernels(True); "))
    own = _python(code.format(pin=""))
    assert pinned != own


@pytest.mark.slow
def test_an_in_process_run_after_torch_ran_says_its_kernels_were_not_pinned(native, tmp_path):
    """The line a notebook user sees when the run comes after their own torch code."""
    code = (f"import torch; torch.ones(3).sum(); from flamingo_sim.fl.runner.run import run_experiment; "
            f"r = run_experiment({str(EXP)!r}, out_dir={str(tmp_path / 'run')!r}, overrides={['fl.rounds=1', 'data.proxy.n_clients=40', 'fl.participants_per_round=2', 'policies=[baseline]']!r}, log=print); "
            f"print('KERNELS', r.summary['cpu_kernels'])")
    out = _python(code).splitlines()
    assert f"KERNELS {native}" in out
    assert sum("cpu kernels: portable asked for, but torch already runs" in line for line in out) == 1, out


@pytest.mark.slow
def test_auto_on_real_data_keeps_the_cpus_own_kernels_and_portable_pins_them(native, tmp_path):
    from tests.fl.data.test_data import _write_fedscale

    root = tmp_path / "openimage"
    _write_fedscale(root, {"a": 16, "b": 16})
    for name, extra in (("auto", []), ("portable", ["fl.cpu_kernels=portable"])):
        out = tmp_path / name
        done = subprocess.run(cli_argv(out, [f"data.root={root}", *TINY_REAL, *extra]), capture_output=True, text=True, env=cli_env(),
                              timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["cpu_kernels"] == (native if name == "auto" else "DEFAULT"), name
        assert "cpu kernels: portable asked for" not in done.stdout + done.stderr


@pytest.mark.slow
def test_the_flower_client_pins_the_kernels_the_native_run_uses(native):
    pytest.importorskip("flwr", reason="Flower's extra is not installed: pip install 'flamingo-sim[flower]'")
    code = ("import json, torch; from flamingo_sim.integrations.flower.client import _parts; "
            f"_parts({str(EXP)!r}, json.dumps({{extra}}), 0); print(torch.backends.cpu.get_cpu_capability())")
    assert _python(code.replace("{extra}", repr(["data.proxy.n_clients=20", "fl.participants_per_round=10"]))) == "DEFAULT"
    assert _python(code.replace("{extra}", repr(["data.proxy.n_clients=20", "fl.participants_per_round=10", "fl.cpu_kernels=native"]))) == native


@pytest.mark.slow
def test_no_test_module_runs_a_torch_kernel_when_imported():
    """Collecting the whole suite runs no torch kernel: ATen's choice is still open afterwards, so an
    in-process reference run can pin the portable kernels as a command-line run does."""
    code = ("import os, sys, pytest; rc = pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', '-m', 'slow or not slow', "
            f"{str(ROOT / 'tests')!r}]); os.environ['ATEN_CPU_CAPABILITY'] = 'default'; import torch; "
            "print('CAPABILITY', rc, torch.backends.cpu.get_cpu_capability())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=600, check=False, cwd=ROOT)
    last = done.stdout.strip().splitlines()[-1]
    assert last == "CAPABILITY 0 DEFAULT", done.stdout[-3000:] + done.stderr[-3000:]
