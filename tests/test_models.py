"""Models by name."""

from __future__ import annotations

import pytest
import torch

from flamingo_sim.errors import FlamingoError
from flamingo_sim.fl.training.trainer import supports_batched
from flamingo_sim.models import MODEL_NAMES, build_model


@pytest.mark.parametrize("name", ["mlp", "logreg"])
def test_proxies_output_logits_and_are_vmap_friendly(name):
    model = build_model(name, (60,), 10)
    assert model(torch.zeros(4, 60)).shape == (4, 10)
    assert supports_batched(model)


def test_seeded_build_is_reproducible_and_leaves_global_rng_alone():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    a = build_model("mlp", (60,), 10, seed=1)
    assert torch.equal(torch.random.get_rng_state(), before)
    b = build_model("mlp", (60,), 10, seed=1)
    c = build_model("mlp", (60,), 10, seed=2)
    for pa, pb, pc in zip(a.parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb)
        assert not torch.equal(pa, pc)


@pytest.mark.parametrize("name", ["mobilenet_v2", "shufflenet_v2_x2_0", "resnet34"])
def test_torchvision_models_have_n_classes_outputs_and_train_batched(name):
    model = build_model(name, (3, 32, 32), 7, seed=0).eval()
    with torch.no_grad():
        assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 7)
    assert supports_batched(model)  # BatchNorm buffers vmap with the parameters


def test_unknown_model_lists_known_names():
    with pytest.raises(FlamingoError, match="unknown model 'vgg'.*mlp.*resnet34"):
        build_model("vgg", (60,), 10)
    assert set(MODEL_NAMES) == {"mlp", "logreg", "mobilenet_v2", "shufflenet_v2_x2_0", "resnet34", "resnet34_speech"}


def test_fedscale_speech_resnet34_takes_one_channel_32x32():
    """FedScale's speech ResNet-34: 3x3 stride-1 stem over 1 channel, no max-pool, torchvision's stages."""
    import torchvision.models as tvm

    net = build_model("resnet34_speech", (1, 32, 32), 35, seed=0)
    assert net.conv1.weight.shape == (64, 1, 3, 3) and net.conv1.stride == (1, 1)
    assert isinstance(net.maxpool, torch.nn.Identity)
    assert net(torch.zeros(2, 1, 32, 32)).shape == (2, 35)
    feats = {}
    net.layer4.register_forward_hook(lambda m, i, o: feats.update(l4=tuple(o.shape)))
    net(torch.zeros(1, 1, 32, 32))
    assert feats["l4"] == (1, 512, 4, 4)
    n_params = sum(p.numel() for p in net.parameters())
    ref = sum(p.numel() for p in tvm.resnet34(weights=None, num_classes=35).parameters())
    assert n_params == ref - 64 * 3 * 7 * 7 + 64 * 1 * 3 * 3  # only the stem differs


def test_image_model_needs_rgb_shape():
    with pytest.raises(FlamingoError, match=r"needs RGB images"):
        build_model("resnet34", (60,), 10)
