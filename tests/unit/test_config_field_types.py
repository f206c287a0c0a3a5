"""What a config read from a file may hold, each refusal naming its field: a TrainConfig's numbers are
numbers in the range a run can use (a train_config.json saying warmup 0 divided by zero on the Schedule
page, warmup "abc" raised a TypeError there); a ModelConfig's switches are true or false ("false" was read
as true, 0 and [] as false)."""
from __future__ import annotations

import pytest

from explorer.config import ModelConfig, TrainConfig, preset


def _train(**fields):
    return TrainConfig.from_dict({**TrainConfig().to_dict(), **fields})


@pytest.mark.parametrize("field, value, message", [
    ("warmup", 0, "warmup must be >= 1, not 0"),
    ("warmup", -5, "warmup must be >= 1, not -5"),
    ("warmup", "abc", "warmup must be int, not 'abc'"),
    ("warmup", 400.0, "warmup must be int, not 400.0"),
    ("warmup", True, "warmup must be int, not True"),
    ("warmup", float("inf"), "warmup must be int, not inf"),
    ("lr_factor", "x", "lr_factor must be float, not 'x'"),
    ("lr_factor", True, "lr_factor must be float, not True"),
    ("lr_factor", 0, "lr_factor must be > 0, not 0"),
    ("label_smoothing", 1.0, "label_smoothing must be in [0, 1), not 1.0"),
    ("dropout", "0.1", "dropout must be float | None, not '0.1'"),
    ("epochs", 0, "epochs must be > 0 or null, not 0"),
    ("threads", 0, "threads must be >= 1 or null, not 0"),
    ("max_steps", None, "max_steps must be int, not None"),
    ("bf16", 1, "bf16 must be bool, not 1"),
    ("preset", 3, "preset must be str, not 3"),
])
def test_a_train_config_from_a_file_names_the_field_it_refuses(field, value, message):
    with pytest.raises(ValueError) as err:
        _train(**{field: value})
    assert str(err.value) == message


def test_a_number_that_is_not_finite_is_left_to_the_trainer_to_name():
    """NaN and infinity are floats; validate says "must be a finite number" (a JobError from launch.start)."""
    from explorer.training.args import validate
    for field in ("lr_factor", "label_smoothing", "dropout", "clip_norm", "epochs"):
        cfg = _train(**{field: float("nan")})
        with pytest.raises(ValueError, match=f"^{field} must be a finite number, not nan$"):
            validate(cfg)


def test_a_train_config_of_usable_numbers_is_read_as_written():
    cfg = _train(warmup=1, lr_factor=2, epochs=2.5, dropout=None, threads=None, clip_norm=0.0, max_steps=0)
    assert (cfg.warmup, cfg.lr_factor, cfg.epochs, cfg.max_steps) == (1, 2, 2.5, 0)
    assert TrainConfig.from_dict(TrainConfig().to_dict()) == TrainConfig()


@pytest.mark.parametrize("field", ["norm_first", "tie_embeddings"])
@pytest.mark.parametrize("value", ["false", "true", 0, 1, None, [], {}])
def test_a_model_switch_must_be_true_or_false(field, value):
    with pytest.raises(ValueError) as err:
        preset("tiny", **{field: value})
    assert str(err.value) == f"{field} must be true or false, not {value!r}"


def test_model_switches_of_true_and_false_still_build():
    assert preset("tiny", norm_first=True, tie_embeddings=False).norm_first is True
    assert ModelConfig.from_dict({**preset("tiny").to_dict(), "tie_embeddings": False}).tie_embeddings is False
