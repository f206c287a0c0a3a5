"""ALTI+ source and target contributions (Ferrando et al., EMNLP 2022): where each generated token
comes from, the source or the decoder's own prefix. decomposition (one attention block as one vector per
input token), blocks (every block of one teacher-forced pass), rollout (through the encoder, then the
decoder's self- and cross-attention together), sentence (one pair, as numpy data), job and
`python -m explorer contributions` (a test set, written as JSON), detached (the made-up-translation
check), alignment (the cross contributions scored as a word aligner)."""
from explorer.studies.contributions.sentence import SentenceContributions, sentence_contributions

__all__ = ["SentenceContributions", "sentence_contributions"]
