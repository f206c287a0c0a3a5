"""Models from and to other tools: Hugging Face Marian (OPUS-MT) import and export, CTranslate2 export.

marian.py (the config and tensor mapping, written once for both directions), config_fields.py (the
config.json fields the import reads, checked for their JSON type), hf_source.py (where a source is,
its files read as untrusted input), hf_import.py, hf_export.py, cli.py (`python -m explorer.convert`).
"""
