"""One device resolver: "auto" means CUDA exactly when the machine has it, for the trainer (and its
DDP ranks), checkpoint loading, the evaluate command and the app alike."""
from __future__ import annotations

import pytest
import torch

from explorer.runtime.device import resolve_device
from explorer.store.checkpoint import load_checkpoint, save_checkpoint
from explorer.training.distributed import Dist
from support.model_helpers import FakeTokenizer, make_model


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


def test_auto_follows_whether_cuda_is_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == resolve_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")


def test_a_named_device_is_taken_as_named_and_nonsense_is_refused(no_cuda):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("cuda:1") == torch.device("cuda", 1)          # named, not checked for presence
    with pytest.raises(RuntimeError):
        resolve_device("gpu-please")


def test_a_single_process_trainer_rank_resolves_as_everyone_else(no_cuda):
    assert Dist().device("auto") == resolve_device("auto") == torch.device("cpu")
    assert Dist().device("cpu") == torch.device("cpu")


def test_loading_with_auto_puts_the_model_where_auto_resolves(tmp_path, fake_tokenizer, no_cuda):
    path = save_checkpoint(tmp_path / "ckpt", make_model(), FakeTokenizer(), meta={"name": "t"})
    loaded = load_checkpoint(path, device="auto")
    assert next(loaded.model.parameters()).device == resolve_device("auto")


def test_the_app_reads_its_device_from_the_environment(monkeypatch):
    from webapp import models

    monkeypatch.setenv(models.DEVICE_ENV, "cpu")
    assert models.app_device() == torch.device("cpu")
    monkeypatch.setenv(models.DEVICE_ENV, "cuda:3")
    assert models.app_device() == torch.device("cuda", 3)
    monkeypatch.delenv(models.DEVICE_ENV)
    assert models.app_device() == resolve_device("auto")


def test_training_turns_cudnn_attention_off_on_cuda_only(monkeypatch):
    from explorer.runtime.device import training_kernels

    calls = []
    monkeypatch.setattr(torch.backends.cuda, "enable_cudnn_sdp", lambda on: calls.append(on))
    training_kernels(torch.device("cpu"))
    assert calls == []
    training_kernels(torch.device("cuda"))
    assert calls == [False]
