"""The parts of pages, one module per page (webapp/pages/<page>.py stays thin: widgets -> library -> figure).

layers (the Layers page: the DecoderLens table and the logit-lens grid), causes (the Causes page: the
minimal pair, the patching grids and a picked cell's patched translation).
"""
