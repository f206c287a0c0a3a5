"""Hostile or unlucky checkpoint configs, shared by the unit and app tests."""

# config.json "model" overrides a hostile or unlucky directory may hold
ABSURD = {
    "huge d_model": dict(d_model=2147483648, n_heads=1),
    "huge max_len": dict(max_len=50_000_000),
    "max_len as a float": dict(max_len=5e7),
    "large dims, tiny weights": dict(d_model=16384, d_ff=65536, n_heads=16),
    "large vocabulary": dict(src_vocab_size=1_000_000, tgt_vocab_size=1_000_000),
    "many layers": dict(n_encoder_layers=128, n_decoder_layers=128),
    "negative": dict(d_ff=-5),
    "boolean": dict(n_heads=True),
    "string": dict(d_model="256"),
    "nan dropout": dict(dropout=float("nan")),
}
